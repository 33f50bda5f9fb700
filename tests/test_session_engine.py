"""``notebook_llm.session_engine()``: the engine the magics, ``Chat``, ``map`` and the CLI share,
public, and named wherever a user binds something in the wrong engine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import notebook_llm
from notebook_llm import Engine, LlmError
from notebook_llm.adapters.mock.server import MockServer
from notebook_llm.engine.session import default_engine, set_default_engine

ROOT = Path(__file__).resolve().parents[1]
#: A Lua adapter for an OpenAI-compatible server, under another name (what a user writes in a
#: ``%%adapter parrot`` cell).
PARROT = (
    (ROOT / "adapters" / "openai.lua")
    .read_text("utf-8")
    .replace('name = "openai"', 'name = "parrot"')
)


@pytest.fixture
def ip() -> Iterator[Any]:
    set_default_engine(None)
    shell = InteractiveShell.instance()
    # The shell is one per process: a test file run before this one on the same worker may
    # have loaded the extension, or registered an ``%adapter`` of its own engine, on it. Load
    # afresh, so ``%adapter`` and ``%%llm`` are the extension's own (the session engine's).
    notebook_llm.unload_ipython_extension(shell)  # also drops magics registered by hand
    shell.extension_manager.loaded.discard("notebook_llm")
    shell.run_line_magic("load_ext", "notebook_llm")
    magics = shell.magics_manager.registry["LlmMagics"]
    magics.default_provider = None
    magics.chats.clear()
    yield shell
    shell.run_line_magic("unload_ext", "notebook_llm")
    set_default_engine(None)


@pytest.fixture
def server() -> Iterator[MockServer]:
    mock = MockServer().start()
    yield mock
    mock.stop()


def _cell(ip: Any, magic: str, line: str, body: str) -> str:
    with capture_output() as cap:
        ip.run_cell_magic(magic, line, body)
    shown = [o.data.get("text/plain", "") for o in cap.outputs]
    return cap.stdout + cap.stderr + "\n".join(shown)


def test_session_engine_is_public_and_is_the_magics_engine() -> None:
    assert "session_engine" in notebook_llm.__all__
    assert notebook_llm.session_engine() is default_engine()
    set_default_engine(None)


def test_a_provider_bound_in_the_session_engine_reaches_llm(ip: Any, server: MockServer) -> None:
    assert "loaded adapter parrot" in _cell(ip, "adapter", "parrot", PARROT)
    # The README's way: the session's engine, reached by its public name.
    notebook_llm.session_engine().add_provider(
        "parrot", adapter="parrot", base_url=f"{server.url}/v1", needs_key=False, model="echo"
    )
    shown = _cell(ip, "llm", "parrot -o r", "squawk")
    assert ip.user_ns["r"].error is None, shown
    assert ip.user_ns["r"].text == "squawk"


def test_an_engine_of_ones_own_says_where_the_cells_adapter_is(ip: Any, server: MockServer) -> None:
    _cell(ip, "adapter", "parrot", PARROT)
    with pytest.raises(LlmError) as info:
        Engine().add_provider("parrot", adapter="parrot", base_url=server.url, needs_key=False)
    assert info.value.code == "NO_ADAPTER"
    assert (
        'bind it there with notebook_llm.session_engine().add_provider("parrot", '
        'adapter="parrot", ...)' in info.value.message
    )
    # and the cell that then asks for it names the same fix
    shown = _cell(ip, "llm", "parrot", "squawk")
    assert "NO_ADAPTER" in shown
    assert 'notebook_llm.session_engine().add_provider("parrot", adapter="parrot"' in shown
    assert "an Engine() you make is another one" in shown


def test_a_provider_added_to_an_engine_of_ones_own_is_explained(
    ip: Any, server: MockServer
) -> None:
    mine = Engine()
    mine.add_provider("local", adapter="openai", base_url=f"{server.url}/v1", needs_key=False)
    shown = _cell(ip, "llm", "local", "hi")
    assert "no provider or adapter route named 'local'" in shown
    assert "a provider added to an Engine() of your own is not one of these" in shown
    assert 'notebook_llm.session_engine().add_provider("local", ...)' in shown


def test_no_notebook_or_doc_reaches_for_the_private_engine() -> None:
    """Where the README, the docs and the notebooks mean the magics' engine, they use the
    public name, not ``notebook_llm.engine.session``."""
    docs = [p for p in ROOT.glob("docs/*.md") if p.name != "architecture.md"]  # the internals
    texts = {p: p.read_text("utf-8") for p in [ROOT / "README.md", *docs]}
    for path in sorted(ROOT.glob("notebooks/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        texts[path] = json.dumps([c.source for c in nb.cells])
    for path, text in texts.items():
        assert "default_engine" not in text, path
        assert "notebook_llm.engine.session" not in text, path
    assert "notebook_llm.session_engine()" in texts[ROOT / "notebooks" / "writing_an_adapter.ipynb"]
    assert "session_engine()" in texts[ROOT / "README.md"]
