"""The command line: the demo (README command 1's main job), ask, providers."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from notebook_llm import Engine
from notebook_llm.__main__ import main
from notebook_llm.mock.direct_adapter import MockAdapter
from notebook_llm.session import set_default_engine


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
