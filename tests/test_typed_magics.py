"""``%%llm --schema``, ``--image`` and ``%llm budget`` in a real IPython shell, against the
loopback mock server (its requests are counted and read)."""

from __future__ import annotations

import base64
import io
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from PIL import Image
from pydantic import BaseModel

from notebook_llm import Engine
from notebook_llm.adapters.mock.shared import shared_server
from notebook_llm.api.chat import set_default_engine
from notebook_llm.engine import pricing
from notebook_llm.engine.pricing import set_price


class Sentiment(BaseModel):
    label: Literal["positive", "negative", "neutral"]
    score: float


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
    ip.user_ns["Sentiment"] = Sentiment
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


def outputs(cap: Any, mime: str) -> list[str]:
    return [str(o.data[mime]) for o in cap.outputs if mime in o.data]


def photo(path: Path, size: tuple[int, int] = (800, 600)) -> Path:
    rng = random.Random(1)
    img = Image.frombytes(
        "RGB", size, bytes(rng.getrandbits(8) for _ in range(size[0] * size[1] * 3))
    )
    img.save(path, format="PNG")
    return path


def test_schema_flag_gives_parsed_and_a_field_table(shell: InteractiveShell) -> None:
    cap = run(shell, "mock:echo --schema Sentiment -o r", "Review: {1 + 1} great")
    r = shell.user_ns["r"]
    assert isinstance(r.parsed, Sentiment)
    table = outputs(cap, "text/html")[-1]
    assert "<td><strong>label</strong></td>" in table
    assert f"<td>{r.parsed.label}</td>" in table
    body = shared_server().requests[-1].body
    assert body["response_format"]["json_schema"]["name"] == "Sentiment"


def test_schema_flag_with_an_unknown_name_is_a_usage_error(shell: InteractiveShell) -> None:
    cap = run(shell, "mock:echo --schema Nope", "x")
    assert "--schema: 'Nope' is not in the namespace" in cap.stderr
    assert shared_server().requests == []


def test_image_flag_sends_each_image_and_stores_only_a_thumbnail(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    path = photo(tmp_path / "big.png")
    raw = path.read_bytes()
    shell.user_ns["pic"] = raw
    cap = run(shell, f"mock:echo --image pic,{path}", "What is in these?")
    body = shared_server().requests[-1].body
    parts = body["messages"][-1]["content"]
    urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert urls == [f"data:image/png;base64,{base64.b64encode(raw).decode()}"] * 2
    html = outputs(cap, "text/html")[0]
    assert html.count("<img ") == 2
    assert base64.b64encode(raw).decode()[:200] not in json.dumps([o.data for o in cap.outputs])
    thumb = html.split('src="data:image/jpeg;base64,')[1].split('"')[0]
    with Image.open(io.BytesIO(base64.b64decode(thumb))) as small:
        assert max(small.size) <= 96
    assert len(html) < len(raw) / 50  # what the notebook keeps is a small fraction


def test_budget_refuses_a_cell_over_it_and_sends_nothing(shell: InteractiveShell) -> None:
    set_price("echo", 1000.0, 1000.0)  # dollars per million tokens: a cell costs ~$0.26
    run(shell, "budget 0.01")
    cap = run(shell, "mock:echo", "hello")
    assert "BUDGET_EXCEEDED" in outputs(cap, "text/plain")[-1]
    assert "%llm budget" in outputs(cap, "text/plain")[-1]
    assert shared_server().requests == []
    run(shell, "budget 5")
    cap = run(shell, "mock:echo --max-tokens 20", "hello")
    assert len(shared_server().requests) == 1
    footer = outputs(cap, "text/plain")[-1].split("\n-- ")[-1]
    assert "spent $" in footer
    assert "of $5.00 budget" in footer
    magics = shell.magics_manager.registry["LlmMagics"]
    assert magics.budget.spent > 0
    assert "spent" in run(shell, "budget").stdout


def test_the_mock_is_free_under_a_budget(shell: InteractiveShell) -> None:
    """The mock passes any cap (a model with no price is refused: tests/test_cost_cap.py)."""
    run(shell, "budget 0.01")
    run(shell, "mock:echo", "hello")
    assert len(shared_server().requests) == 1
    assert "spent $0.0000 of $0.0100 budget" in run(shell, "budget").stdout


def test_schema_retries_sends_the_message_back_as_a_second_turn(shell: InteractiveShell) -> None:
    from notebook_llm.adapters.mock import MockReply

    shared_server().queue_reply(MockReply.build('{"label": "great"}'))
    cap = run(shell, "mock:echo --schema Sentiment --schema-retries 1 -o r", "Review: ok")
    assert isinstance(shell.user_ns["r"].parsed, Sentiment)
    requests = shared_server().requests
    assert len(requests) == 2
    feedback = requests[1].body["messages"]
    assert feedback[-2] == {"role": "assistant", "content": '{"label": "great"}'}
    assert "label" in feedback[-1]["content"]
    plain = outputs(cap, "text/plain")
    assert any("SCHEMA_MISMATCH" in p for p in plain)  # the first answer is shown, with why
    assert "<td><strong>label</strong></td>" in outputs(cap, "text/html")[-1]
    chat_history = shell.magics_manager.registry["LlmMagics"].chats
    assert chat_history == {}  # a one-off cell keeps no conversation


def test_schema_retries_without_schema_is_a_usage_error(shell: InteractiveShell) -> None:
    cap = run(shell, "mock:echo --schema-retries 1", "x")
    assert "--schema-retries N" in cap.stderr
