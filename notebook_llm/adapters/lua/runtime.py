"""Sandboxed execution of Lua adapter scripts (the HomeAgent adapter contract).

One :class:`LuaSandbox` is one fresh Lua 5.4 state running one script; the engine makes one per
stream, so per-stream state in a script is safe. Construction is cheap because the script, the
JSON codec and the setup chunk are compiled once per process and loaded as bytecode afterwards
(bytecode is produced only by us, in a separate compile-only state; scripts can't load any).

Why Lua 5.4 and not LuaJIT (``bench/bench_lua_json.py`` reports both): under LuaJIT 2.1 a count
hook never fires inside a JIT-compiled loop, so a CPU budget can't be enforced without turning
the JIT off; and LuaJIT has no integers (2^53+1 is not kept exact). Lua 5.4 fires the hook and
keeps 64-bit integers. Both enforce ``max_memory``.

Limits (:class:`LuaLimits`), per call of a hook (and for running the script's top level; the
stream payloads of one network read go to ``transform_stream_chunk`` in one crossing into Lua,
:meth:`LuaSandbox.call_each`, one crossing instead of one per payload, a large part of the
per-chunk cost; each payload has a CPU and wall budget of its own, so how the bytes of a
stream were split into reads does not change what a script may do with each payload):

* CPU: a count hook every ``hook_interval`` VM instructions compares the calling thread's CPU time
  (``time.thread_time``, minus time spent in ``http_get``/``http_post``/``log``) with
  ``cpu_seconds``. Over budget, it raises on every instruction, so ``pcall`` can't swallow it;
  every coroutine gets the hook too. -> ``ADAPTER_TIMEOUT``. One instruction can be a long C
  call: ``patterns.lua`` replaces the string library's pattern functions (a bounded C call, or
  a Lua matcher the hook can stop) and charges the C calls whose time grows with their input,
  checking the budget every ~2e6 charged steps (docs/reliability.md has the figures).
* Stop: the same check asks the stream's ``StopSignal`` (:meth:`LuaSandbox.set_stop`) and, for
  calls in the main thread, notices SIGINT (:class:`_SigintRelay`) -> ``ABORTED`` /
  ``KeyboardInterrupt`` after the call.
* Memory: ``LuaRuntime(max_memory=...)`` for the whole state. -> ``ADAPTER_MEMORY``. lupa pushes
  the arguments and reads the results outside any protected call, where a failed allocation is
  a Lua PANIC that aborts the process; so the cap must never bite there. Before a call, what is
  pushed is checked against the room left in the state (-> ``INPUT_TOO_LARGE``, naming what was
  too big); when the room is thin the cap is lifted for the push, and an entry point of
  ``sandbox.lua`` that finds the state near the cap turns it on first and lifts it again before
  it returns (:meth:`LuaSandbox._arm`). Far from the cap nothing is switched.
* Stack overflow / any other Lua error -> ``ADAPTER_ERROR`` naming adapter, hook and line.

After a limit error the sandbox stays USABLE: the error unwinds the Lua stack normally, so the state
is consistent and the next :meth:`LuaSandbox.call` gets a fresh budget (the script's own variables
may hold whatever it had written before it was stopped).

Thread safety: separate sandboxes can be used from separate threads in parallel (lupa releases
the GIL while Lua runs). One sandbox is not meant for concurrent calls; lupa serialises them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import json
import os
import signal
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from lupa import lua54

from ...core.cancel import StopSignal
from ...core.errors import ErrorCode, LlmError
from .host import Budget, Host, HttpBridge, LogCallback, TransportHttp, envelope_error
from .lines import line_of as _line_of

DEFAULT_ENDPOINT = "/chat/completions"
#: Stream payloads a sandbox's ``json.decode`` reads with its general decoder before it learns
#: their shapes (see ``json.lua``): learning costs more than a short answer's payloads would
#: save, and a sandbox serves one request. Measured by ``bench/bench_batch_scale.py``.
JSON_TEMPLATE_WARMUP = 32


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
            "function(src, name, strip) local f, err = load(src, name, 't')"
            " if not f then return nil, err end return string.dump(f, strip) end"
        )
    return _compiler


class _SyntaxFailure(Exception):
    pass


@functools.lru_cache(maxsize=256)
def _compile(source: str, chunkname: str, strip: bool = False) -> bytes:
    """Compile Lua source to bytecode in a compile-only state (never runs code). ``strip``
    drops the debug information (line numbers, local names)."""
    with _compile_lock:
        result = _compile_fn()(source.encode("utf-8"), chunkname.encode("utf-8"), strip)
    code, err = result if isinstance(result, tuple) else (result, None)
    if code is None:
        raise _SyntaxFailure(bytes(err or b"syntax error").decode("utf-8", "replace"))
    return bytes(code)


@functools.cache
def _builtin(name: str) -> bytes:
    text = resources.files(__package__).joinpath(name).read_text("utf-8")
    # patterns.lua runs without line information: a C error raised under its wrappers then
    # carries no position inside the trusted code (the handler finds the script's line).
    # sandbox.lua too: its errors carry the script's position by design (level 2/3 or 0), and
    # a fresh sandbox then loads faster. (Stripping json.lua would make decoding a cold stream
    # slower by more than it saves on loading.)
    return _compile(text, f"=nbllm.{name}", name in ("patterns.lua", "sandbox.lua"))


# ---------------------------------------------------------------------------- libraries

#: What a library name may hold: a plain identifier, so that no name is a path.
_LIBRARY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
#: name -> (mtime_ns, size, bytecode) of the library file it was compiled from.
_libraries: dict[str, tuple[int, int, bytes]] = {}


@functools.cache
def _library_folder() -> Any:
    """The built-in adapters' ``lib/``, in the folder ``loader.builtin_adapters_dir`` finds
    (``_builtin_adapters`` in the wheel, else the repository's ``adapters/``). Found from the
    package's root, wherever this module sits in it; not imported from the loader, which
    imports this module."""
    root: Any = resources.files(__name__.partition(".")[0])
    packaged = root / "_builtin_adapters"
    return (packaged if packaged.is_dir() else root.parent / "adapters") / "lib"


def _is_library_name(name: str) -> bool:
    return 0 < len(name) <= 64 and not name[0].isdigit() and set(name) <= _LIBRARY_CHARS


def library_names() -> list[str]:
    """What a script can ``require``: the libraries shipped in the built-in adapters' ``lib/``
    (regular files only, as :func:`library_code` reads them)."""
    folder = _library_folder()
    if not folder.is_dir():
        return []
    return sorted(
        p.stem
        for p in folder.glob("*.lua")
        if _is_library_name(p.stem) and not p.is_symlink() and p.is_file()
    )


#: How a library file is opened: never through a symbolic link (a link in lib/ could point at
#: any file the kernel can read, and a file of ``KEY="..."`` lines is valid Lua that sets
#: globals the script can read), and without waiting (a FIFO would block the open for ever).
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def _read_library(
    name: str, known: tuple[int, int] | None = None
) -> tuple[int, int, str | None] | None:
    """``(mtime_ns, size, text)`` of the shipped library ``name`` (``text`` None when its
    version is ``known``), or None if there is no such library (no regular file of that name;
    a symbolic link is none). The version and the text come from one opened file, so a file
    replaced in between cannot pair one version's text with another's key."""
    if not _is_library_name(name):
        return None
    path = os.path.join(os.fspath(_library_folder()), f"{name}.lua")
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:  # absent, or a symbolic link (ELOOP)
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if known == (st.st_mtime_ns, st.st_size):
            return st.st_mtime_ns, st.st_size, None
        with open(fd, "rb", closefd=False) as file:
            return st.st_mtime_ns, st.st_size, file.read().decode("utf-8")
    finally:
        os.close(fd)


def library_text(name: str) -> str | None:
    """The source of the shipped library ``name`` (None: no such library)."""
    found = _read_library(name)
    return None if found is None else found[2]


def library_code(name: str) -> bytes | None:
    """The bytecode of the shipped library ``name``, or None if there is no such library.

    Compiled once per version of its file, so an edited library reaches the next sandbox.
    Raises ``_SyntaxFailure`` if it does not compile."""
    cached = _libraries.get(name)
    found = _read_library(name, cached[:2] if cached is not None else None)
    if found is None:
        return None
    mtime, size, text = found
    if text is None:
        assert cached is not None
        return cached[2]
    code = _compile(text, f"=lib/{name}")
    _libraries[name] = (mtime, size, code)
    return code


#: What a hook's argument is, for the message when it does not fit in the state.
_INPUTS = {
    "transform_request": "the request (the prompt, history and tool results)",
    "build_headers": "the request",
    "transform_response": "the response body",
    "transform_stream_chunk": "a stream event",
}


def _nbytes(text: str, room: int) -> int:
    """The UTF-8 size of ``text``, encoded only when its length alone cannot settle whether it
    fits in ``room`` (at most 4 bytes a character)."""
    n = len(text)
    if n * 4 <= room or text.isascii():
        return n
    return len(text.encode("utf-8", "surrogatepass"))


def _deny_attribute(obj: Any, attr_name: Any, is_setting: bool) -> Any:
    raise AttributeError("Python attribute access is not available in the sandbox")


def _tuple(result: Any) -> tuple[Any, Any, Any, Any]:
    items = list(result) if isinstance(result, tuple) else [result]
    items += [None] * (4 - len(items))
    return items[0], items[1], items[2], items[3]


# ---------------------------------------------------------------------------- interrupts

_MAIN_IDENT = threading.main_thread().ident

#: Room kept free around a crossing into Lua (lupa's own allocations outside protected calls:
#: a registry reference for a returned table, a global name, the stack).
_MARGIN = 256 * 1024
#: Room kept free around what a callback of the script hands back (pushed inside the call).
_PUSH_MARGIN = 4096
_SigHandler = Callable[[int, Any], Any]


class _SigintRelay:
    """The SIGINT handler while hooks run in the main thread: it makes SIGINT stop the hook.

    Python runs a signal handler at the next Python instruction of the main thread; while Lua
    runs, that is inside a callback of the script (the budget check). The default handler would
    raise KeyboardInterrupt there, into Lua, where the script's ``pcall`` could swallow it; an
    async Jupyter cell's handler only asks the event loop to cancel the cell, which cannot
    happen before the hook returns. So during a hook call in the main thread, the relay marks
    the call's budget (its next check ends the call) and calls the handler it replaced unless
    that is Python's default one; a KeyboardInterrupt is raised once the hook call is over.
    Outside hook calls it just calls the replaced handler.

    It is installed once and left in place (installing a handler is too slow to do for every
    call); whoever replaces it later (ipykernel swaps handlers per cell) gets
    it wrapped again at the next hook call.
    """

    __slots__ = ("prev",)
    budget: Budget | None = None  # the hook call running in the main thread, if any

    def __init__(self, prev: _SigHandler) -> None:
        self.prev = prev

    def __call__(self, signum: int, frame: Any) -> Any:
        budget = _SigintRelay.budget
        if budget is None:
            return self.prev(signum, frame)
        budget.stopped = budget.over = True
        if self.prev is signal.default_int_handler:
            budget.interrupted = True
            return None
        budget.signalled = True
        try:
            return self.prev(signum, frame)
        except BaseException:  # e.g. KeyboardInterrupt: raised once the hook call is over
            budget.interrupted = True
            return None


# signal.getsignal() maps the handler onto an enum by catching a ValueError for every Python
# handler, too slow for every hook call; the C function it wraps is not.
_getsignal: Callable[[int], Any] = getattr(
    importlib.import_module("_signal"), "getsignal", signal.getsignal
)
_SIGINT = int(signal.SIGINT)


def _enter_main(budget: Budget) -> None:
    handler = _getsignal(_SIGINT)
    if callable(handler) and not isinstance(handler, _SigintRelay):
        signal.signal(signal.SIGINT, _SigintRelay(handler))
    _SigintRelay.budget = budget


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
        self._stop: StopSignal | None = None
        self._ahttp: TransportHttp | None = None
        self._host = Host(self._name, self._budget, http, log)
        self._meta: dict[str, Any] = {}

        try:
            code = _compile(source, self._chunkname)
        except _SyntaxFailure as exc:
            msg = str(exc)
            first = source.lstrip().split("\n", 1)[0].strip()
            if first.startswith("%"):  # a notebook cell saved as a file, magic line and all
                msg += (
                    f"; the first line ({first[:40]}) is the notebook's cell magic, not Lua: "
                    "delete it from the file"
                )
            raise LlmError(
                f"adapter '{self._name}' does not compile: {msg}",
                ErrorCode.INVALID_ADAPTER,
                adapter=self._name,
                lua_line=_line_of(str(exc), self._chunkname),
            ) from None

        lua = lua54.LuaRuntime(
            register_eval=False,
            register_builtins=False,
            unpack_returned_tuples=True,
            max_memory=self.limits.memory_bytes,
            attribute_filter=_deny_attribute,
        )
        self._lua = lua
        cap_bytes = self.limits.memory_bytes
        set_max = lua.set_max_memory

        def cap(on: bool) -> None:
            set_max(cap_bytes if on else 0)

        # Within this of the cap, an entry point switches it (see _arm and sandbox.lua).
        near_kb = (int(lua.get_max_memory(total=True) or 0) - _MARGIN) / 1024

        self._host.room = self._room
        g = lua.globals()
        load = g.load
        json_lib, json_control = load(_builtin("json.lua"), "=nbllm.json", "b")(
            g.debug.getmetatable, g.debug.setmetatable
        )
        json_control.set_warmup(JSON_TEMPLATE_WARMUP)
        safe_string, self._pattern_probe = load(_builtin("patterns.lua"), "=nbllm.patterns", "b")()
        cfg = lua.table_from(
            {
                "json": json_lib,
                "safe_string": safe_string,
                "pattern_control": self._pattern_probe,
                "json_control": json_control,
                "interval": int(self.limits.hook_interval),
                # ~640 bytes of stack and CallInfo per frame: stop recursion well before the cap.
                "max_depth": max(200, min(200_000, self.limits.memory_bytes // 640)),
                "cap": cap,
                "near_kb": near_kb,
                "require": self._require,
                **self._host.callables(),
            }
        )
        entry = load(_builtin("sandbox.lua"), "=nbllm.sandbox", "b")(cfg)
        self._entry_call = entry.call
        self._entry_call_each = entry.call_each
        self._entry_has = entry.has
        self._entry_decode = entry.decode
        self._entry_resume = entry.resume
        self._entry_abandon = entry.abandon
        self._entry_json_stats = entry.json_stats

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
        Raises ``LlmError`` ``ADAPTER_ERROR`` / ``ADAPTER_TIMEOUT`` / ``ADAPTER_MEMORY`` /
        ``INPUT_TOO_LARGE``.

        The hook's ``http_get`` / ``http_post`` are answered by the ``HttpBridge`` given to the
        sandbox, else with an error envelope: the engine calls hooks with :meth:`acall`, which
        sends them on its transport.
        """
        result = self._start(hook, args)
        while result[0] == "http":
            method, url, body = result[1:4]
            answer = self._host.sync_answer(str(method), str(url), body)
            result = self._continue(hook, self._fitted(answer))
        return self._result(hook, result)

    async def acall(self, hook: str, *args: Any) -> Any:
        """:meth:`call`, with the hook's ``http_get`` / ``http_post`` sent on the transport set
        with :meth:`set_http` and awaited, so the event loop runs on meanwhile. Each request is
        bounded by what is left of the hook's wall budget; a Stop (the task is cancelled) gives
        up the hook call."""
        result = self._start(hook, args)
        try:
            while result[0] == "http":
                method, url, body = result[1:4]
                answer = await self._async_answer(str(method), str(url), body)
                result = self._continue(hook, self._fitted(answer))
        except BaseException:  # CancelledError (Stop), KeyboardInterrupt: the hook is over
            self._abandon()
            raise
        return self._result(hook, result)

    def set_http(self, http: TransportHttp | None) -> None:
        """The transport :meth:`acall` sends a hook's requests on (the stream's)."""
        self._ahttp = http

    async def _async_answer(self, method: str, url: str, body: str | None) -> dict[str, Any]:
        budget = self._budget
        remaining = budget.wall_limit - (time.monotonic() - budget.wall_start)
        spent = f"the adapter call ran out of its {budget.wall_limit:g} s"
        if remaining <= 0:
            budget.over_wall = budget.over = True
            return envelope_error(url, spent, ErrorCode.ADAPTER_TIMEOUT)
        http = self._ahttp if self._ahttp is not None else TransportHttp()
        paused = time.thread_time()  # what runs on this thread meanwhile is not the hook's
        try:
            async with asyncio.timeout(remaining):
                return await http.request(method, url, body)
        except TimeoutError:
            budget.over_wall = budget.over = True
            return envelope_error(url, spent, ErrorCode.ADAPTER_TIMEOUT)
        finally:
            budget.excluded += time.thread_time() - paused

    def _fitted(self, answer: dict[str, Any]) -> str:
        text = json.dumps(answer, ensure_ascii=False)
        if len(text) + 4096 > self._room():
            mib = len(text) / (1024 * 1024)
            # RESPONSE_TOO_LARGE, as for a body over max_body_bytes: to the script it is an
            # answer too big to be handed over (ADAPTER_MEMORY is the script's own allocation).
            text = json.dumps(
                envelope_error(
                    str(answer.get("url")),
                    f"the answer ({mib:.1f} MiB) does not fit in the adapter's memory limit",
                    ErrorCode.RESPONSE_TOO_LARGE,
                )
            )
        return text

    def _start(self, hook: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        self._check_room(hook, args)
        self._budget.begin()
        lua_args = [self._to_lua(hook, a) for a in args]
        if any(isinstance(a, dict | list | tuple) for a in args):  # decoding them used room
            strings = sum(4 * len(a) for a in args if isinstance(a, str))
            self._arm(self._room(), strings)
        return self._enter(hook, self._entry_call, hook, *lua_args)

    def _continue(self, hook: str, answer: str) -> tuple[Any, ...]:
        self._arm(self._room(), len(answer.encode("utf-8")))
        return self._enter(hook, self._entry_resume, answer)

    def _abandon(self) -> None:
        self._budget.stopped = self._budget.over = True  # its <close> handlers end at once
        self._arm(self._room(), 0)
        with contextlib.suppress(Exception):
            self._enter("", self._entry_abandon)

    def _enter(self, hook: str, fn: Any, *args: Any) -> tuple[Any, ...]:
        """One crossing into Lua: the SIGINT relay and the memory cap around ``fn(*args)``."""
        main = threading.get_ident() == _MAIN_IDENT
        if main:
            _enter_main(self._budget)
        try:
            result = fn(*args)
        except LlmError:
            raise
        except Exception as exc:  # raised outside the protected call (e.g. out of memory)
            raise self._call_error(hook, self._classify(exc), str(exc), None) from None
        finally:
            if main:
                _SigintRelay.budget = None
        if self._budget.interrupted:  # a kernel interrupt arrived during the call
            self._arm(self._room(), 0)
            with contextlib.suppress(Exception):
                self._entry_abandon()
            raise KeyboardInterrupt
        items = list(result) if isinstance(result, tuple) else [result]
        return (*items, *(None,) * (4 - len(items)))

    def _result(self, hook: str, result: tuple[Any, ...]) -> Any:
        status, value, line = result[0], result[1], result[2]
        if status == "ok" and not self._budget.over:
            return value
        if status == "json" and not self._budget.over:
            return json.loads(value)
        if self._budget.over:
            status = "timeout"
        raise self._call_error(hook, status, value, line)

    def call_each(
        self, hook: str, items: list[str], *, parsed: bool = False
    ) -> tuple[list[Any], LlmError | None]:
        """``adapter[hook](item)`` for each item, in one crossing into Lua, each item under a
        budget of its own (for the stream payloads of one network read: the verdict on one does
        not depend on the others that came with it). Returns the results of the items that
        succeeded (strings; ``""`` where the hook returned nil) and the error of the item after
        them, if one failed.

        With ``parsed``, when every result is ``""`` or an object text that the sandbox's
        ``json.encode`` wrote (``return json.encode(out)``), the objects come back parsed, as
        dicts, from one ``json.loads`` of the whole batch (the encoder's output is valid JSON
        by construction). Otherwise the results are strings, as without it.

        A batch that does not fit in the room left in the state goes in parts; one item that
        does not fit is ``INPUT_TOO_LARGE``."""
        room = self._room()
        chars = sum(map(len, items))  # the common case is decided at C speed
        if 4 * chars + 64 * len(items) <= room // 4:
            self._arm(room, 4 * chars + 64 * len(items))
        else:
            total = sum(_nbytes(item, room) + 64 for item in items)
            if total > room // 4:  # garbage may hold the room: collect it before deciding
                self._lua.gccollect()
                room = self._room()
            if total > room // 4 and len(items) > 1:  # the items, their results and the join
                half = len(items) // 2
                first, failed = self.call_each(hook, items[:half], parsed=parsed)
                if failed is not None:
                    return first, failed
                rest, failed = self.call_each(hook, items[half:], parsed=parsed)
                return first + rest, failed
            try:
                self._check_room(hook, items)
            except LlmError as err:
                return [], err
        self._budget.begin()
        main = threading.get_ident() == _MAIN_IDENT
        if main:
            _enter_main(self._budget)
        try:
            got = self._entry_call_each(hook, self._lua.table_from(items), parsed)
            got = (*got, *(None,) * (8 - len(got)))  # a failure outside the hook returns two
            status, value, line, _tb, results, count, joined, array = got
        except Exception as exc:  # raised outside the protected call (e.g. out of memory)
            return [], self._call_error(hook, self._classify(exc), str(exc), None)
        finally:
            if main:
                _SigintRelay.budget = None
        if self._budget.interrupted:  # a kernel interrupt arrived during the call
            raise KeyboardInterrupt
        count = int(count or 0)
        out: list[Any] = []
        if array:
            # Never fails (the encoder's own output); if it did, the strings go the path below.
            with contextlib.suppress(ValueError):
                out = json.loads(joined)
        elif joined is not None and count:
            out = joined.split("\0")
        if len(out) != count:  # a result held a NUL byte, or was not a string
            out = [results[i] for i in range(1, count + 1)]
        if status == "ok" and not self._budget.over:
            return out, None
        if self._budget.over:
            status = "timeout"
        return out, self._call_error(hook, status, value, line)

    def set_stop(self, stop: StopSignal | None) -> None:
        """Stop the running (and every later) hook call once ``stop`` is set: the count hook
        asks it at every budget check (~every ``hook_interval`` instructions), so a call stops
        within milliseconds (``ABORTED``), whatever the script does."""
        self._stop = stop
        self._budget.stop = stop.is_set if stop is not None else None

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
        """Counters of the sandbox's ``json.decode`` templates (see ``json.lua``): texts decoded
        through a learned template, templates learned (made or widened), and times the
        templates paused themselves for missing."""
        hits, learned, paused = self._entry_json_stats()
        return {"hits": int(hits), "learned": int(learned), "paused": int(paused)}

    def __repr__(self) -> str:
        return f"<LuaSandbox adapter={self._name!r}>"

    # ------------------------------------------------------------------ helpers

    def _require(self, name: str) -> tuple[bytes | bool | None, str | None]:
        """``require(name)`` in the script (sandbox.lua checks the name first): the library's
        bytecode; or None and the names of the libraries there are; or False and why it cannot
        load (None: it does not fit in the room left in the state).

        lupa pushes what this returns inside the callback, where a failed allocation jumps over
        its frames with the GIL still taken (the process hangs): every string handed back must
        fit in the room left, else the answer is False, None ("not enough memory" in Lua)."""
        try:
            code = library_code(name)
            names = (", ".join(library_names()) or "none") if code is None else ""
        except _SyntaxFailure as exc:
            return self._fitting(False, f"library '{name}' does not compile: {exc}")
        # Whatever else: its type only. Raised into Lua, the exception would reach the script
        # as a Python object, and its text may hold a host path.
        except Exception as exc:
            return self._fitting(False, f"library '{name}' cannot be read: {type(exc).__name__}")
        if code is None:
            return self._fitting(None, names)
        if len(code) + _PUSH_MARGIN > self._room():
            return False, None
        return code, None

    def _fitting(self, status: bool | None, text: str) -> tuple[bool | None, str | None]:
        """``status, text`` if ``text`` fits in the room left in the state, else False, None."""
        if len(text.encode("utf-8")) + _PUSH_MARGIN > self._room():
            return False, None
        return status, text

    def _arm(self, room: int, push: int) -> None:
        """The cap on for a crossing that pushes ``push`` bytes, unless it could bite during
        the push or the pull of the results (outside any protected call): then lifted, and the
        entry point turns it on (it finds the state near the cap)."""
        self._lua.set_max_memory(self.limits.memory_bytes if room > push + _MARGIN else 0)

    def _room(self) -> int:
        """Bytes the state may still allocate under its cap."""
        return int(self.limits.memory_bytes - (self._lua.get_memory_used() or 0))

    def _check_room(self, hook: str, args: Any) -> None:
        """``INPUT_TOO_LARGE`` when the strings among ``args`` (a dict or list counts as its
        JSON text) do not fit in the room left in the state: pushing them would fail outside
        any protected call."""
        room = self._room()
        total = 0
        for a in args:
            if isinstance(a, str):
                total += _nbytes(a, room)
            elif isinstance(a, dict | list | tuple):
                total += _nbytes(json.dumps(a, ensure_ascii=False, default=str), room)
        if total > room // 2:
            self._lua.gccollect()  # garbage may hold the room
            room = self._room()
        if total <= room:
            self._arm(room, total)
            return
        what = _INPUTS.get(hook, "its input")
        mib = 1024 * 1024
        raise LlmError(
            f"adapter '{self._name}' hook '{hook}': {what} is {total / mib:.1f} MiB, more than "
            f"the adapter's memory limit of {self.limits.memory_bytes / mib:g} MiB can hold "
            f"({max(room, 0) / mib:.1f} MiB free); send less",
            ErrorCode.INPUT_TOO_LARGE,
            adapter=self._name,
            hook=hook,
        )

    def _to_lua(self, hook: str, value: Any) -> Any:
        if value is None or isinstance(value, str | bool | int | float):
            return value
        if isinstance(value, dict | list | tuple):
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
            table, status, msg = _tuple(self._entry_decode(text))[:3]
            if table is None:
                raise self._call_error(hook, str(status), msg, None)
            return table
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
        if self._budget.interrupted:  # a kernel interrupt stopped the call: hand it on
            raise KeyboardInterrupt
        if self._budget.stopped:
            if line is None:
                line = _line_of(str(value or ""), self._chunkname)
            at = f" at line {line}" if line is not None else ""
            if self._budget.signalled:
                reason = "interrupted"
            else:
                reason = self._stop.reason if self._stop is not None else "stopped"
            return LlmError(
                f"adapter '{self._name}' hook '{hook}' was stopped{at}: {reason}",
                ErrorCode.ABORTED,
                adapter=self._name,
                hook=hook,
                lua_line=line,
            )
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
