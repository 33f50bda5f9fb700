"""Benchmarks of the Lua sandbox JSON hot path and sandbox construction (prints µs figures).

Run: python bench/bench_lua_json.py

Hot path of a stream: Python hands one SSE ``data:`` payload (~300 bytes, OpenAI chunk) to the
adapter's ``transform_stream_chunk``, which does json.decode -> small transform -> json.encode,
and Python json.loads the result. Compared approaches:

* pure-Lua codec (notebook_llm/adapters/lua/json.lua) in Lua 5.4 — the one used;
* Python ``json`` through the lupa bridge, building marked Lua tables from Python;
* Python decode + Lua encode (hybrid).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from lupa import lua54

from notebook_llm.adapters.lua.runtime import LuaSandbox, _builtin

CHUNK = json.dumps(
    {
        "id": "chatcmpl-AbC123xyz",
        "object": "chat.completion.chunk",
        "created": 1732900000,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_0ba0d124f1",
        "choices": [
            {
                "index": 0,
                "delta": {"content": " world, this is a token"},
                "logprobs": None,
                "finish_reason": None,
            }
        ],
        "usage": None,
    }
)

TRANSFORM = """
local M = {name = "bench"}
function M.transform_stream_chunk(line)
  local d = json.decode(line)
  local c = d.choices[1]
  local out = {content = c.delta.content or "", done = c.finish_reason ~= nil}
  return json.encode(out)
end
return M
"""

N = 20_000


def per_call_us(fn: Callable[[], Any], n: int = N) -> float:
    for _ in range(min(n, 500)):
        fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def big_script(lines: int = 300) -> str:
    out = ["local M = {name = 'big', version = '1.0', headers = {['X-Test'] = 'yes'}}"]
    i = 0
    while len(out) < lines - 12:
        out += [
            f"local function helper_{i}(t, k)",
            "  local r = {}",
            "  for i, v in ipairs(t) do",
            f"    if type(v) == 'table' then r[#r + 1] = v[k] or {i} else r[#r + 1] = v end",
            "  end",
            "  return r",
            "end",
        ]
        i += 1
    out += [
        "function M.transform_request(raw)",
        "  local r = json.decode(raw)",
        "  r.stream_options = {include_usage = true}",
        "  return json.encode(r)",
        "end",
        "function M.transform_stream_chunk(line)",
        "  local d = json.decode(line)",
        "  local c = d.choices[1]",
        "  return json.encode({content = c.delta.content or '', done = false})",
        "end",
        "return M",
    ]
    return "\n".join(out)


def main() -> None:
    print(f"chunk: {len(CHUNK)} bytes, {N} iterations")
    print(
        f"python json.loads                       {per_call_us(lambda: json.loads(CHUNK)):6.2f} µs"
    )
    print(
        "python json.loads+dumps                 "
        f"{per_call_us(lambda: json.dumps(json.loads(CHUNK))):6.2f} µs"
    )

    # Pure-Lua codec, raw lupa state (no sandbox).
    lua = lua54.LuaRuntime(register_eval=False, register_builtins=False)
    load = lua.globals().load
    g = lua.globals()
    lib, control = load(_builtin("json.lua"), "=json", "b")(
        g.debug.getmetatable, g.debug.setmetatable
    )
    lua.globals().J = lib
    loop = lua.eval("function(s, n) local d, e = J.decode, J.encode for i=1,n do e(d(s)) end end")
    t = time.perf_counter()
    loop(CHUNK, N)
    print(f"pure-Lua decode+encode (in-Lua loop)    {(time.perf_counter() - t) / N * 1e6:6.2f} µs")
    dec = lua.eval("function(s, n) local d = J.decode for i=1,n do d(s) end end")
    t = time.perf_counter()
    dec(CHUNK, N)
    print(f"  pure-Lua decode only                  {(time.perf_counter() - t) / N * 1e6:6.2f} µs")
    control.set_keep_order(False)  # the stream hot path: key order not recorded
    t = time.perf_counter()
    dec(CHUNK, N)
    print(f"  hot-path decode (no key order)        {(time.perf_counter() - t) / N * 1e6:6.2f} µs")
    control.set_keep_order(True)
    obj = lib.decode(CHUNK)
    enc = lua.eval("function(o, n) local e = J.encode for i=1,n do e(o) end end")
    t = time.perf_counter()
    enc(obj, N)
    print(f"  pure-Lua encode only                  {(time.perf_counter() - t) / N * 1e6:6.2f} µs")

    # Python json through the bridge: build marked Lua tables from Python.
    setmt = lua.eval("setmetatable")
    getmt = lua.eval("debug.getmetatable")  # the markers hide behind __metatable
    amt, omt, null = getmt(lib.array()), getmt(lib.object()), lib.null
    lua_type = lua54.lua_type

    def to_lua(v: Any) -> Any:
        if isinstance(v, dict):
            return setmt(lua.table_from({k: to_lua(x) for k, x in v.items()}), omt)
        if isinstance(v, list):
            return setmt(lua.table_from([to_lua(x) for x in v]), amt)
        return null if v is None else v

    def from_lua(v: Any) -> Any:
        if v == null:
            return None
        if lua_type(v) == "table":
            if getmt(v) == amt:
                return [from_lua(x) for x in v.values()]
            return {k: from_lua(x) for k, x in v.items()}
        return v

    lua.globals().pyd = lambda s: to_lua(json.loads(s))
    lua.globals().pye = lambda v: json.dumps(from_lua(v))
    bridge = lua.eval("function(s) return pye(pyd(s)) end")
    print(f"python-bridge decode+encode             {per_call_us(lambda: bridge(CHUNK)):6.2f} µs")
    # lupa's own recursive conversion: no markers, nulls dropped; a lower
    # bound for any Python-side decoder, since the real one must also mark each table.
    table_from = lua.table_from
    print(
        "json.loads + table_from(recursive=True) "
        f"{per_call_us(lambda: table_from(json.loads(CHUNK), recursive=True)):6.2f} µs"
    )
    hybrid = lua.eval("function(s) return J.encode(pyd(s)) end")
    print(f"python decode + Lua encode              {per_call_us(lambda: hybrid(CHUNK)):6.2f} µs")

    # Whole pipeline through the sandbox (hook active, budget accounting, result checks).
    sb = LuaSandbox(TRANSFORM, name="bench")
    floor = LuaSandbox("return {echo = function(s) return s end}", name="floor")
    print(
        "sandbox.call floor (echo 300 B)         "
        f"{per_call_us(lambda: floor.call('echo', CHUNK)):6.2f} µs"
    )
    print(
        "PIPELINE sandbox transform + json.loads "
        f"{per_call_us(lambda: json.loads(sb.call('transform_stream_chunk', CHUNK))):6.2f} µs"
    )

    # Construction.
    src = big_script()
    LuaSandbox(src, name="big")  # warm the bytecode cache
    print(f"script: {src.count(chr(10)) + 1} lines")
    print(
        "LuaSandbox() construction, cached code  "
        f"{per_call_us(lambda: LuaSandbox(src, name='big'), 500):6.1f} µs"
    )
    base = LuaSandbox(src, name="big")
    print(f"LuaSandbox.clone()                      {per_call_us(base.clone, 500):6.1f} µs")
    k = [0]

    def cold() -> None:
        k[0] += 1
        LuaSandbox(src + f"\n-- {k[0]}", name="big")

    print(f"LuaSandbox() construction, new source   {per_call_us(cold, 300):6.1f} µs")


if __name__ == "__main__":
    main()
