"""``%%adapter`` and ``%adapter``: write, hot-reload, inspect and test Lua adapters in a notebook.

``%%adapter [NAME]`` loads the cell's script (hot-reloading an adapter of that name in place);
``%adapter list | load | show | reload | unload | new | watch | test`` (``%adapter?`` for usage).

Engine: the magics act on the session's engine, the one ``%%llm`` uses, so an adapter loaded
here is what ``%%llm`` calls. Found in this order: the ``engine`` given to the constructor, the
``engine`` of a registered ``LlmMagics``, else :func:`default_engine` (one per process).

Adapter ``log()`` calls: a ``logging`` handler on ``notebook_llm.adapter`` collects them per
cell (:class:`~notebook_llm.notebook.magics.cell_logs.CellLogCollector`) and shows them under the cell.

``%adapter watch PATH``: a :class:`notebook_llm.notebook.file_watch.FileWatcher` polls the file's mtime every
0.5 s; its ``changed`` signal hot-reloads the adapter. The views (error with the Lua line in
context, tables, the test report) are in :mod:`notebook_llm.notebook.widgets.adapter_view`.
Its results are shown in ONE status display in the cell that started the watch, updated in
place through a display id (``update_display``): output from a background thread would otherwise
land in whichever cell happens to run; updating one display keeps reload results next to the
command that asked for them and does not pile up output. Errors show the Lua line in context.
"""

from __future__ import annotations

import html
import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import MagicArgumentParser
from IPython.display import display as _display
from IPython.utils.process import arg_split  # type: ignore[attr-defined]

from ...adapters.lua.lines import cell_script, lua_line_of
from ...core.errors import LlmError
from ...core.redaction import redact
from ..file_watch import FileWatcher
from ..widgets.adapter_view import (
    Rich,
    error_view,
    highlight_lua,
    html_table,
    report_html,
    text_table,
)
from . import warmup
from .cell_logs import CellLogCollector, _install_collector, _remove_collector

if TYPE_CHECKING:
    # The engine (httpx) and the Lua runtime (lupa) are imported when a magic first needs
    # them, not by %load_ext, so that loading the extension stays fast.
    from ...adapters.lua.lua_adapter import LuaAdapter
    from ...engine.engine import Engine

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


def _show(obj: Any, **kwargs: Any) -> Any:
    """``IPython.display.display`` (typed wrapper)."""
    return _display(obj, **kwargs)  # type: ignore[no-untyped-call]


def declared_name(source: str) -> str | None:
    """:func:`notebook_llm.adapters.lua.lua_adapter.declared_name`, imported on first use."""
    from ...adapters.lua.lua_adapter import declared_name as declared

    return declared(source)


def read_adapter_file(path: Path) -> str:
    """:func:`notebook_llm.adapters.lua.lua_adapter.read_adapter_file`, imported on first use."""
    from ...adapters.lua.lua_adapter import read_adapter_file as read

    return read(path)


def _lua_adapter_class() -> type[LuaAdapter]:
    from ...adapters.lua.lua_adapter import LuaAdapter

    return LuaAdapter


def default_engine() -> Engine:
    """The session engine shared with ``%%llm`` and ``Chat`` (``notebook_llm.api.chat``)."""
    from ...engine.session import default_engine as shared

    return shared()


# -------------------------------------------------------------------------------- rendering
# (the views live in notebook_llm.notebook.widgets.adapter_view; re-exported here for older imports)


# -------------------------------------------------------------------------------- logs


# -------------------------------------------------------------------------------- watching


