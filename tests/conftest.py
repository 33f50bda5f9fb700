"""Shared fixtures: every test runs with an isolated config dir and no provider keys."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import settings

from notebook_llm import Event, GenerateOptions, LlmAdapter

# Property tests draw the same examples on every run ("regression"), so a verdict is the code's,
# never the luck of a draw: a clean clone in CI gives the same result as the run before it.
# NOTEBOOK_LLM_FUZZ=explore draws new examples each run (hypothesis' default), to hunt for bugs;
# a failure found that way becomes an @example of its test. Loaded here, before the test
# modules build their own settings on top of it.
settings.register_profile("regression", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile(
    "explore" if os.environ.get("NOTEBOOK_LLM_FUZZ") == "explore" else "regression"
)

FIXTURES = Path(__file__).parent / "fixtures"
WIRE = FIXTURES / "wire"

KEY_VARS = [
    "OPENAI_API_KEY",
    "DEEPSEEK_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "GITHUB_TOKEN",
    "OLLAMA_API_KEY",
]


PROXY_VARS = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"]


@pytest.fixture(autouse=True)
def _isolate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir()
    config.write_text("")  # an empty config (a missing file named by the variable is warned of)
    monkeypatch.setenv("NOTEBOOK_LLM_CONFIG", str(config))
    monkeypatch.setenv("NOTEBOOK_LLM_ADAPTERS_DIR", str(tmp_path / "config" / "adapters"))
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)
    for var in PROXY_VARS:  # hermetic on a machine with a proxy (tests/test_proxy.py sets its own)
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.lower(), raising=False)
    for var in list(os.environ):
        if var.startswith("NOTEBOOK_LLM_") and var.endswith(("_BASE_URL", "_MODEL")):
            monkeypatch.delenv(var)
    monkeypatch.chdir(tmp_path)
    return


class ScriptedAdapter(LlmAdapter):
    """Yields a fixed list of events (or raises) — for engine tests."""

    name = "scripted"

    def __init__(
        self, events: Sequence[Event] = (), *, raise_after: BaseException | None = None
    ) -> None:
        self.events = list(events)
        self.raise_after = raise_after
        self.calls: list[GenerateOptions] = []

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        self.calls.append(options)
        for ev in self.events:
            yield ev
        if self.raise_after is not None:
            raise self.raise_after


@pytest.fixture
def comms(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every message the kernel would send to the front end, as (type, JSON data), recorded
    by a comm that stands in for it (the live-view tests)."""
    import comm
    from live_view_support import RecordingComm

    from notebook_llm.notebook.widgets import live

    log: list[tuple[str, str]] = []
    monkeypatch.setattr(comm, "create_comm", lambda **kw: RecordingComm(log, **kw))
    monkeypatch.setattr(live, "_LIBRARY", None)  # made on this recording comm
    return log


# ---------------------------------------------------------------------- parallel workers


def pytest_configure(config: pytest.Config) -> None:
    from kernel_ports import kernel_ports_below_the_ephemeral_range

    kernel_ports_below_the_ephemeral_range()  # (why: tests/kernel_ports.py)
