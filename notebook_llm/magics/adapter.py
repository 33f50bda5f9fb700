"""``%%adapter`` and ``%adapter``: write, hot-reload, inspect and test Lua adapters in a notebook.

``%%adapter [NAME]`` loads the cell's script (hot-reloading an adapter of that name in place);
``%adapter list | load | show | reload | unload | new | watch | test`` (``%adapter?`` for usage).

Engine: the magics act on the session's engine, the one ``%%llm`` uses, so an adapter loaded
here is what ``%%llm`` calls. Found in this order: the ``engine`` given to the constructor, the
``engine`` of a registered ``LlmMagics``, else :func:`default_engine` (one per process).

Adapter ``log()`` calls: a ``logging`` handler on ``notebook_llm.adapter`` collects them per
cell (see :class:`CellLogCollector`) and shows them under the cell after it ran.

``%adapter watch PATH``: a daemon thread polls the file's mtime every 0.5 s and hot-reloads it.
Its results are shown in ONE status display in the cell that started the watch, updated in
place through a display id (``update_display``): output from a background thread would otherwise
land in whichever cell happens to run; updating one display keeps reload results next to the
command that asked for them and does not pile up output. Errors show the Lua line in context.
"""

from __future__ import annotations

import contextlib
import contextvars
import html
import logging
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import MagicArgumentParser
from IPython.display import display as _display
from IPython.utils.process import arg_split  # type: ignore[attr-defined]

from ..errors import LlmError
from ..secrets import redact

if TYPE_CHECKING:
    # The engine (httpx) and the Lua runtime (lupa) are imported when a magic first needs
    # them, not by %load_ext (issue 16: the extension loads in well under 100 ms).
    from ..engine import Engine
    from ..lua.adapter import LuaAdapter

__all__ = [
    "AdapterMagics",
    "CellLogCollector",
    "Rich",
    "default_engine",
    "error_view",
    "highlight_lua",
    "lua_line_of",
    "report_html",
]

TEMPLATE = Path(__file__).resolve().parent.parent / "templates" / "adapter_template.lua"


def _show(obj: Any, **kwargs: Any) -> Any:
    """``IPython.display.display`` (typed wrapper)."""
    return _display(obj, **kwargs)  # type: ignore[no-untyped-call]


def declared_name(source: str) -> str | None:
    """:func:`notebook_llm.lua.adapter.declared_name`, imported on first use."""
    from ..lua.adapter import declared_name as declared

    return declared(source)


def read_adapter_file(path: Path) -> str:
    """:func:`notebook_llm.lua.adapter.read_adapter_file`, imported on first use."""
    from ..lua.adapter import read_adapter_file as read

    return read(path)


def _lua_adapter_class() -> type[LuaAdapter]:
    from ..lua.adapter import LuaAdapter

    return LuaAdapter


def default_engine() -> Engine:
    """The session engine shared with ``%%llm`` and ``Chat`` (``notebook_llm.chat``)."""
    from ..session import default_engine as shared

    return shared()


# -------------------------------------------------------------------------------- rendering


class Rich:
    """A displayable with ``text/html`` and a ``text/plain`` fallback (both redacted)."""

    def __init__(self, plain: str, html_text: str | None = None) -> None:
        self.plain = redact(plain)
        self.html = redact(html_text) if html_text is not None else None

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        out = {"text/plain": self.plain}
        if self.html is not None:
            out["text/html"] = self.html
        return out

    def __repr__(self) -> str:
        return self.plain


