"""Bytes and messages the live view sends for a 20,000-token answer, against a naive view.

The naive view re-renders the whole answer into one ``HTML`` widget on every token (what
"update the display on each chunk" amounts to). The live view (``StreamView``) coalesces to
<= 20 updates a second and sends only the open paragraph. Both are fed the same synthetic
stream with a simulated clock (default 100 tokens/s), and every comm message is recorded.

    python bench/bench_view.py [--tokens 20000] [--rate 100]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import comm
import ipywidgets as w
from comm.base_comm import BaseComm

from notebook_llm.protocol import (
    BlockEnd,
    BlockStart,
    Finish,
    TextBlock,
    TextDelta,
    TokenUsage,
    Usage,
)
from notebook_llm.widgets.stream_view import StreamView

LOG: list[int] = []


class CountingComm(BaseComm):
    def publish_msg(
        self,
        msg_type: str,
        data: Any = None,
        metadata: Any = None,
        buffers: Any = None,
        **keys: Any,
    ) -> None:
        LOG.append(len(json.dumps(data, default=str).encode()))


comm.create_comm = lambda **kw: CountingComm(**kw)


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


def run_live(pieces: list[str], rate: float) -> tuple[int, int]:
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
    return len(LOG), sum(LOG)


def run_naive(pieces: list[str]) -> tuple[int, int]:
    LOG.clear()
    html = w.HTML()
    text = ""
    for piece in pieces:
        text += piece
        html.value = text
    return len(LOG), sum(LOG)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=100.0, help="simulated tokens per second")
    args = parser.parse_args()
    pieces = tokens(args.tokens)
    answer = len("".join(pieces).encode())
    started = time.perf_counter()
    live_msgs, live_bytes = run_live(pieces, args.rate)
    live_time = time.perf_counter() - started
    started = time.perf_counter()
    naive_msgs, naive_bytes = run_naive(pieces)
    naive_time = time.perf_counter() - started
    print(f"answer: {args.tokens} tokens, {answer:,} bytes, simulated at {args.rate:g} tokens/s")
    print(
        f"live view : {live_msgs:>8,} messages {live_bytes:>15,} bytes  ({live_bytes / answer:.1f} x answer, {live_time:.2f} s CPU)"
    )
    print(
        f"naive view: {naive_msgs:>8,} messages {naive_bytes:>15,} bytes  ({naive_bytes / answer:.1f} x answer, {naive_time:.2f} s CPU)"
    )
    print(
        f"ratio naive/live: {naive_msgs / live_msgs:.0f}x messages, {naive_bytes / live_bytes:.0f}x bytes"
    )
    for n in (args.tokens // 4, args.tokens // 2):
        msgs, size = run_live(tokens(n), args.rate)
        print(f"  live at {n:>6} tokens: {msgs:>6,} messages {size:>12,} bytes")


if __name__ == "__main__":
    main()