class _Watch:
    """One ``%adapter watch``: a :class:`~notebook_llm.notebook.file_watch.FileWatcher` whose ``changed``
    signal hot-reloads the adapter and updates the status display; keeps the last result."""

    def __init__(
        self,
        path: Path,
        reload: Callable[[], Rich],
        update: Callable[[Rich], None],
        interval: float,
    ) -> None:
        self.watcher = FileWatcher(path, interval=interval)
        self.thread = self.watcher.thread
        self.reloads = 0
        self.last: Rich | None = None
        self._reload, self._update = reload, update
        self.watcher.changed.connect(self._on_change)

    def _on_change(self, path: Path) -> None:
        self.reloads += 1
        self.last = self._reload()
        try:
            self._update(self.last)
        except Exception:  # the front end went away: keep watching
            logging.getLogger("notebook_llm.adapter.watch").debug("display update failed")

    def start(self) -> None:
        self.watcher.start()

    def stop(self) -> None:
        self.watcher.stop()


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
    draft = sub.add_parser("draft", add_help=False, help="draft an adapter from recorded bodies")
    draft.add_argument("name")
    draft.add_argument("paths", nargs="+")
    draft.add_argument("--request", default=None)
    draft.add_argument("--pick", action="append", default=[])
    draft.add_argument("--output", default=None)
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
%adapter test NAME [FIXTURE...] [--expected FILE] [--no-requests]   the conformance kit
%adapter draft NAME BODY [BODY...] [--request FILE] [--pick FIELD=PATH] [--output FILE]
                                 draft an adapter from recorded bodies of one API (into a
                                 new %%adapter cell, or into FILE)"""


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
        #: The last ``%adapter draft`` (its source, inference and check), and its choices widget.
        self.last_draft: Any = None
        self.last_choices: Any = None
        self.watchers: dict[Path, _Watch] = {}
        self.collector = _install_collector(shell) if shell is not None else None

    @property
    def engine(self) -> Engine:
        """The session engine (see the module docstring)."""
        if self._engine is not None:
            return self._engine
        registry = getattr(getattr(self.shell, "magics_manager", None), "registry", {})
        shared = getattr(registry.get("LlmMagics"), "engine", None)
        from ...engine.engine import Engine

        return shared if isinstance(shared, Engine) else default_engine()

    # ------------------------------------------------------------------ entry point

    @line_cell_magic
    def adapter(self, line: str, cell: str | None = None) -> None:
        """%%adapter [NAME]: load the cell's script; %adapter SUBCOMMAND: see the usage."""
        warmup.wait()  # a cell right after %load_ext shares the warm-up's work, not races it
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
        """``%%adapter [NAME]``: the cell body is the script, its lines numbered as the cell's."""
        script = cell_script(cell, "%%adapter" + (f" {name}" if name else ""))
        view = self._load(script, name, "cell", script)
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
        engine = self.engine
        routes: dict[str, list[str]] = {}
        for route, held in engine.registry.routes().items():
            routes.setdefault(held.name, []).append(route)
        for declared in engine.declarations().values():
            if declared.name not in engine.registry.routes():
                routes.setdefault(declared.adapter, []).append(declared.name)
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
        _show(Rich(text_table(head, rows), html_table(head, rows)))

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
            from ...engine.routing.lua_files import builtin_adapters_dir

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
            from ...engine.routing.lua_files import (
                ADAPTER_TEMPLATE,  # not at %load_ext: it imports the engine
            )

            source = ADAPTER_TEMPLATE.read_text("utf-8").replace("{{NAME}}", args.name)
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

        watcher = _Watch(path, reload, update, max(0.05, args.interval))
        self.watchers[path] = watcher
        watcher.start()

    def _cmd_test(self, args: Any) -> None:
        from ...conformance import check_adapter

        adapter = self._lua(args.name)
        try:
            report = check_adapter(
                adapter, args.fixtures, args.expected, requests=not args.no_requests
            )
        except (LlmError, OSError, ValueError) as err:
            raise UsageError(redact(str(err))) from None
        _show(Rich(report.render_text(), report_html(report)))
        self.last_report = report

    def _cmd_draft(self, args: Any) -> None:
        """``%adapter draft NAME BODY...``: draft from the bodies and load the draft. It goes in
        a ``%%adapter NAME`` cell added below this one, or with ``--output FILE`` in that file
        (then re-running the cell adds nothing: the same notebook on every Run All). What each
        mapping rests on, what each later body changed, the check and the TODOs are shown;
        close candidates get a :class:`DraftChoices` widget to pick from."""
        from ...conformance.draft import parse_picks

        try:
            picks = parse_picks(args.pick)
        except LlmError as err:
            raise UsageError(redact(err.message)) from None
        draft, loaded = self._draft(args, picks)
        if args.output:
            note = (
                f"the draft is in {Path(args.output).name}: read it, fix the TODOs, "
                "%adapter load it again"
            )
        else:
            shell: Any = self.shell
            shell.set_next_input(f"%%adapter {args.name}\n{draft.source}", replace=False)
            note = f"a %%adapter {args.name} cell with the draft was added below: read it, fix the TODOs, re-run it"
        _show(Rich(f"{redact(draft.summary())}\n{loaded.plain}\n{note}"))
        self.last_draft = draft
        if draft.questions:
            from ..widgets.draft_choices import DraftChoices

            def redraft(chosen: dict[str, str]) -> str:
                again, reloaded = self._draft(args, chosen)
                self.last_draft = again
                where = (
                    args.output
                    or f"the {args.name} adapter (re-run with these picks to update the cell)"
                )
                return f"re-drafted and reloaded {where}\n{reloaded.plain}"

            self.last_choices = DraftChoices(draft, redraft)
            _show(self.last_choices.widget)

    def _draft(self, args: Any, picks: dict[str, str]) -> tuple[Any, Rich]:
        """Draft ``args``' bodies with ``picks``, write ``--output`` if given, and load it."""
        from ...conformance.draft import draft_adapter

        try:
            draft = draft_adapter(
                [Path(p) for p in args.paths], args.name, request=args.request, picks=picks
            )
        except LlmError as err:
            raise UsageError(redact(err.message)) from None
        if args.output:
            out = Path(args.output).expanduser()
            try:
                out.write_text(draft.source, "utf-8")
            except OSError as exc:
                raise UsageError(f"cannot write {out}: {exc.strerror}") from None
            return draft, self._load(out, args.name, "file", draft.source)
        return draft, self._load(draft.source, args.name, "cell", draft.source)

    def close(self) -> None:
        """Stop every watcher and remove the log collector (when the extension is unloaded)."""
        for watcher in self.watchers.values():
            watcher.stop()
        if self.shell is not None:
            _remove_collector(self.shell)
        self.watchers.clear()
