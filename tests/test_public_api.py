"""The package root: a curated ``__all__``, and an engine that imports no notebook code."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import notebook_llm


def test_all_names_exist_and_are_unique() -> None:
    assert len(set(notebook_llm.__all__)) == len(notebook_llm.__all__)
    for name in notebook_llm.__all__:
        assert hasattr(notebook_llm, name), name


def test_every_public_object_is_listed() -> None:
    public = {
        name
        for name, value in vars(notebook_llm).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("notebook_llm")
    }
    assert public <= set(notebook_llm.__all__), public - set(notebook_llm.__all__)


def test_issue_names_are_importable_from_the_root() -> None:
    for name in [
        "BlockStart",
        "TextDelta",
        "ReasoningDelta",
        "ToolCallDelta",
        "BlockEnd",
        "Usage",
        "Finish",
        "TextBlock",
        "ReasoningBlock",
        "ToolCallBlock",
        "ToolResultBlock",
        "ImageBlock",
        "Message",
        "ToolSchema",
        "TokenUsage",
        "FinishReason",
        "GenerateOptions",
        "validate_stream",
        "assemble",
        "event_from_json",
        "LlmError",
        "LlmAdapter",
        "Engine",
        "Chat",
        "map",
        "BatchApi",  # map(batch_api=BatchApi(wait=False)): docs/batch.md
        "RateLimits",  # map(rate_limits=RateLimits(period=1.0))
    ]:
        assert name in notebook_llm.__all__, name
    from notebook_llm import LuaAdapter  # noqa: F401  (lazy re-export)


def test_importing_the_engine_imports_no_notebook_code() -> None:
    code = (
        "import sys, notebook_llm\n"
        "from notebook_llm import Engine\n"
        "Engine(config_file=False).complete_sync('mock-direct', 'echo', prompt='x')\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('IPython', 'ipywidgets', 'ipykernel', 'jupyter_ui_poll', 'traitlets', 'comm')]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_load_ext_imports_neither_engine_nor_httpx_lupa_or_widgets() -> None:
    """``%load_ext notebook_llm`` stays light: the package root resolves its public
    names on first access and the magics import the engine, the Lua runtime and the widgets
    when a magic first needs them."""
    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "shell.run_line_magic('load_ext', 'notebook_llm')\n"
        "assert 'llm' in shell.magics_manager.magics['cell']\n"
        "assert 'adapter' in shell.magics_manager.magics['cell']\n"
        "heavy = ('httpx', 'lupa', 'ipywidgets', 'notebook_llm.engine.engine', 'notebook_llm.core.protocol')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    # without the background warm-up that %load_ext starts (test_warmup.py), which loads them
    env = {**os.environ, "NOTEBOOK_LLM_WARMUP": "0"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[]"


def test_importing_the_package_adds_no_import_hook() -> None:
    """``import notebook_llm`` changes nothing in how the interpreter imports: no finder on
    ``sys.meta_path``, no path hook (the 0.1 module paths are gone, not redirected)."""
    code = (
        "import sys\n"
        "before = (list(sys.meta_path), list(sys.path_hooks))\n"
        "import notebook_llm\n"
        "from notebook_llm import Engine\n"
        "Engine(config_file=False).complete_sync('mock-direct', 'echo', prompt='x')\n"
        "print((list(sys.meta_path), list(sys.path_hooks)) == before)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_a_module_path_of_0_1_is_not_importable() -> None:
    with pytest.raises(ModuleNotFoundError):
        __import__("notebook_llm.protocol")
    with pytest.raises(AttributeError):
        notebook_llm.errors  # type: ignore[attr-defined]  # noqa: B018


def test_lazy_names_are_the_real_objects_and_listed_by_dir() -> None:
    from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
    from notebook_llm.api.batch import map_prompts
    from notebook_llm.engine.engine import Engine

    assert notebook_llm.Engine is Engine
    assert notebook_llm.map is map_prompts
    assert notebook_llm.LuaAdapter is LuaAdapter
    assert set(notebook_llm.__all__) <= set(dir(notebook_llm))
    with pytest.raises(AttributeError, match="no_such_name"):
        notebook_llm.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def test_completion_lives_in_completion_py() -> None:
    """``Completion``/``assemble`` live in ``completion.py``; the root names point there."""
    from notebook_llm.core import completion

    assert notebook_llm.Completion is completion.Completion
    assert notebook_llm.assemble is completion.assemble
    assert completion.Completion.__module__ == "notebook_llm.core.completion"
