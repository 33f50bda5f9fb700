"""The live view's traffic for a 20,000-token answer, and the saved notebook's size, beside goal 2.

The goal: the live view sends at most 2x the answer's bytes, in at most 20 front-end
updates a second, with Markdown still rendered live.

* ``StreamView`` is fed a synthetic Markdown answer (paragraphs, now and then a code block) at a
  simulated 100 tokens/s (an injected clock), and EVERY comm message is recorded: the widgets'
  ``comm_open`` states, state updates, custom messages (the deltas) and ``comm_close``. The
  figure for the goal is the bytes of each message's ``data`` as ipykernel serializes it
  (JSON). Beside it: what the same messages weigh with the Jupyter protocol's own envelope
  (header, parent header, HMAC signature, comm id), built by ``jupyter_client.Session``; that
  part grows with the number of messages, not with the design of the view.
* The one-off cost of the Markdown library (one widget model per kernel, made by the first
  view) is shown apart: it does not depend on the answer.
* A naive view (the whole answer re-sent into one ``HTML`` widget on each token) for scale.
* ``--notebook`` (default on): a notebook with a ``%%llm mock:echo`` cell whose answer is the
  same 20,000 tokens, run headless with nbclient and saved; its outputs' bytes against the
  answer's. (A headless run makes no widgets; in JupyterLab the live view is replaced by the
  same static output when the turn ends, and JupyterLab does not save widget state by default.)

    python bench/bench_view.py [--tokens 20000] [--rate 100] [--no-notebook]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import comm
import ipywidgets as w
from comm.base_comm import BaseComm
from jupyter_client.session import Session

from notebook_llm.core.protocol import (
    BlockEnd,
    BlockStart,
    Finish,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)
from notebook_llm.notebook.widgets.live import library
from notebook_llm.notebook.widgets.stream_view import StreamView

BYTES_GOAL = 2.0
RATE_GOAL = 20.0

#: (msg_type, data) of every comm message sent.
LOG: list[tuple[str, Any]] = []
SESSION = Session(key=b"0" * 32)
PARENT = SESSION.msg("execute_request", {"code": "%%llm mock:lorem\n..."})


class CountingComm(BaseComm):
    def publish_msg(
        self,
        msg_type: str,
        data: Any = None,
        metadata: Any = None,
        buffers: Any = None,
        **keys: Any,
    ) -> None:
        LOG.append((msg_type, data))


comm.create_comm = lambda **kw: CountingComm(**kw)


def data_bytes(data: Any) -> int:
    return len(json.dumps(data, default=str, ensure_ascii=False).encode())


def wire_bytes(msg_type: str, data: Any) -> int:
    """The message as ipykernel sends it on IOPub: envelope frames + signature + JSON parts."""
    content = {"comm_id": "0" * 32, "data": data}
    msg = SESSION.msg(msg_type, content, parent=PARENT)
    return sum(len(frame) for frame in SESSION.serialize(msg))


def tokens(n: int) -> list[str]:
    """Markdown-ish text: ~60-token paragraphs, a code block now and then."""
    out = []
    for i in range(n):
        if i % 600 == 300:
            out.append("\n\n```python\nprint('hi')\n```\n\n")
        out.append(("\n\n" if i % 60 == 59 else " ") + f"word{i % 97}")
    return out


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def run_live(pieces: list[str], rate: float) -> list[tuple[str, Any]]:
    LOG.clear()
    clock = Clock()
    view = StreamView("mock:lorem", clock=clock)
    view.handle(BlockStart(0, "text"))
    for piece in pieces:
        clock.now += 1 / rate
        view.handle(TextDelta(0, piece))
        view.maybe_flush()
    view.handle(BlockEnd(0, TextBlock("".join(pieces))))
    view.handle(Usage(TokenUsage(10, len(pieces))))
    view.handle(Finish.stop())
    view.finish(status="done")
    view.close()
    return list(LOG)


def run_tool_call(pieces: list[str], rate: float) -> list[tuple[str, Any]]:
    """A tool call whose arguments (a file's content, say) stream as ``pieces``."""
    LOG.clear()
    clock = Clock()
    view = StreamView("mock:tools", clock=clock)
    view.handle(BlockStart(0, "tool-call"))
    for i, piece in enumerate(pieces):
        clock.now += 1 / rate
        view.handle(ToolCallDelta(0, "c1" if i == 0 else None, piece, "write" if i == 0 else None))
        view.maybe_flush()
    view.handle(BlockEnd(0, ToolCallBlock("c1", "write", "".join(pieces))))
    view.handle(Finish.stop())
    view.finish(status="done")
    view.close()
    return list(LOG)


def run_naive(pieces: list[str]) -> list[tuple[str, Any]]:
    LOG.clear()
    html = w.HTML()
    text = ""
    for piece in pieces:
        text += piece
        html.value = text
    return list(LOG)


def saved_notebook(n_tokens: int) -> tuple[int, int, int]:
    """(answer bytes, outputs bytes, file bytes) of a headless run saved with nbformat."""
    import nbformat
    from nbclient import NotebookClient

    answer = " ".join(f"word{i % 97}" for i in range(n_tokens))
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext notebook_llm"),
        nbformat.v4.new_code_cell(f"text = ' '.join(f'word{{i % 97}}' for i in range({n_tokens}))"),
        nbformat.v4.new_code_cell("%%llm mock:echo\n{text}"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        NotebookClient(
            nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": tmp}}
        ).execute()
        path = Path(tmp) / "saved.ipynb"
        nbformat.write(nb, path)
        size = path.stat().st_size
    outputs = sum(len(json.dumps(o, ensure_ascii=False).encode()) for o in nb.cells[2].outputs)
    return len(answer.encode()), outputs, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=100.0, help="simulated tokens per second")
    parser.add_argument("--no-notebook", dest="notebook", action="store_false")
    args = parser.parse_args()
    pieces = tokens(args.tokens)
    answer = len("".join(pieces).encode())
    seconds = args.tokens / args.rate
    LOG.clear()
    library()  # once per kernel, before the first view
    lib = sum(data_bytes(d) for _, d in LOG)
    started = time.perf_counter()
    live = run_live(pieces, args.rate)
    cpu = time.perf_counter() - started
    naive = run_naive(pieces)
    live_data = sum(data_bytes(d) for _, d in live)
    live_wire = sum(wire_bytes(t, d) for t, d in live)
    kinds = {k: sum(1 for t, _ in live if t == k) for k in ("comm_open", "comm_msg", "comm_close")}
    naive_data = sum(data_bytes(d) for _, d in naive)
    per_s = len(live) / seconds
    ok = "met" if live_data <= BYTES_GOAL * answer and per_s <= RATE_GOAL else "NOT met"
    print(f"answer: {args.tokens:,} tokens, {answer:,} bytes, simulated at {args.rate:g} tok/s")
    print(
        f"live view : {len(live):>6,} messages ({kinds['comm_open']} open, "
        f"{kinds['comm_msg']:,} msg, {kinds['comm_close']} close), {per_s:.1f}/s "
        f"(goal <= {RATE_GOAL:g}/s), {cpu:.2f} s CPU"
    )
    print(
        f"  comm data   {live_data:>12,} bytes = {live_data / answer:5.2f} x answer "
        f"(goal <= {BYTES_GOAL:g}x): goal 2 {ok}"
    )
    print(
        f"  on the wire {live_wire:>12,} bytes = {live_wire / answer:5.2f} x answer "
        f"(with Jupyter's per-message envelope, {(live_wire - live_data) / len(live):.0f} B each)"
    )
    print(f"  once per kernel: the Markdown library's model, {lib:,} bytes")
    print(
        f"naive view: {len(naive):>6,} messages, {naive_data:>14,} bytes = "
        f"{naive_data / answer:.0f} x answer"
    )
    for n in (args.tokens // 4, args.tokens // 2):
        part = tokens(n)
        size = sum(data_bytes(d) for _, d in run_live(part, args.rate))
        print(f"  live at {n:>6,} tokens: {size / len(''.join(part).encode()):.2f} x answer")
    arg_pieces = [f"line {i} of the file\\n" for i in range(args.tokens // 4)]
    arg_bytes = len("".join(arg_pieces).encode())
    tool = sum(data_bytes(d) for _, d in run_tool_call(arg_pieces, args.rate))
    print(
        f"tool call, arguments in {len(arg_pieces):,} pieces ({arg_bytes:,} bytes): comm data "
        f"{tool:,} bytes = {tool / arg_bytes:.2f} x the arguments"
    )
    if args.notebook:
        answer_nb, outputs, size = saved_notebook(args.tokens)
        print(
            f"saved .ipynb after a {args.tokens:,}-token answer ({answer_nb:,} bytes): outputs "
            f"{outputs:,} bytes = {outputs / answer_nb:.2f} x answer (text/html + "
            f"text/plain), whole file {size:,} bytes"
        )


if __name__ == "__main__":
    main()
