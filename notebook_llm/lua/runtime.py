"""Sandboxed execution of Lua adapter scripts (the HomeAgent adapter contract).

One :class:`LuaSandbox` is one fresh Lua 5.4 state running one script; the engine makes one per
stream, so per-stream state in a script is safe. Construction is cheap because the script, the
JSON codec and the setup chunk are compiled once per process and loaded as bytecode afterwards
(bytecode is produced only by us, in a separate compile-only state; scripts can't load any).

Why Lua 5.4 and not LuaJIT (measured with lupa 2.8, see the report in bench/bench_lua_json.py):
a count hook never fired inside a JIT-compiled loop under LuaJIT 2.1 (a 2e8-iteration loop ran to
completion with the hook set: 0 hook calls), so a CPU budget can't be enforced without turning the
JIT off; and LuaJIT has no integers (2^53+1 became 9.007199254741e+15). Lua 5.4 fires the hook
and keeps 9007199254740993 exact. Both enforce ``max_memory``.

Limits (:class:`LuaLimits`), per call of a hook (and for running the script's top level; the
stream payloads of one network read go to ``transform_stream_chunk`` in one call,
:meth:`LuaSandbox.call_each`, under one budget: one crossing into Lua instead of one per
payload, which measured about a third of the per-chunk cost):

* CPU: a count hook every ``hook_interval`` VM instructions compares the calling thread's CPU time
  (``time.thread_time``, minus time spent in ``http_get``/``http_post``/``log``) with
  ``cpu_seconds``. Over budget, it raises on every instruction, so ``pcall`` can't swallow it;
  every coroutine gets the hook too. -> ``ADAPTER_TIMEOUT``.
* Memory: ``LuaRuntime(max_memory=...)`` for the whole state. -> ``ADAPTER_MEMORY``.
* Stack overflow / any other Lua error -> ``ADAPTER_ERROR`` naming adapter, hook and line.

After a limit error the sandbox stays USABLE: the error unwinds the Lua stack normally, so the state
is consistent and the next :meth:`LuaSandbox.call` gets a fresh budget (the script's own variables
may hold whatever it had written before it was stopped). Known limit: a single C-level operation
(e.g. a pathological ``string.find`` pattern) runs to its end before the hook can fire.

Thread safety: separate sandboxes can be used from separate threads in parallel (lupa releases
the GIL while Lua runs). One sandbox is not meant for concurrent calls; lupa serialises them.
"""

from __future__ import annotations

import functools
import json
import threading
from dataclasses import dataclass
from importlib import resources
from typing import Any

from lupa import lua54

from ..errors import ErrorCode, LlmError
from .host import Budget, Host, HttpBridge, LogCallback
from .lines import line_of as _line_of

DEFAULT_ENDPOINT = "/chat/completions"


@dataclass
class LuaLimits:
    """Per-call limits of a sandbox."""

    #: CPU time (of the calling thread) one hook call may use.
    cpu_seconds: float = 1.0
    #: Memory cap of the whole Lua state.
    memory_bytes: int = 64 * 1024 * 1024
    #: VM instructions between two budget checks.
    hook_interval: int = 10_000
    #: Wall-clock time one hook call may take, its http_get / http_post calls included.
    wall_seconds: float = 30.0


# ---------------------------------------------------------------------------- compilation

_compile_lock = threading.Lock()
_compiler: Any = None


def _compile_fn() -> Any:
    global _compiler
    if _compiler is None:
        rt = lua54.LuaRuntime(encoding=None, register_eval=False, register_builtins=False)
        _compiler = rt.eval(
            "function(src, name) local f, err = load(src, name, 't')"
            " if not f then return nil, err end return string.dump(f) end"
        )
    return _compiler


class _SyntaxFailure(Exception):
    pass


@functools.lru_cache(maxsize=256)
def _compile(source: str, chunkname: str) -> bytes:
    """Compile Lua source to bytecode in a compile-only state (never runs code)."""
    with _compile_lock:
        result = _compile_fn()(source.encode("utf-8"), chunkname.encode("utf-8"))
    code, err = result if isinstance(result, tuple) else (result, None)
    if code is None:
        raise _SyntaxFailure(bytes(err or b"syntax error").decode("utf-8", "replace"))
    return bytes(code)


@functools.cache
def _builtin(name: str) -> bytes:
    text = resources.files(__package__).joinpath(name).read_text("utf-8")
    return _compile(text, f"=nbllm.{name}")


def _deny_attribute(obj: Any, attr_name: Any, is_setting: bool) -> Any:
    raise AttributeError("Python attribute access is not available in the sandbox")


def _tuple(result: Any) -> tuple[Any, Any, Any, Any]:
    items = list(result) if isinstance(result, tuple) else [result]
    items += [None] * (4 - len(items))
    return items[0], items[1], items[2], items[3]


# ---------------------------------------------------------------------------- the sandbox


