"""How long drafting an adapter from a 1 MB recorded body takes.

Run: ``python bench/bench_draft.py``. Builds three 1 MB bodies from the recorded ones (an OpenAI
SSE stream, Anthropic's event-typed SSE and an Ollama NDJSON stream, their text payloads repeated
until the body is 1 MB, the end kept last) and prints, for each, the time to draft (framing,
inference and Lua writing: what the goal of under a second is about), separately the time of the
conformance check the draft then runs on the same body, and the time one replay of the body
takes through the draft and through the built-in adapter of its family (their ratio: what the
shared ``draft_support`` library costs at run time), and the Lua CPU time of handing every
payload of the body to the hook in one call (what the hook's 1 s budget is measured against).
Then the time to draft from two bodies.
Median of 3 runs each; one run of the whole script takes some seconds.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.lua.runtime import LuaLimits, LuaSandbox
from notebook_llm.conformance.draft import draft_adapter
from notebook_llm.conformance.fixtures import CONTENT_TYPES, Fixture
from notebook_llm.conformance.kit import replay_fixture
from notebook_llm.wire.ndjson import NDJSONDecoder
from notebook_llm.wire.sse import SSEDecoder

ROOT = Path(__file__).resolve().parent.parent
WIRE = ROOT / "tests" / "fixtures" / "wire"
MB = 1024 * 1024


def _grow(path: Path, sep: bytes, keep_tail: int) -> bytes:
    """``path``'s body with its middle payloads repeated until it is 1 MB."""
    parts = [p for p in path.read_bytes().split(sep) if p.strip()]
    head, middle, tail = parts[:2], parts[2:-keep_tail], parts[-keep_tail:]
    out = list(head)
    size = sum(len(p) + len(sep) for p in head + tail)
    while size < MB:
        for p in middle:
            out.append(p)
            size += len(p) + len(sep)
    out.extend(tail)
    return sep.join(out) + sep


def _replay(adapter: LuaAdapter, body: bytes, framing: str) -> float:
    fixture = Fixture(Path("b"), body, framing, 200, CONTENT_TYPES[framing])
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        replay_fixture(adapter, fixture)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def _lua_cpu(source: str, body: bytes, framing: str) -> float:
    """CPU seconds of one call of the stream hook over every payload of ``body``."""
    if framing == "ndjson":
        nd = NDJSONDecoder()
        items = nd.feed(body) + nd.flush()
    else:
        sse = SSEDecoder()
        items = [p for p in sse.feed_data(body) + sse.flush_data() if p != "[DONE]"]
    sandbox = LuaSandbox(source, name="bench", limits=LuaLimits(cpu_seconds=60))
    t0 = time.process_time()
    sandbox.call_each("transform_stream_chunk", items)
    return time.process_time() - t0


def main() -> None:
    bodies = {
        "openai SSE": _grow(WIRE / "openai" / "stream_text_include_usage.sse", b"\n\n", 3),
        "anthropic event SSE": _grow(WIRE / "anthropic" / "stream_text.sse", b"\n\n", 4),
        "ollama NDJSON": _grow(WIRE / "ollama" / "stream_text.ndjson", b"\n", 1),
    }
    families = {
        "openai SSE": "openai",
        "anthropic event SSE": "anthropic",
        "ollama NDJSON": "ollama",
    }
    print(
        f"{'body':22} {'size':>9} {'payloads':>9} {'draft':>10} {'check':>10}  own body  "
        "replay: draft / built-in"
    )
    for label, body in bodies.items():
        drafts, checks = [], []
        ok = True
        payloads = 0
        for _ in range(3):
            t0 = time.perf_counter()
            d = draft_adapter(body, "bench", check=False)
            drafts.append(time.perf_counter() - t0)
            payloads = len(d.inference.body.payloads)
            t0 = time.perf_counter()
            checked = draft_adapter(body, "bench")
            checks.append(time.perf_counter() - t0 - checked.draft_seconds)
            ok = ok and checked.ok
        draft_s, check_s = statistics.median(drafts), statistics.median(checks)
        framing = d.inference.body.framing
        builtin_path = ROOT / "adapters" / f"{families[label]}.lua"
        mine = _replay(LuaAdapter.from_source(d.source, name="bench"), body, framing)
        builtin = _replay(LuaAdapter.from_file(builtin_path), body, framing)
        cpu_mine = _lua_cpu(d.source, body, framing)
        cpu_builtin = _lua_cpu(builtin_path.read_text("utf-8"), body, framing)
        print(
            f"{label:22} {len(body) / MB:7.2f}MB {payloads:9} {draft_s:9.3f}s {check_s:9.3f}s  "
            + ("ok      " if ok else "NOT ok  ")
            + f"  {mine:.3f}s / {builtin:.3f}s = {mine / builtin:.1f}x; "
            + f"Lua CPU {cpu_mine:.3f}s / {cpu_builtin:.3f}s"
        )
    two = [bodies["openai SSE"], (WIRE / "openai" / "stream_tool_call_args_split.sse").read_bytes()]
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        draft_adapter(two, "bench", check=False)
        runs.append(time.perf_counter() - t0)
    print(
        f"two bodies (1 MB OpenAI SSE + a tool-call stream): draft {statistics.median(runs):.3f}s"
    )
    print("goal: draft under 1 s for a 1 MB body (the check replays the body through Lua, apart)")


if __name__ == "__main__":
    main()
