"""The command line: the demo (README command 1's main job), ask, providers."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from notebook_llm import Engine
from notebook_llm.__main__ import main
from notebook_llm.adapters.mock.direct_adapter import MockAdapter
from notebook_llm.engine.session import set_default_engine


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "notebook_llm", *args], capture_output=True, text=True, timeout=120
    )


def test_demo_streams_every_mock_model_offline() -> None:
    out = run("demo")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "Hello from notebook_llm! Every piece of this streamed back." in text
    assert "[thinking]" in text  # reasoning arrives through the openai adapter too
    assert 'get_weather({"city":' in text
    assert "finish: tool-calls" in text
    assert "finish: max-tokens" in text


def test_ask_and_providers() -> None:
    out = run("ask", "-m", "echo", "two", "words")
    assert out.returncode == 0
    assert "two words" in out.stdout
    listing = run("providers")
    assert "openai" in listing.stdout
    assert "needs OPENAI_API_KEY" in listing.stdout


def test_a_configuration_problem_is_one_line_and_exit_1() -> None:
    out = run("ask", "-p", "openai", "hi")
    assert out.returncode == 1
    assert out.stderr.startswith("error: [MISSING_CREDENTIAL]")
    assert "Traceback" not in out.stderr


@pytest.fixture
def session_engine() -> Iterator[Engine]:
    eng = Engine(config_file=False, env_file=False, retries=0)
    eng.add_provider("only-in-session", adapter=MockAdapter(), model="echo", needs_key=False)
    set_default_engine(eng)
    yield eng
    set_default_engine(None)


def test_the_cli_uses_the_session_engine(
    session_engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    """One default engine (issue 15): the CLI asks ``session.default_engine()`` like the magics,
    ``Chat`` and ``map``; a provider that only the session engine knows is reachable from it."""
    assert main(["ask", "-p", "only-in-session", "shared", "engine"]) == 0
    assert "shared engine" in capsys.readouterr().out
    assert main(["providers"]) == 0
    assert "only-in-session" in capsys.readouterr().out


def _on_a_terminal(*args: str, env: dict[str, str] | None = None) -> str:
    """What the CLI writes when its stdout is a terminal (a pseudo-terminal here)."""
    import os
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "notebook_llm", *args],
        stdout=follower,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    os.close(follower)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_colour_only_on_a_terminal_and_never_with_no_color() -> None:
    piped = run("demo")
    assert piped.returncode == 0
    assert "\033[" not in piped.stdout  # piped or redirected: plain text
    assert "\033[1m%%llm mock:echo" in _on_a_terminal("demo")
    assert "\033[" not in _on_a_terminal("demo", env={"NO_COLOR": "1"})


def test_help_has_no_rest_markup() -> None:
    out = run("--help")
    assert out.returncode == 0
    assert "``" not in out.stdout
    assert "(or python -m notebook_llm) with a command: demo," in out.stdout


@pytest.mark.parametrize(
    ("args", "meant"),
    [
        (("ask", "-max-tokens", "5", "hi"), "--max-tokens"),
        (("ask", "-provider", "mock", "hi"), "--provider"),
        (("check-adapter", "x.lua", "-fixtures", "dir"), "--fixtures"),
        (("check-adapter", "x.lua", "-strict"), "--strict"),
    ],
)
def test_a_long_option_with_one_dash_is_named(args: tuple[str, ...], meant: str) -> None:
    out = run(*args)
    assert out.returncode == 2
    assert f"did you mean {meant}?" in out.stderr
    assert "invalid" not in out.stderr


def test_a_short_option_with_its_value_attached_still_works() -> None:
    out = run("ask", "-mecho", "attached")  # -m echo, as argparse allows
    assert out.returncode == 0, out.stderr
    assert "attached" in out.stdout


def test_providers_say_what_the_mock_adapters_are() -> None:
    listing = run("providers").stdout.splitlines()
    mock = next(line for line in listing if line.startswith("mock "))
    assert "adapter=mock" in mock
    assert "openai Lua adapter against a loopback mock server" in mock
    direct = next(line for line in listing if line.startswith("mock-direct"))
    assert "no HTTP" in direct


def _console_script() -> str:
    """The ``notebook-llm`` command of this environment (what the README's reader types)."""
    script = Path(sys.executable).parent / "notebook-llm"
    assert script.exists(), f"{script}: the console script is not installed"
    return str(script)


def run_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_console_script(), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_ask_takes_provider_colon_model_as_the_magics_do() -> None:
    out = run_command("ask", "-p", "mock:reasoning", "Why", "is", "the", "sky", "blue?")
    assert out.returncode == 0, out.stderr
    assert "[thinking]" in out.stdout  # the reasoning model answered
    assert "Why is the sky blue?" in out.stdout
    twice = run_command("ask", "-p", "mock:echo", "-m", "lorem", "hi")
    assert twice.returncode == 1
    assert twice.stderr.strip() == (
        "error: [INVALID_OPTIONS] the model is given twice (mock:echo and -m lorem): give one"
    )


def test_ask_reads_a_first_word_that_names_a_provider_as_the_provider() -> None:
    out = run_command("ask", "openai", "hi")
    # openai was chosen (it has no key here), not the mock fed "openai hi"
    assert out.returncode == 1
    assert out.stderr.startswith("error: [MISSING_CREDENTIAL] no API key for provider 'openai'")
    assert "openai hi" not in out.stdout
    chosen = run_command("ask", "mock:reasoning", "hi")
    assert chosen.returncode == 0
    assert "[thinking]" in chosen.stdout
    quoted = run_command("ask", "openai hi")  # one quoted word: the prompt as written
    assert quoted.returncode == 0
    assert quoted.stdout.startswith("openai hi")
    plain = run_command("ask", "what", "is", "openai?")  # not the first word: a prompt word
    assert plain.returncode == 0
    assert plain.stdout.startswith("what is openai?")


def test_help_names_every_command_in_its_summary() -> None:
    out = run_command("--help")
    assert out.returncode == 0
    assert out.stdout.startswith("usage: notebook-llm ")
    summary = out.stdout.split("\n\n")[1]  # the description, before the list of commands
    for command in ("demo", "ask", "providers", "check-adapter", "draft-adapter", "export-adapter"):
        assert command in summary, command
    ask = run_command("ask", "--help")
    assert "[PROVIDER[:MODEL]]" in ask.stdout
    assert "PROVIDER or PROVIDER:MODEL" in ask.stdout


def test_a_misspelt_cli_option_gets_did_you_mean() -> None:
    out = run_command("ask", "--max_tokens", "5", "hi")
    assert out.returncode == 2
    assert out.stderr.splitlines()[-1] == (
        "notebook-llm: error: --max_tokens is not an option: did you mean --max-tokens?"
    )