class LuaSandbox:
    """One fresh sandboxed Lua 5.4 state running one adapter script.

    Raises ``LlmError(INVALID_ADAPTER)`` if the script fails to compile or run, or does not
    return a table; the error carries the Lua message, ``lua_line`` and the adapter name.
    """

    def __init__(
        self,
        source: str,
        *,
        name: str | None = None,
        chunkname: str | None = None,
        limits: LuaLimits | None = None,
        http: HttpBridge | None = None,
        log: LogCallback | None = None,
    ) -> None:
        self._source = source
        self._given_name = name
        self._name = name or "adapter"
        self._chunkname = chunkname or f"={self._name}"
        self.limits = limits or LuaLimits()
        self._http = http
        self._log = log
        self._budget = Budget(self.limits.cpu_seconds, self.limits.wall_seconds)
        self._host = Host(self._name, self._budget, http, log)
        self._meta: dict[str, Any] = {}

        try:
            code = _compile(source, self._chunkname)
        except _SyntaxFailure as exc:
            msg = str(exc)
            raise LlmError(
                f"adapter '{self._name}' does not compile: {msg}",
                ErrorCode.INVALID_ADAPTER,
                adapter=self._name,
                lua_line=_line_of(msg, self._chunkname),
            ) from None

        lua = lua54.LuaRuntime(
            register_eval=False,
            register_builtins=False,
            unpack_returned_tuples=True,
            max_memory=self.limits.memory_bytes,
            attribute_filter=_deny_attribute,
        )
        g = lua.globals()
        load = g.load
        json_lib, json_control = load(_builtin("json.lua"), "=nbllm.json", "b")(
            g.debug.getmetatable, g.debug.setmetatable
        )
        cfg = lua.table_from(
            {
                "json": json_lib,
                "json_control": json_control,
                "interval": int(self.limits.hook_interval),
                # ~640 bytes of stack and CallInfo per frame: stop recursion well before the cap.
                "max_depth": max(200, min(200_000, self.limits.memory_bytes // 640)),
                **self._host.callables(),
            }
        )
        entry = load(_builtin("sandbox.lua"), "=nbllm.sandbox", "b")(cfg)
        self._lua = lua
        self._entry_call = entry.call
        self._entry_call_each = entry.call_each
        self._entry_has = entry.has
        self._entry_decode = entry.decode
        self._lua_json_stats = entry.json_stats

        self._budget.begin()
        status, value, line, _tb = _tuple(entry.load(code, self._chunkname))
        if status != "ok":
            raise self._load_error(status, value, line)
        self._budget.begin()
        status, value, line, _tb = _tuple(entry.meta())
        if status != "ok":
            raise self._load_error(status, value, line)
        meta = json.loads(value)
        self._meta = {
            **meta["extra"],
            "name": str(meta["name"]) if meta.get("name") is not None else self._name,
            "version": str(meta["version"]) if meta.get("version") is not None else "",
            "endpoint": (
                str(meta["endpoint"]) if meta.get("endpoint") is not None else DEFAULT_ENDPOINT
            ),
            "headers": {str(k): str(v) for k, v in meta["headers"].items()},
        }
        self._hooks = frozenset(meta["hooks"])
        self._name = self._meta["name"]
        self._host.set_name(self._name)

    # ------------------------------------------------------------------ public API

    @property
    def adapter_name(self) -> str:
        """The table's ``name`` field, else the name given to the constructor."""
        return self._name

    def meta(self) -> dict[str, Any]:
        """``{name, version, endpoint, headers}`` of the adapter (a copy).

        Also holds every other top-level string/number/boolean field of the adapter table as it
        is (e.g. ``stream_endpoint``, ``stream_format``).
        """
        return {**self._meta, "headers": dict(self._meta["headers"])}

    def has_hook(self, name: str) -> bool:
        """Whether ``adapter[name]`` is a function."""
        if name in self._hooks:
            return True
        self._budget.begin()
        status, value, line, _tb = _tuple(self._entry_has(name))
        if status == "ok":
            return bool(value)
        raise self._call_error(name, status, value, line)

    def call(self, hook: str, *args: Any) -> Any:
        """Call ``adapter[hook](*args)`` under the limits and return its first result.

        Arguments: ``str``/``int``/``float``/``bool`` pass as they are, ``None`` as ``nil``, a
        ``dict``/``list`` as a JSON-marked table (nested ``None`` -> ``json.null``). The result:
        strings, numbers, booleans and ``nil`` (``None``) as they are; a table is converted
        through the JSON codec (object -> ``dict``, array -> ``list``, ``json.null`` -> ``None``).
        Raises ``LlmError`` ``ADAPTER_ERROR`` / ``ADAPTER_TIMEOUT`` / ``ADAPTER_MEMORY``.
        """
        self._budget.begin()
        try:
            lua_args = [self._to_lua(a) for a in args]
            result = self._entry_call(hook, *lua_args)
        except LlmError:
            raise
        except Exception as exc:  # raised outside the protected call (e.g. out of memory)
            raise self._call_error(hook, self._classify(exc), str(exc), None) from None
        status, value, line, _tb = _tuple(result)
        if status == "ok" and not self._budget.over:
            return value
        if status == "json" and not self._budget.over:
            return json.loads(value)
        if self._budget.over:
            status = "timeout"
        raise self._call_error(hook, status, value, line)

    def call_each(self, hook: str, items: list[str]) -> tuple[list[Any], LlmError | None]:
        """``adapter[hook](item)`` for each item, in one crossing into Lua and under one budget
        (for the stream payloads of one network read). Returns the results of the items that
        succeeded (strings; ``""`` where the hook returned nil) and the error of the item after
        them, if one failed."""
        self._budget.begin()
        try:
            status, value, line, _tb, results, count, joined = self._entry_call_each(
                hook, self._lua.table_from(items)
            )
        except Exception as exc:  # raised outside the protected call (e.g. out of memory)
            return [], self._call_error(hook, self._classify(exc), str(exc), None)
        count = int(count)
        out: list[Any] = joined.split("\0") if joined is not None and count else []
        if len(out) != count:  # a result held a NUL byte, or was not a string
            out = [results[i] for i in range(1, count + 1)]
        if status == "ok" and not self._budget.over:
            return out, None
        if self._budget.over:
            status = "timeout"
        return out, self._call_error(hook, status, value, line)

    def clone(self) -> LuaSandbox:
        """A new, independent sandbox running the same script (cheap: bytecode is cached)."""
        return LuaSandbox(
            self._source,
            name=self._given_name,
            chunkname=self._chunkname,
            limits=self.limits,
            http=self._http,
            log=self._log,
        )

    def json_stats(self) -> dict[str, int]:
        """Counters of the sandbox's ``json.decode`` shape cache (see ``json.lua``): texts decoded
        by a learned shape, shapes learned, and times the cache paused itself for missing."""
        hits, learned, paused = self._lua_json_stats()
        return {"hits": int(hits), "learned": int(learned), "paused": int(paused)}

    def __repr__(self) -> str:
        return f"<LuaSandbox adapter={self._name!r}>"

    # ------------------------------------------------------------------ helpers

    def _to_lua(self, value: Any) -> Any:
        if value is None or isinstance(value, str | bool | int | float):
            return value
        if isinstance(value, dict | list | tuple):
            return self._entry_decode(json.dumps(value, ensure_ascii=False, allow_nan=False))
        raise LlmError(
            f"cannot pass a {type(value).__name__} to adapter '{self._name}'",
            ErrorCode.ADAPTER_ERROR,
            adapter=self._name,
        )

    def _classify(self, exc: Exception) -> str:
        if self._budget.over:
            return "timeout"
        if isinstance(exc, MemoryError) or "not enough memory" in str(exc):
            return "memory"
        return "error"

    def _describe(self, status: str, value: Any, line: int | None) -> tuple[str, str, int | None]:
        msg = str(value) if value is not None else ""
        if line is None:
            line = _line_of(msg, self._chunkname)
        at = f" at line {line}" if line is not None else ""
        if status == "timeout":
            if self._budget.over_wall:
                text = f"exceeded its time budget of {self.limits.wall_seconds:g} s{at} (HTTP calls included)"
            else:
                text = f"exceeded its CPU time budget of {self.limits.cpu_seconds:g} s{at}"
            return ErrorCode.ADAPTER_TIMEOUT, text, line
        if status == "memory":
            mib = self.limits.memory_bytes / (1024 * 1024)
            return ErrorCode.ADAPTER_MEMORY, f"exceeded its memory limit of {mib:g} MiB{at}", line
        if "stack overflow" in msg:
            msg += " (infinite or too deep recursion?)"
        return ErrorCode.ADAPTER_ERROR, f"failed{at}: {msg}", line

    def _call_error(self, hook: str, status: str, value: Any, line: int | None) -> LlmError:
        code, text, line = self._describe(status, value, line)
        return LlmError(
            f"adapter '{self._name}' hook '{hook}' {text}",
            code,
            adapter=self._name,
            hook=hook,
            lua_line=line,
        )

    def _load_error(self, status: str, value: Any, line: int | None) -> LlmError:
        code: str
        if status == "invalid":
            code, text = ErrorCode.INVALID_ADAPTER, str(value)
        else:
            code, text, line = self._describe(status, value, line)
            text = f"failed to load: {text}" if code == ErrorCode.ADAPTER_ERROR else text
        return LlmError(
            f"adapter '{self._name}': {text}",
            ErrorCode.INVALID_ADAPTER,
            adapter=self._name,
            lua_line=line,
            details={"cause": str(code)},
        )
