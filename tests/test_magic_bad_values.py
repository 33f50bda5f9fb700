"""``%llm budget`` and ``%%llm --image`` given careless values, in a real IPython shell."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from notebook_llm import Engine
from notebook_llm.adapters.mock.shared import shared_server
from notebook_llm.api.chat import set_default_engine
from notebook_llm.engine import pricing


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.setattr(pricing, "_session", {})  # prices set by a test end with it
    eng = Engine(config_file=False, env_file=False, retries=0)
    set_default_engine(eng)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "notebook_llm")
    magics = ip.magics_manager.registry["LlmMagics"]
    magics.widgets = "never"
    magics.hint = False
    magics.budget = None
    shared_server().clear_requests()
    yield ip
    ip.run_line_magic("unload_ext", "notebook_llm")
    set_default_engine(None)


def run(ip: InteractiveShell, line: str, cell: str | None = None) -> Any:
    with capture_output() as cap:
        if cell is None:
            ip.run_line_magic("llm", line)
        else:
            ip.run_cell_magic("llm", line, cell)
    return cap


@pytest.mark.parametrize("value", ["nan", "NaN", "-nan", "-0.5", "1e400x"])
def test_a_budget_that_is_not_a_cost_is_a_usage_error(shell: InteractiveShell, value: str) -> None:
    cap = run(shell, f"budget {value}")
    assert "UsageError" in cap.stderr or "budget" in cap.stderr
    assert "Traceback" not in cap.stderr + cap.stdout
    assert shell.magics_manager.registry["LlmMagics"].budget is None


def test_an_image_url_with_a_key_is_not_shown(shell: InteractiveShell) -> None:
    shell.user_ns["pic"] = "https://user:hunter2@example.com/cat.png?key=SECRET-123456"
    cap = run(shell, "mock:echo --image pic", "what is it?")
    shown = str([o.data for o in cap.outputs]) + cap.stdout + cap.stderr
    assert "example.com/cat.png" in shown
    assert "hunter2" not in shown
    assert "SECRET-123456" not in shown