def highlight_lua(source: str) -> str | None:
    """Source as highlighted HTML (inline styles), or ``None`` without pygments."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import LuaLexer
    except ImportError:  # pragma: no cover - pygments comes with IPython
        return None
    return str(highlight(source, LuaLexer(), HtmlFormatter(noclasses=True, linenos="inline")))


def lua_line_of(err: LlmError) -> int | None:
    """The Lua line an error points at (from ``lua_line`` or the Lua message)."""
    if err.lua_line is not None:
        return err.lua_line
    m = re.search(r"(?:\"\]|\.lua|^[\w.-]+):(\d+):", err.message)
    return int(m.group(1)) if m else None


def error_view(err: LlmError, source: str | None, *, note: str = "", context: int = 3) -> Rich:
    """An adapter error: code, adapter, hook, message and the Lua line with context around it."""
    line = lua_line_of(err)
    where = ", ".join(
        f"{k} {v}" for k, v in (("adapter", err.adapter), ("hook", err.hook), ("line", line)) if v
    )
    head = f"{err.code}: {err.message}" + (f" ({where})" if where else "")
    plain = [head]
    rows: list[str] = []
    if source is not None and line is not None:
        lines = source.splitlines()
        for n in range(max(1, line - context), min(len(lines), line + context) + 1):
            mark = ">" if n == line else " "
            plain.append(f"{mark} {n:4} | {lines[n - 1]}")
            style = "background:#fdd;font-weight:bold" if n == line else ""
            rows.append(
                f'<div style="{style}"><span style="color:#888">{n:4} </span>'
                f"{html.escape(lines[n - 1]) or '&nbsp;'}</div>"
            )
    if note:
        plain.append(note)
    body = (
        '<div style="border-left:4px solid #c00;padding:4px 8px">'
        f"<b>{html.escape(head)}</b>"
        + (f'<pre style="margin:4px 0">{"".join(rows)}</pre>' if rows else "")
        + (f"<div><i>{html.escape(note)}</i></div>" if note else "")
        + "</div>"
    )
    return Rich("\n".join(plain), body)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def report_html(report: Any) -> str:
    """A :class:`~notebook_llm.conformance.CheckReport` as HTML tables."""
    from ..conformance import event_rows, summarize

    color = "#070" if report.ok else "#c00"
    n_warn = len(report.warnings)
    warned = f", {n_warn} warning{'s' if n_warn != 1 else ''}" if n_warn else ""
    parts = [
        f"<h4 style='color:{color}'>adapter {html.escape(report.adapter)} "
        f"{html.escape(report.version)}: {'PASS' if report.ok else 'FAIL'}{warned}</h4>"
    ]
    if report.load_error is not None:
        parts.append(f"<pre>{html.escape(str(report.load_error))}</pre>")
    for f in report.fixtures:
        state = "skipped" if f.skipped else ("ok" if f.ok else "FAIL")
        if f.ok and f.warnings:
            state = "warning"
        parts.append(
            f"<details {'open' if not f.ok or f.warnings else ''}><summary><b>[{state}]</b> "
            f"{html.escape(f.fixture)} ({f.framing}, HTTP {f.status}) - "
            f"{html.escape(summarize(f.completion))}</summary>"
        )
        verdict = "passes" if f.verdict is None else f"rule {f.rule} at event #{f.position}"
        parts.append(f"<div>validate_stream: {html.escape(verdict)}</div>")
        parts.extend(f"<div style='color:#c00'>{html.escape(p)}</div>" for p in f.problems)
        parts.extend(f"<div style='color:#a60'>warning: {html.escape(w)}</div>" for w in f.warnings)
        parts.extend(f"<div>log {html.escape(lv)}: {html.escape(m)}</div>" for lv, m in f.logs)
        rows = [[str(p), t, i, d] for p, t, i, d in event_rows(f.events)]
        parts.append(_table(["#", "event", "index", "detail"], rows) + "</details>")
    for r in report.requests:
        state = "ok" if r.ok else "FAIL"
        parts.append(
            f"<details><summary><b>[{state}]</b> request {html.escape(r.case)}: "
            f"{html.escape(r.description)}</summary>"
        )
        if r.error is not None:
            parts.append(f"<pre style='color:#c00'>{html.escape(str(r.error))}</pre></details>")
            continue
        hdrs = "\n".join(f"{k}: {v}" for k, v in r.headers.items())
        parts.append(
            f"<pre>{html.escape(r.method)} {html.escape(r.url)}\n{html.escape(hdrs)}\n\n"
            f"{html.escape(r.body_json())}</pre></details>"
        )
    return "".join(parts)


# -------------------------------------------------------------------------------- logs


_cell_logs: contextvars.ContextVar[list[tuple[str, str, str]] | None] = contextvars.ContextVar(
    "notebook_llm_cell_logs", default=None
)


class CellLogCollector(logging.Handler):
    """Collects ``notebook_llm.adapter.*`` records for the cell that caused them.

    The buffer is a context variable set before each cell runs: the engine's background loop
    runs coroutines in a copy of the calling cell's context, so a log from an adapter call lands
    with the cell that made the call. Records from elsewhere (a thread without that context)
    go to the cell running at the time, or, between cells, to the next cell's output.
    """

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self._running: list[tuple[str, str, str]] | None = None
        self._pending: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        name = record.name.removeprefix("notebook_llm.adapter.")
        entry = (name, record.levelname.lower(), redact(record.getMessage()))
        with self._lock:
            target = _cell_logs.get() or self._running
            (target if target is not None else self._pending).append(entry)

    def start_cell(self, *args: Any) -> None:
        with self._lock:
            buf, self._pending = list(self._pending), []
            self._running = buf
        _cell_logs.set(buf)

    def end_cell(self, *args: Any) -> list[tuple[str, str, str]]:
        with self._lock:
            buf, self._running = self._running or [], None
        _cell_logs.set(None)
        if buf:
            _show(self.view(buf))
        return buf

    @staticmethod
    def view(entries: list[tuple[str, str, str]]) -> Rich:
        plain = "\n".join(f"[{a}] {lv}: {m}" for a, lv, m in entries)
        rows = [[a, lv, m] for a, lv, m in entries]
        return Rich(
            "adapter log:\n" + plain,
            "<b>adapter log</b>" + _table(["adapter", "level", "message"], rows),
        )


_collectors: dict[int, CellLogCollector] = {}


def _install_collector(shell: Any) -> CellLogCollector:
    key = id(shell)
    if key in _collectors:
        return _collectors[key]
    collector = CellLogCollector()
    logger = logging.getLogger("notebook_llm.adapter")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.DEBUG)  # let info/debug from scripts reach the collector
    logger.addHandler(collector)
    shell.events.register("pre_run_cell", collector.start_cell)
    shell.events.register("post_run_cell", collector.end_cell)
    _collectors[key] = collector
    return collector


def _remove_collector(shell: Any) -> None:
    collector = _collectors.pop(id(shell), None)
    if collector is None:
        return
    logging.getLogger("notebook_llm.adapter").removeHandler(collector)
    for event, callback in (
        ("pre_run_cell", collector.start_cell),
        ("post_run_cell", collector.end_cell),
    ):
        with contextlib.suppress(ValueError):
            shell.events.unregister(event, callback)


# -------------------------------------------------------------------------------- watching


class _Watcher:
    """Polls one file's mtime in a daemon thread and hot-reloads the adapter on change."""

    def __init__(
        self,
        path: Path,
        reload: Callable[[], Rich],
        update: Callable[[Rich], None],
        interval: float,
    ) -> None:
        self.path = path
        self.interval = interval
        self._reload = reload
        self._update = update
        self._stop = threading.Event()
        self.reloads = 0
        self.last: Rich | None = None
        self._mtime = self._stat()
        self.thread = threading.Thread(
            target=self._run, name=f"adapter-watch:{path.name}", daemon=True
        )

    def _stat(self) -> float:
        try:
            return self.path.stat().st_mtime_ns / 1e9
        except OSError:
            return -1.0

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            mtime = self._stat()
            if mtime == self._mtime or mtime < 0:
                continue
            self._mtime = mtime
            self.reloads += 1
            self.last = self._reload()
            try:
                self._update(self.last)
            except Exception:  # the front end went away: keep watching
                logging.getLogger("notebook_llm.adapter.watch").debug("display update failed")

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=2)


