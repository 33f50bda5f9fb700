"""The module paths of 0.1 (before the layers were folders) still import, for one release.

Each old path gives the very module now at its new path (so ``monkeypatch`` or ``mock.patch``
through either patches both) and warns once with where it went. New paths are never answered by
the alias, and a name that never existed is still a ``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

#: Every module of 0.1 -> where it is now.
OLD_TO_NEW = {
    "notebook_llm._sync": "notebook_llm.core.background_loop",
    "notebook_llm.base_adapter": "notebook_llm.adapters.base",
    "notebook_llm.batch": "notebook_llm.api.batch",
    "notebook_llm.builtins": "notebook_llm.engine.routing.builtin_plugin",
    "notebook_llm.cancel": "notebook_llm.core.cancel",
    "notebook_llm.catalog": "notebook_llm.engine.routing.catalog",
    "notebook_llm.chat": "notebook_llm.api.chat",
    "notebook_llm.completion": "notebook_llm.core.completion",
    "notebook_llm.credentials": "notebook_llm.engine.credentials",
    "notebook_llm.dash_options": "notebook_llm.core.dash_options",
    "notebook_llm.errors": "notebook_llm.core.errors",
    "notebook_llm.estimate": "notebook_llm.api.estimate",
    "notebook_llm.frames": "notebook_llm.api.dataframes",
    "notebook_llm.frontend": "notebook_llm.notebook.watching",
    "notebook_llm.images": "notebook_llm.core.images",
    "notebook_llm.loop_events": "notebook_llm.api.tool_calling.events",
    "notebook_llm.lua": "notebook_llm.adapters.lua",
    "notebook_llm.lua.contract": "notebook_llm.adapters.lua.chunk_mapping",
    "notebook_llm.lua.dropped_text": "notebook_llm.adapters.lua.dropped_text",
    "notebook_llm.lua.host": "notebook_llm.adapters.lua.host",
    "notebook_llm.lua.http_request": "notebook_llm.adapters.lua.provider_request",
    "notebook_llm.lua.lines": "notebook_llm.adapters.lua.lines",
    "notebook_llm.lua.loader": "notebook_llm.engine.routing.lua_files",
    "notebook_llm.lua.lua_adapter": "notebook_llm.adapters.lua.lua_adapter",
    "notebook_llm.lua.request": "notebook_llm.adapters.lua.kernel_request",
    "notebook_llm.lua.response_mapping": "notebook_llm.adapters.lua.hook_results",
    "notebook_llm.lua.runtime": "notebook_llm.adapters.lua.runtime",
    "notebook_llm.lua.stream_pipeline": "notebook_llm.adapters.lua.stream_pipeline",
    "notebook_llm.magics": "notebook_llm.notebook.magics",
    "notebook_llm.magics.adapter_magics": "notebook_llm.notebook.magics.adapter_magics",
    "notebook_llm.magics.args": "notebook_llm.notebook.magics.args",
    "notebook_llm.magics.cell_logs": "notebook_llm.notebook.magics.cell_logs",
    "notebook_llm.magics.interpolate": "notebook_llm.notebook.magics.interpolate",
    "notebook_llm.magics.llm": "notebook_llm.notebook.magics.llm",
    "notebook_llm.magics.warmup": "notebook_llm.notebook.magics.warmup",
    "notebook_llm.mock": "notebook_llm.adapters.mock",
    "notebook_llm.mock.__main__": "notebook_llm.adapters.mock.__main__",
    "notebook_llm.mock.direct_adapter": "notebook_llm.adapters.mock.direct_adapter",
    "notebook_llm.mock.faults": "notebook_llm.adapters.mock.faults",
    "notebook_llm.mock.models": "notebook_llm.adapters.mock.models",
    "notebook_llm.mock.pace": "notebook_llm.adapters.mock.pace",
    "notebook_llm.mock.schema_answers": "notebook_llm.adapters.mock.schema_answers",
    "notebook_llm.mock.server": "notebook_llm.adapters.mock.server",
    "notebook_llm.mock.shared": "notebook_llm.adapters.mock.shared",
    "notebook_llm.mock.wire": "notebook_llm.adapters.mock.bodies",
    "notebook_llm.mock.wire.error_bodies": "notebook_llm.adapters.mock.bodies.error_bodies",
    "notebook_llm.mock.wire.frames": "notebook_llm.adapters.mock.bodies.frames",
    "notebook_llm.mock.wire.normalize": "notebook_llm.adapters.mock.bodies.normalize",
    "notebook_llm.mock.wire.render": "notebook_llm.adapters.mock.bodies.render",
    "notebook_llm.plugins": "notebook_llm.engine.routing.plugins",
    "notebook_llm.pricing": "notebook_llm.engine.pricing",
    "notebook_llm.protocol": "notebook_llm.core.protocol",
    "notebook_llm.providers": "notebook_llm.engine.providers",
    "notebook_llm.record": "notebook_llm.api.recording",
    "notebook_llm.registry": "notebook_llm.engine.routing.registry",
    "notebook_llm.request_options": "notebook_llm.engine.request",
    "notebook_llm.secrets": "notebook_llm.core.redaction",
    "notebook_llm.session": "notebook_llm.engine.session",
    "notebook_llm.streaming": "notebook_llm.engine.streaming",
    "notebook_llm.structured": "notebook_llm.core.response_schema",
    "notebook_llm.tools": "notebook_llm.api.tool_calling",
    "notebook_llm.tools.core": "notebook_llm.api.tool_calling.tools",
    "notebook_llm.tools.docstrings": "notebook_llm.api.tool_calling.docstrings",
    "notebook_llm.tools.loop": "notebook_llm.api.tool_calling.loop",
    "notebook_llm.tools.schema": "notebook_llm.api.tool_calling.type_schema",
    "notebook_llm.tools.validation": "notebook_llm.core.json_schema_check",
    "notebook_llm.validate": "notebook_llm.core.stream_rules",
    "notebook_llm.watch": "notebook_llm.notebook.file_watch",
    "notebook_llm.widgets": "notebook_llm.notebook.widgets",
    "notebook_llm.widgets.adapter_view": "notebook_llm.notebook.widgets.adapter_view",
    "notebook_llm.widgets.final": "notebook_llm.notebook.widgets.final",
    "notebook_llm.widgets.live": "notebook_llm.notebook.widgets.live",
    "notebook_llm.widgets.panels": "notebook_llm.notebook.widgets.panels",
    "notebook_llm.widgets.playground": "notebook_llm.notebook.widgets.playground",
    "notebook_llm.widgets.present": "notebook_llm.notebook.widgets.present",
    "notebook_llm.widgets.render": "notebook_llm.notebook.widgets.render",
    # split: the turn running went to the API layer, the kernel's comm polling stayed
    "notebook_llm.widgets.runner": "notebook_llm.api.turn_runner",
    "notebook_llm.widgets.safe_html": "notebook_llm.notebook.widgets.safe_html",
    "notebook_llm.widgets.sparse": "notebook_llm.notebook.widgets.sparse",
    "notebook_llm.widgets.stream_view": "notebook_llm.notebook.widgets.stream_view",
    "notebook_llm.widgets.typed_view": "notebook_llm.notebook.widgets.typed_view",
}


@pytest.mark.parametrize(("old", "new"), sorted(OLD_TO_NEW.items()))
def test_an_old_path_is_the_new_module_with_a_warning(old: str, new: str) -> None:
    module = importlib.import_module(new)
    # The old parent package warns of its own move when first imported: import it first, so
    # that the warning checked is this module's, whichever test of this process ran before.
    parent = old.rpartition(".")[0]
    if parent != "notebook_llm":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            importlib.import_module(parent)
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {new} "):
        alias = importlib.import_module(old)
    assert alias is module
    assert module.__name__ == new
    assert module.__spec__ is not None
    assert module.__spec__.name == new


def test_from_import_of_an_old_module_names_the_users_line() -> None:
    code = (
        "import warnings\n"
        "warnings.simplefilter('always')\n"
        "from notebook_llm import protocol\n"
        "import notebook_llm.tools.loop\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert (
        "<string>:3: DeprecationWarning: notebook_llm.protocol moved to notebook_llm.core.protocol"
        in out.stderr
    )
    assert "<string>:4: DeprecationWarning: notebook_llm.tools moved to" in out.stderr
    assert "notebook_llm.tools.loop moved to notebook_llm.api.tool_calling.loop" in out.stderr


def test_patching_through_the_old_path_patches_the_new_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from notebook_llm.core import protocol

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        monkeypatch.setattr("notebook_llm.protocol.MARKER_FOR_TEST", 1, raising=False)
    assert protocol.MARKER_FOR_TEST == 1  # type: ignore[attr-defined]


def test_the_paths_that_did_not_move_import_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from notebook_llm import Engine, record
        from notebook_llm.engine import Engine as EngineToo
        from notebook_llm.wire import tap  # noqa: F401

    assert Engine is EngineToo
    assert record.__name__ == "notebook_llm.api.recording"


@pytest.mark.parametrize(
    "name", ["notebook_llm.protocol.nothing", "notebook_llm.tools.core.x", "notebook_llm.nothing"]
)
def test_a_path_that_never_existed_is_still_not_found(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(name)


# ------------------------------------------------------------------ review: what 0.1 users did


def test_python_m_of_the_old_mock_path_still_runs_the_server_cli() -> None:
    """``python -m notebook_llm.mock`` (the 0.1 docs' way to run the mock server) runs the
    server's command line, with one deprecation line, instead of a traceback from runpy."""
    out = subprocess.run(
        [sys.executable, "-m", "notebook_llm.mock", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "--require-key" in out.stdout
    assert "Traceback" not in out.stderr
    assert "notebook_llm.mock moved to notebook_llm.adapters.mock" in out.stderr
    assert out.stderr.count("DeprecationWarning") == 1


def test_an_old_submodule_read_as_an_attribute_is_there_with_a_warning() -> None:
    """In 0.1 ``notebook_llm.protocol`` was an attribute once anything had imported it (any
    call does): code that reads ``notebook_llm.protocol.Message`` keeps working."""
    code = (
        "import warnings\n"
        "warnings.simplefilter('always')\n"
        "import notebook_llm\n"
        "m = notebook_llm.protocol.Message\n"
        "print(m is notebook_llm.Message, notebook_llm.protocol is notebook_llm.protocol)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert out.stdout.split() == ["True", "True"]
    assert (
        "<string>:4: DeprecationWarning: notebook_llm.protocol moved to notebook_llm.core.protocol"
        in out.stderr
    )
    assert out.stderr.count("DeprecationWarning") == 1


def test_a_name_that_is_no_module_is_still_an_attribute_error() -> None:
    import notebook_llm

    with pytest.raises(AttributeError, match="no_such"):
        notebook_llm.no_such  # type: ignore[attr-defined]  # noqa: B018


def test_importing_the_package_does_not_load_importlib_abc_or_pathlib() -> None:
    """The alias finder is a plain class: ``importlib.abc`` pulls in ``importlib.resources``,
    ``pathlib`` and ``tempfile``, about as much again as the whole ``import notebook_llm``."""
    code = (
        "import sys, notebook_llm\n"
        "print(sorted(m for m in ('importlib.abc', 'importlib.resources', 'pathlib') "
        "if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_0_1_names_of_wire_deadline_are_still_there() -> None:
    from notebook_llm.core import timeouts
    from notebook_llm.wire import deadline

    assert deadline.DEFAULT_TIMEOUTS is timeouts.DEFAULT_TIMEOUTS
    assert deadline.Timeouts is timeouts.Timeouts


def test_reloading_the_package_keeps_one_alias_finder() -> None:
    """``importlib.reload(notebook_llm)`` (``%autoreload``) made a second finder each time."""
    code = (
        "import importlib, sys, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "import notebook_llm\n"
        "importlib.reload(notebook_llm)\n"
        "importlib.reload(notebook_llm)\n"
        "import notebook_llm.chat\n"
        "print(sum(type(f).__name__ == '_MovedModuleFinder' for f in sys.meta_path))\n"
        "print(notebook_llm.chat.Chat is notebook_llm.Chat)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert out.stdout.split() == ["1", "True"]
