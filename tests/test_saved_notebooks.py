"""Saved notebooks read without a kernel: executed with nbclient (with and without stored
widget state), every ``%%llm`` cell must end as ONE static display holding the reasoning once,
the tool-call cards, the answer and the footer; no output may be a widget reference only; and
the file stays small (about twice the answers' text plus the notebook's own boilerplate).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

CELLS = [
    "%load_ext notebook_llm",
    'def get_weather(city: str) -> str:\n    """The current weather in a city."""\n'
    '    return f"sunny in {city}"',
    "%%llm mock:tools --tools get_weather\nLisbon",
    "%%llm mock:reasoning\nIs 17 a prime number?",
    "%%llm mock:lorem --max-tokens 40\nWrite a paragraph about rivers.",
    "%%llm mock:echo\nA short echo, please.",
    "from notebook_llm import Chat\n"
    'chat = Chat(provider="mock", model="echo")\n'
    'reply = chat.send("Hello from Chat.send")',
    "import notebook_llm\n"
    "results = notebook_llm.map(['a', 'b', 'c'], provider='mock', model='echo')",
]


def _execute(tmp_path: Path, store_widget_state: bool) -> tuple[nbformat.NotebookNode, int]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    env_before = dict(os.environ)
    os.environ["NOTEBOOK_LLM_CONFIG"] = str(tmp_path / "config.toml")
    os.environ["NOTEBOOK_LLM_ADAPTERS_DIR"] = str(tmp_path / "adapters")
    os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    try:
        NotebookClient(
            nb,
            timeout=600,
            startup_timeout=300,
            kernel_name="python3",
            store_widget_state=store_widget_state,
            resources={"metadata": {"path": str(tmp_path)}},
        ).execute()
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    return nb, path.stat().st_size


def _outputs(cell: Any) -> list[dict[str, Any]]:
    return [o for o in cell.get("outputs", []) if "data" in o]


def _static_text(cell: Any) -> str:
    """Everything a reader without a kernel sees in a cell (markdown, html and plain text)."""
    parts = []
    for out in _outputs(cell):
        data = out["data"]
        parts.append(
            data.get("text/markdown") or data.get("text/html") or data.get("text/plain", "")
        )
    return "\n".join(parts)


@pytest.fixture(scope="module", params=[True, False], ids=["widget-state", "no-widget-state"])
def executed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[nbformat.NotebookNode, int]:
    return _execute(tmp_path_factory.mktemp("saved"), bool(request.param))


def test_no_output_is_a_widget_reference_only(executed: tuple[Any, int]) -> None:
    nb, _size = executed
    for cell in nb.cells:
        for out in _outputs(cell):
            data = out["data"]
            assert set(data) - {WIDGET_VIEW}, f"a widget-only output in {cell.source!r}"
            assert WIDGET_VIEW not in data, f"a widget reference left in {cell.source!r}"
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    for model in state.get("state", {}).values():  # closed widgets keep no answer text
        assert "sunny in Lisbon" not in json.dumps(model)


def test_each_llm_cell_is_one_static_display(executed: tuple[Any, int]) -> None:
    nb, _size = executed
    for cell in nb.cells[2:6]:
        outs = _outputs(cell)
        assert len(outs) == 1, [o["data"].keys() for o in outs]
        data = outs[0]["data"]
        # sanitized HTML and plain text only: no reader re-reads the answer as Markdown
        assert set(data) == {"text/html", "text/plain"}, set(data)
        assert 'class="notebook-llm-final tex2jax_ignore mathjax_ignore"' in data["text/html"]


def test_tool_call_card_and_footer_are_in_the_static_output(executed: tuple[Any, int]) -> None:
    nb, _size = executed
    text = _static_text(nb.cells[2])
    assert "notebook-llm-tool" in text
    assert "get_weather" in text
    assert "Lisbon" in text  # the arguments
    assert "sunny in Lisbon" in text  # the result
    assert "notebook-llm-footer" in text
    assert "mock:tools" in text
    plain = nb.cells[2].outputs[-1]["data"]["text/plain"]
    assert "get_weather" in plain
    assert "sunny in Lisbon" in plain
    assert "mock:tools" in plain


def test_reasoning_is_shown_once_and_collapsed(executed: tuple[Any, int]) -> None:
    nb, _size = executed
    text = _static_text(nb.cells[3])
    assert text.count("Reasoning") == 1, text
    assert "<details" in text
    assert "<details open" not in text


def test_a_max_tokens_answer_says_so(executed: tuple[Any, int]) -> None:
    nb, _size = executed
    text = _static_text(nb.cells[4])
    assert "max tokens" in text
    assert "max tokens" in nb.cells[4].outputs[-1]["data"]["text/plain"]


def test_chat_send_and_batch_progress_end_static(executed: tuple[Any, int]) -> None:
    nb, _size = executed
    chat_text = _static_text(nb.cells[6])
    assert "Hello from Chat.send" in chat_text
    assert "mock:echo" in chat_text
    batch = _outputs(nb.cells[7])
    assert batch, "the batch progress left no static line"
    assert "3/3" in batch[-1]["data"]["text/plain"]


@pytest.mark.parametrize("store_widget_state", [True, False], ids=["widget-state", "no-state"])
def test_saved_size_is_about_twice_the_answers_plus_boilerplate(
    tmp_path: Path, store_widget_state: bool
) -> None:
    # Either way it was saved. nbclient never drops a closed comm's state, so a headless run
    # (allow_stdin=False: nbclient, papermill, nbval) creates no widget at all: no one watches
    # it stream (notebook_llm.notebook.watching), and the static output is all a reader ever sees.
    nb, size = _execute(tmp_path, store_widget_state=store_widget_state)
    # What a reader reads: the plain text of every output (the answers, cards and footers).
    answers = sum(len(o["data"].get("text/plain", "")) for c in nb.cells for o in _outputs(c))
    empty = nbformat.v4.new_notebook()
    empty.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    # Sources and metadata, per cell nbclient's execution timestamps, per output its JSON
    # envelope and fixed markup (card and footer styles): nothing here grows with the answers.
    n_outputs = sum(len(_outputs(c)) for c in nb.cells)
    boilerplate = len(nbformat.writes(empty)) + 400 * len(nb.cells) + 600 * n_outputs
    assert size <= 2 * answers + boilerplate, (size, answers, boilerplate)


def test_a_headless_run_stores_no_widget_state(executed: tuple[Any, int]) -> None:
    nb, _size = executed
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    assert not state.get("state"), sorted(m["model_name"] for m in state["state"].values())


def test_a_card_keeps_its_text_as_text_whatever_the_arguments_hold() -> None:
    from notebook_llm.notebook.widgets.final import FinalView, ToolCallInfo

    call = ToolCallInfo("f", '{"a": "x\n\n# not a heading"}', "line 1\n\nline <2>", "ok")
    view = FinalView("answer", tools=[call], footer="mock:tools · done")
    html = view._repr_mimebundle_()["text/html"]
    card = html[html.index('<div class="notebook-llm-tool"') : html.index("<p>answer</p>")]
    assert (
        '<pre style="margin:2px 0;white-space:pre-wrap">{"a": "x\n\n# not a heading"}</pre>' in card
    )
    assert "line 1\n\nline &lt;2&gt;</pre>" in card  # a blank line ends nothing in HTML
    assert "<h1>" not in html
    assert html.endswith(
        '<div class="notebook-llm-footer" style="opacity:0.75;font-size:90%">'
        "mock:tools · done</div></div>"
    )