# -------------------------------------------------------------------------------- the magics


def _parser() -> Any:
    p: Any = MagicArgumentParser(  # type: ignore[no-untyped-call]
        prog="%adapter", add_help=False, description="Lua adapter workbench"
    )
    sub = p.add_subparsers(dest="command")
    sub.add_parser("list", add_help=False, help="adapters: name, version, origin, endpoint, routes")
    load = sub.add_parser("load", add_help=False, help="load (or hot-reload) a .lua file")
    load.add_argument("path")
    load.add_argument("--as", dest="name", default=None)
    show = sub.add_parser("show", add_help=False, help="an adapter's source, highlighted")
    show.add_argument("name")
    reload = sub.add_parser("reload", add_help=False, help="re-read a file-backed adapter")
    reload.add_argument("name", nargs="?", default=None)
    unload = sub.add_parser("unload", add_help=False, help="forget a session adapter")
    unload.add_argument("name")
    new = sub.add_parser("new", add_help=False, help="a new %%adapter cell from a template")
    new.add_argument("name")
    new.add_argument("--from", dest="base", default=None, help="copy a built-in adapter")
    watch = sub.add_parser("watch", add_help=False, help="hot-reload a file when it is saved")
    watch.add_argument("path", nargs="?", default=None)
    watch.add_argument("--stop", action="store_true")
    watch.add_argument("--interval", type=float, default=0.5)
    test = sub.add_parser("test", add_help=False, help="the conformance kit")
    test.add_argument("name")
    test.add_argument("fixtures", nargs="*")
    test.add_argument("--expected", default=None)
    test.add_argument("--no-requests", action="store_true")
    return p


