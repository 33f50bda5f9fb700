"""No value, however large, aborts the process with a Lua PANIC.

lupa pushes a call's arguments and reads its results outside any protected call: an allocation
that fails there is ``PANIC: unprotected error in call to Lua API (not enough memory)`` and
SIGABRT, which in Jupyter kills the kernel. Each case runs in its own child process (it would
abort the test run otherwise) and must end normally, with a size or memory error that says what
was too big.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

MB = 1_000_000
SMALL, MEM = "INPUT_TOO_LARGE", "ADAPTER_MEMORY"

PRELUDE = textwrap.dedent(
    """
    import json, sys
    from notebook_llm import Engine, LlmError
    from notebook_llm.adapters.lua.runtime import LuaLimits, LuaSandbox as _Sandbox
    # What is under test is memory and size: the CPU and wall budgets get room enough never to
    # be what decides (filling 64 MiB in small pieces, or 100,000 events under one budget, took
    # about as long as the default 1 s of CPU on a busy machine).
    ROOMY = LuaLimits(cpu_seconds=120.0, wall_seconds=240.0)
    def LuaSandbox(source, **kw):
        kw.setdefault("limits", ROOMY)
        return _Sandbox(source, **kw)
    ECHO = '''return { name = "echo",
      transform_request = function(r) return r end,
      transform_response = function(b) return {content = #b} end,
      transform_stream_chunk = function(s) return s end,
      build_headers = function(r) return {x = "y"} end }'''
    # Fills the state to its cap in ever smaller pieces, then carries on as if nothing happened.
    FILL = '''local keep = {}
    local function fill()
      for _, k in ipairs({1000000, 100000, 10000, 1000, 100, 10, 1}) do
        pcall(function() while true do keep[#keep + 1] = ('x'):rep(k) end end)
      end
      for i = 1, 500 do pcall(function() keep[#keep + 1] = {} end) end
    end
    return { name = "fill",
      transform_request = function(r) fill() return RESULT end,
      transform_stream_chunk = function(s) fill() return RESULT end }'''
    def fill(result):
        return LuaSandbox(FILL.replace("RESULT", result))
    # Fills the state to the byte: a full collection between rounds, so that no garbage is left
    # for the emergency collection of a failed allocation to free.
    TIGHT = '''local chain, size = false, 0
    local rep, pc, gc = string.rep, pcall, collectgarbage
    local function grow() local s = rep("x", size); chain = {s, chain} end
    local function grow1() chain = {chain} end
    local function fill()
      for _, k in ipairs({65536, 4096, 512, 64}) do size = k; while pc(grow) do end end
      for round = 1, 20 do gc(); while pc(grow1) do end end
      gc(); while pc(grow1) do end
    end
    return { name = "tight", transform_request = function(r)
      fill()
      local ok, e = pc(require, r)
      chain = false
      gc()
      return tostring(ok) .. " " .. tostring(e)
    end }'''
    def tight():
        return LuaSandbox(TIGHT, limits=LuaLimits(120.0, 4 << 20, wall_seconds=120.0))
    def main():
    """
)

CASES: dict[str, tuple[str, set[str]]] = {
    # the examples of the review
    "mock-70MB-prompt": (
        "Engine(config_file=False).complete_sync(provider='mock', model='echo',"
        f" prompt='x' * {70 * MB})",
        {SMALL},
    ),
    "80MB-tool-result": (
        "LuaSandbox(ECHO).call('transform_request', {'messages': [{'role': 'tool',"
        f" 'tool_call_id': 'c1', 'content': 'r' * {80 * MB}}}]}})",
        {SMALL},
    ),
    # one read holding five 15 MiB events: they go to the hook in parts that fit
    "five-15MiB-events-in-one-read": (
        "out, err = LuaSandbox(ECHO).call_each('transform_stream_chunk',"
        " ['d' * (15 << 20)] * 5)\nif err: raise err\nassert len(out) == 5",
        {"OK", MEM},
    ),
    # an SSE event of five 15 MiB data lines: one 75 MiB payload
    "one-75MiB-event": (
        "_, err = LuaSandbox(ECHO).call_each('transform_stream_chunk', ['d' * (75 << 20)])\n"
        "raise err",
        {SMALL},
    ),
    "80MB-non-streamed-body": (
        f"LuaSandbox(ECHO).call('transform_response', 'b' * {80 * MB})",
        {SMALL},
    ),
    "fill-then-return-a-string": ("fill(\"'done'\").call('transform_request', '{}')", {MEM, "OK"}),
    "fill-then-return-a-table": ("fill('{a = 1}').call('transform_request', '{}')", {MEM, "OK"}),
    "fill-then-return-nothing": ("fill('nil').call('transform_request', '{}')", {MEM, "OK"}),
    "fill-in-a-stream-hook": (
        "_, err = fill(\"'x'\").call_each('transform_stream_chunk', ['a', 'b'])\nif err: raise err",
        {MEM, "OK"},
    ),
    # beyond the examples
    "non-ascii-prompt": (
        f"LuaSandbox(ECHO).call('transform_request', '\\u00e9' * {40 * MB})",
        {SMALL},
    ),
    "big-headers-argument": (
        f"LuaSandbox(ECHO).call('build_headers', {{'body': 'b' * {70 * MB}}})",
        {SMALL},
    ),
    "fill-then-a-dict-argument": (
        "sb = fill('nil')\n"
        "try:\n"
        "    sb.call('transform_request', '{}')\n"
        "except LlmError:\n"
        "    pass\n"
        "sb.call('transform_request', {'k': ['v' * 1000] * 1000})",
        {MEM, SMALL, "OK"},
    ),
    "fill-then-base64-of-what-is-left": (
        "LuaSandbox(FILL.replace('RESULT', 'base64_encode(keep[1] .. keep[2])'))"
        ".call('transform_request', '{}')",
        {MEM},
    ),
    "fill-then-sha256": (
        "LuaSandbox(FILL.replace('RESULT', 'sha256_hex(\"abc\")')).call('transform_request', '{}')",
        {MEM, "OK"},
    ),
    "fill-at-load-time": (
        "LuaSandbox(FILL.replace('return { name', 'fill() return { name').replace('RESULT', '1'))",
        {"INVALID_ADAPTER"},
    ),
    "many-events-in-one-read": (
        "out, err = LuaSandbox(ECHO).call_each('transform_stream_chunk', ['e' * 1000] * 100000)\n"
        "if err: raise err\n"
        "assert len(out) == 100000, len(out)",
        {"OK"},
    ),
    # require hands back a library, or the names of those there are, from Python: a result
    # that does not fit is a memory error, never a failed push inside the callback (which left
    # the GIL taken: the process hung)
    "full-state-then-require-an-unknown-library": (
        "print(tight().call('transform_request', 'nosuch'))",
        {MEM, "OK"},
    ),
    "full-state-then-require-a-library": (
        "print(tight().call('transform_request', 'openai_compat'))",
        {MEM, "OK"},
    ),
    "return-a-string-near-the-cap": (
        "sb = LuaSandbox('return { transform_request = function() return (\"z\"):rep(60 << 20) end }')\n"
        "assert len(sb.call('transform_request')) == 60 << 20",
        {"OK", MEM},
    ),
}


def _run(body: str) -> tuple[int, str, str]:
    code = (
        PRELUDE
        + "    try:\n"
        + textwrap.indent(body, " " * 8)
        + '\n        print(json.dumps(["OK", ""]))\n'
        + "    except LlmError as err:\n"
        + "        print(json.dumps([str(err.code), str(err)]))\n"
        + "main()\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("name", list(CASES))
def test_the_process_survives_with_a_size_or_memory_error(name: str) -> None:
    body, codes = CASES[name]
    rc, out, err = _run(body)
    assert rc == 0, f"the child ended with {rc}: {err[-1500:]}"
    code, message = json.loads(out.strip().splitlines()[-1])
    assert code in codes, message
    if code != "OK":
        assert "\n" not in message, message  # one line
    if code == SMALL:  # says what was too big, and by how much
        assert "MiB" in message, message
        assert "memory limit" in message, message
