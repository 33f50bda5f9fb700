"""Help for ``%%llm`` and ``%llm``, as a user asks for it: ``%llm help``, ``%%llm --help``, the
usage line after a mistake, "did you mean" for a misspelt option, and the options that must do
what their help says (``--no-stream``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from notebook_llm.engine.session import set_default_engine
from notebook_llm.notebook.magics.args import llm_cell


@pytest.fixture
def ip() -> Iterator[Any]:
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "notebook_llm")
    magics = shell.magics_manager.registry["LlmMagics"]
    magics.default_provider = None
    magics.default_model = None
    magics.chats.clear()
    shell.user_ns.pop("_llm", None)
    yield shell
    shell.run_line_magic("unload_ext", "notebook_llm")
    set_default_engine(None)


def _run(ip: Any, line: str, cell: str | None = None) -> tuple[str, str]:
    with capture_output() as cap:
        if cell is None:
            ip.run_line_magic("llm", line)
        else:
            ip.run_cell_magic("llm", line, cell)
    assert "Traceback" not in cap.stdout + cap.stderr
    return cap.stdout, cap.stderr


def _options() -> list[str]:
    """Every option the ``%%llm`` line's parser takes (``-s`` and ``--system`` alike)."""
    return sorted(llm_cell.parser._option_string_actions)


def test_the_options_are_the_parsers() -> None:
    assert {"--max-steps", "--no-stream", "--schema", "-o", "--out"} <= set(_options())


def test_llm_help_lists_every_cell_option_on_a_line_of_its_own(ip: Any) -> None:
    out, err = _run(ip, "help")
    assert err == ""
    assert "%llm history [NAME]" in out  # the line commands are still there
    rows = {}  # an indented line: the form (``-s, --system SYSTEM``), then what it does
    for ln in out.splitlines():
        if ln.startswith("  "):
            form, _, text = ln.strip().partition("  ")
            rows[form] = text.strip()
    for option in _options():
        forms = [f for f in rows if option in f.replace(",", " ").split()]
        assert len(forms) == 1, f"{option}: {forms}"
        assert rows[forms[0]], f"{option} has no help text"


def test_cell_help_is_reached_with_dash_dash_help_too(ip: Any) -> None:
    out, err = _run(ip, "--help", "this cell is not sent\n")
    assert err == ""
    assert "_llm" not in ip.user_ns  # nothing was sent
    for option in _options():
        assert option in out, option
    assert "--no-stream" in out
    assert '"stream": false' in out
    short, _ = _run(ip, "mock -h", "nor is this one\n")
    assert short == out
    help_out, _ = _run(ip, "help")
    assert out.strip() in help_out  # the same lines, both ways


def test_the_usage_line_after_a_mistake_names_every_option(ip: Any) -> None:
    _, err = _run(ip, "mock --max-step", "hi")  # a value missing: argparse's own error
    usage = next(ln for ln in err.splitlines() if ln.startswith("usage: %%llm"))
    assert "[--max-steps N]" in usage
    for names, _ in [(a.option_strings, a) for a in llm_cell.parser._actions if a.option_strings]:
        assert any(n in usage for n in names), names


@pytest.mark.parametrize(
    ("line", "meant"),
    [
        ("mock --max_tokens 5", "--max-tokens"),
        ("mock --max_steps 2", "--max-steps"),
        ("mock --temprature 0.5", "--temperature"),
        ("mock --no_stream", "--no-stream"),
    ],
)
def test_a_misspelt_option_gets_did_you_mean(ip: Any, line: str, meant: str) -> None:
    _, err = _run(ip, line, "hi")
    typed = line.split()[1]
    assert err.splitlines()[0] == (f"UsageError: {typed} is not an option: did you mean {meant}?")
    assert "_llm" not in ip.user_ns


def test_a_system_prompt_that_looks_like_an_option_is_no_mistake(ip: Any) -> None:
    _out, err = _run(ip, "mock -s '--max_tokens is a field' -o r", "hi")
    assert err == ""
    assert ip.user_ns["r"].text == "hi"


def _recorded_requests(ip: Any, tmp_path: Path, line: str) -> list[dict[str, Any]]:
    cassette = tmp_path / "session.jsonl"
    _run(ip, f"record {cassette}")
    try:
        _run(ip, line, "hello there\n")
    finally:
        _run(ip, "record stop")
    rows = [json.loads(x) for x in cassette.read_text("utf-8").splitlines()]
    return [r["request"] for r in rows if "request" in r]


def test_no_stream_asks_for_one_whole_body(ip: Any, tmp_path: Path) -> None:
    (request,) = _recorded_requests(ip, tmp_path, "mock:reasoning --no-stream -o r")
    assert request["stream"] is False
    answer = ip.user_ns["r"]
    assert answer.text == "hello there"
    assert answer.reasoning  # the whole body is read as the stream is: reasoning and all
    assert answer.usage is not None
    assert answer.usage.output_tokens > 0
    (streamed,) = _recorded_requests(ip, tmp_path, "mock:reasoning -o r")
    assert streamed["stream"] is True


def test_history_and_reset_answer_an_unknown_name_alike(ip: Any) -> None:
    _, history = _run(ip, "history nope")
    _, reset = _run(ip, "reset nope")
    assert history.splitlines()[0] == reset.splitlines()[0]
    assert history.splitlines()[0] == (
        "UsageError: no conversation named 'nope' (conversations: none yet)"
    )
    assert history.splitlines()[1].startswith("usage: %llm history [NAME]")
    assert reset.splitlines()[1].startswith("usage: %llm reset [NAME]")
    # a named conversation that exists, and the default one (empty or not), are fine for both
    _run(ip, "mock --chat notes", "remember this")
    out, err = _run(ip, "history notes")
    assert err == ""
    assert "remember this" in out
    out, err = _run(ip, "reset notes")
    assert err == ""
    assert out.strip() == "conversation 'notes' reset"
    for command in ("history", "reset"):
        _, err = _run(ip, command)
        assert err == ""


def test_an_unknown_line_command_gets_did_you_mean(ip: Any) -> None:
    _, err = _run(ip, "histroy")
    assert err.splitlines()[0] == "UsageError: unknown command 'histroy': did you mean history?"