USAGE = """\
%%adapter [NAME]                 load / hot-reload the cell's Lua script
%adapter list                    name, version, origin, endpoint, routes
%adapter load PATH [--as NAME]   load / hot-reload a .lua file
%adapter show NAME               the source, highlighted
%adapter reload [NAME]           re-read a file-backed adapter
%adapter unload NAME             forget a session adapter
%adapter new NAME [--from BUILTIN]   a new %%adapter cell from the commented template
%adapter watch PATH [--interval S] | --stop [PATH]   hot-reload on save
%adapter test NAME [FIXTURE...] [--expected FILE] [--no-requests]   the conformance kit"""


@magics_class
class AdapterMagics(Magics):
    """The adapter workbench magics (see the module docstring)."""

    def __init__(self, shell: Any = None, engine: Engine | None = None, **kwargs: Any) -> None:
        super().__init__(shell, **kwargs)
        self._engine = engine
        self._last: str | None = None
        #: The name the last load gave (``None`` if it failed).
        self.loaded: str | None = None
        self.last_report: Any = None
        self.watchers: dict[Path, _Watcher] = {}
        self.collector = _install_collector(shell) if shell is not None else None

    @property
    def engine(self) -> Engine:
        """The session engine (see the module docstring)."""
        if self._engine is not None:
            return self._engine
        registry = getattr(getattr(self.shell, "magics_manager", None), "registry", {})
        shared = getattr(registry.get("LlmMagics"), "engine", None)
        from ..engine import Engine

        return shared if isinstance(shared, Engine) else default_engine()

    # ------------------------------------------------------------------ entry point

    @line_cell_magic
    def adapter(self, line: str, cell: str | None = None) -> None:
        """%%adapter [NAME]: load the cell's script; %adapter SUBCOMMAND: see the usage."""
        if cell is not None:
            self.load_cell(line.strip() or None, cell)
            return
        try:
            args = _parser().parse_args(arg_split(line))
        except UsageError as exc:
            raise UsageError(f"{exc}\n{USAGE}") from None
        except ValueError as exc:  # shlex: "No closing quotation"
            raise UsageError(f"cannot parse the %adapter line: {exc}\n{USAGE}") from None
        if args.command is None:
            _show(Rich(USAGE))
            return
        handler = getattr(self, f"_cmd_{args.command}")
        handler(args)

    # ------------------------------------------------------------------ loading

    def _load(self, what: str | Path, name: str | None, origin: str, source: str) -> Rich:
        """Load/hot-reload; a failure keeps the previous version and returns the error view.

        ``self.loaded`` is the adapter's name after a success, ``None`` after a failure."""
        self.loaded = None
        guess = name or declared_name(source)
        previous = self._peek(guess) if guess else None
        try:
            key = self.engine.load_adapter(what, name=name, origin=origin)
        except LlmError as err:
            kept = (
                f"kept the previous version ({previous.version or 'unversioned'}) of {guess!r}"
                if previous is not None
                else "nothing was registered"
            )
            return error_view(err, source, note=kept)
        self._last = self.loaded = key
        adapter = self.engine.adapter(key)
        verb = "reloaded" if previous is not None else "loaded"
        hooks = ", ".join(getattr(adapter, "meta", {}).get("hooks", []))
        return Rich(f"{verb} adapter {key} {adapter.version} ({origin}; hooks: {hooks})")

    def load_cell(self, name: str | None, cell: str) -> Rich:
        """``%%adapter [NAME]``: the cell body is the script."""
        view = self._load(cell, name, "cell", cell)
        _show(view)
        return view

    def _peek(self, name: str) -> Any:
        try:
            return self.engine.adapter(name)
        except LlmError:
            return None

    def _lua(self, name: str | None) -> LuaAdapter:
        name = name or self._last
        if name is None:
            raise UsageError("which adapter? give a NAME (none was loaded in this session yet)")
        try:
            adapter = self.engine.adapter(name)
        except LlmError as err:
            raise UsageError(err.message) from None
        if not isinstance(adapter, _lua_adapter_class()):
            raise UsageError(
                f"adapter {name!r} is a Python adapter ({type(adapter).__name__}), not Lua"
            )
        return adapter

    # ------------------------------------------------------------------ subcommands

    def _cmd_list(self, args: Any) -> None:
        from ..providers import PRESETS

        engine = self.engine
        routes: dict[str, list[str]] = {}
        for route, held in engine.registry.routes().items():
            routes.setdefault(held.name, []).append(route)
        for preset in PRESETS.values():
            if preset.name not in engine.registry.routes():
                routes.setdefault(preset.adapter, []).append(preset.name)
        rows: list[list[str]] = []
        for name in sorted(engine.adapter_names()):
            try:
                a = engine.adapter(name)
            except LlmError as err:
                rows.append([name, "", "broken", "", redact(err.message)[:80]])
                continue
            origin = getattr(a, "origin", "python")
            endpoint = a.info().endpoint if isinstance(a, _lua_adapter_class()) else ""
            rows.append(
                [name, a.version, origin, endpoint, ", ".join(sorted(routes.get(name, [])))]
            )
        head = ["name", "version", "origin", "endpoint", "routes"]
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        plain = "\n".join(
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows]
        )
        _show(Rich(plain, _table(head, rows)))

    def _cmd_load(self, args: Any) -> None:
        path = Path(args.path).expanduser()
        try:
            source = read_adapter_file(path)
        except LlmError as err:
            raise UsageError(err.message) from None
        _show(self._load(path, args.name, "file", source))

    def _cmd_show(self, args: Any) -> None:
        adapter = self._lua(args.name)
        where = str(adapter.path) if adapter.path else adapter.origin
        title = f"-- {adapter.name} {adapter.version} ({where})\n"
        code = highlight_lua(adapter.source)
        _show(Rich(title + adapter.source, f"<b>{html.escape(title)}</b>{code}" if code else None))

    def _cmd_reload(self, args: Any) -> None:
        adapter = self._lua(args.name)
        if adapter.path is None:
            raise UsageError(
                f"adapter {adapter.name!r} came from a {adapter.origin}: re-run that cell"
            )
        try:
            source: str | None = read_adapter_file(adapter.path)
        except LlmError:
            source = None  # adapter.reload() below reports the same problem as its error
        try:
            adapter.reload()
        except LlmError as err:
            note = f"kept the previous version ({adapter.version or 'unversioned'})"
            _show(error_view(err, source, note=note))
            return
        self._last = adapter.name
        _show(Rich(f"reloaded adapter {adapter.name} {adapter.version} from {adapter.path}"))

    def _cmd_unload(self, args: Any) -> None:
        try:
            self.engine.unload_adapter(args.name)
        except LlmError as err:
            raise UsageError(err.message) from None
        _show(Rich(f"unloaded adapter {args.name}"))

    def _cmd_new(self, args: Any) -> None:
        if not re.fullmatch(r"[A-Za-z_][\w-]*", args.name):
            raise UsageError(f"not an adapter name: {args.name!r}")
        if args.base:
            from ..lua.loader import builtin_adapters_dir

            base = builtin_adapters_dir() / f"{args.base}.lua"
            if not base.is_file():
                raise UsageError(f"no built-in adapter {args.base!r}")
            source = re.sub(
                r'(\bname\s*=\s*)"[^"]*"',
                lambda m: f'{m.group(1)}"{args.name}"',
                base.read_text("utf-8"),
                count=1,
            )
        else:
            source = TEMPLATE.read_text("utf-8").replace("{{NAME}}", args.name)
        shell: Any = self.shell
        shell.set_next_input(f"%%adapter {args.name}\n{source}", replace=False)
        _show(Rich(f"a new %%adapter {args.name} cell was added below: edit it and run it"))

    def _cmd_watch(self, args: Any) -> None:
        if args.stop:
            paths = [Path(args.path).expanduser().resolve()] if args.path else list(self.watchers)
            for p in paths:
                watcher = self.watchers.pop(p, None)
                if watcher is not None:
                    watcher.stop()
            _show(Rich(f"stopped watching {', '.join(map(str, paths)) or 'nothing'}"))
            return
        if args.path is None:
            raise UsageError("%adapter watch PATH  (or --stop)")
        path = Path(args.path).expanduser().resolve()
        if not path.is_file():
            raise UsageError(f"no such file: {path}")
        if path in self.watchers:
            self.watchers.pop(path).stop()
        try:
            first_source = read_adapter_file(path)
        except LlmError as err:
            raise UsageError(err.message) from None
        first = self._load(path, None, "file", first_source)
        handle = _show(first, display_id=True)
        name = self.loaded

        def reload() -> Rich:
            try:
                source = read_adapter_file(path)
            except LlmError as err:  # unreadable or not UTF-8 (mid-save): keep the old one
                return Rich(f"{err.message}; kept the previous version")
            view = self._load(path, name, "file", source)
            return Rich(f"[{time.strftime('%H:%M:%S')}] {view.plain}", view.html)

        def update(view: Rich) -> None:
            if handle is not None:
                handle.update(view)

        watcher = _Watcher(path, reload, update, max(0.05, args.interval))
        self.watchers[path] = watcher
        watcher.start()

    def _cmd_test(self, args: Any) -> None:
        from ..conformance import check_adapter

        adapter = self._lua(args.name)
        try:
            report = check_adapter(
                adapter, args.fixtures, args.expected, requests=not args.no_requests
            )
        except (LlmError, OSError, ValueError) as err:
            raise UsageError(redact(str(err))) from None
        _show(Rich(report.render_text(), report_html(report)))
        self.last_report = report

    def close(self) -> None:
        """Stop every watcher and remove the log collector (when the extension is unloaded)."""
        for watcher in self.watchers.values():
            watcher.stop()
        if self.shell is not None:
            _remove_collector(self.shell)
        self.watchers.clear()
