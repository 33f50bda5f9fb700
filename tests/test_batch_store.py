"""map's journal (``store=``): what a row key covers, failed rows, the cost across restarts, bad
stores in one line, a journal readable without the package, and streamed inputs."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pandas as pd
import pytest
from pydantic import BaseModel

from notebook_llm import Completion, Engine, ErrorCode, Event, GenerateOptions, LlmAdapter, LlmError
from notebook_llm.adapters.mock.direct_adapter import MockAdapter
from notebook_llm.api.batch import map_prompts
from notebook_llm.api.batch_results import StoredResults
from notebook_llm.api.batch_store import batch_definition, row_key


class Counting(LlmAdapter):
    """The direct mock, counting what it is sent; a prompt starting with ``deny`` fails with
    AUTH while ``deny`` is in ``self.refuse``."""

    name = "counting"

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.refuse = True
        self.inner = MockAdapter()

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        text = options.messages[-1].text
        self.sent.append(text)
        await asyncio.sleep(0)
        if self.refuse and "deny" in text:
            raise LlmError("no access", ErrorCode.AUTH, status=401)
        async for event in self.inner.stream(options):
            yield event


@pytest.fixture
def setup() -> tuple[Engine, Counting]:
    engine = Engine(config_file=False, env_file=False, retries=0)
    adapter = Counting()
    engine.add_provider("c", adapter=adapter, model="echo", prices={"echo": (1000.0, 1000.0)})
    engine.add_provider("c2", adapter=adapter, model="echo")
    return engine, adapter


def run(engine: Engine, data: object, store: Path, **kw: object) -> object:
    kw.setdefault("provider", "c")
    return map_prompts(data, engine=engine, store=str(store), progress=False, **kw)  # type: ignore[arg-type]


FRAME = pd.DataFrame({"text": ["good", "fine", "deny me", "great"]}, index=[10, 11, 12, 13])


def test_an_unchanged_batch_sends_nothing_again(setup, tmp_path: Path) -> None:
    engine, adapter = setup
    first = run(engine, FRAME, tmp_path / "s.sqlite", template="Review: {text}")
    sent = len(adapter.sent)
    second = run(engine, FRAME, tmp_path / "s.sqlite", template="Review: {text}")
    assert len(adapter.sent) == sent  # nothing sent
    pd.testing.assert_frame_equal(first, second)
    assert list(second.index) == [10, 11, 12, 13]
    assert second.loc[12, "error"].startswith("AUTH: no access")


def test_a_changed_row_is_sent_again_and_only_it(setup, tmp_path: Path) -> None:
    engine, adapter = setup
    run(engine, FRAME, tmp_path / "s.sqlite", template="Review: {text}")
    adapter.sent.clear()
    changed = FRAME.copy()
    changed.loc[11, "text"] = "superb"
    out = run(engine, changed, tmp_path / "s.sqlite", template="Review: {text}")
    assert adapter.sent == ["Review: superb"]
    assert out.loc[11, "answer"] == "Review: superb"


@pytest.mark.parametrize(
    "change",
    [
        {"template": "Rate: {text}"},
        {"model": "echo-2"},
        {"temperature": 0.5},
        {"system": "Be brief"},
    ],
)
def test_a_changed_template_model_or_option_resends_every_row(setup, tmp_path, change) -> None:
    engine, adapter = setup
    base = {"template": "Review: {text}"}
    run(engine, FRAME, tmp_path / "s.sqlite", **base)
    adapter.sent.clear()
    with pytest.raises(LlmError) as info:  # a store of another batch: one line, nothing sent
        run(engine, FRAME, tmp_path / "s.sqlite", **{**base, **change})
    assert info.value.code == ErrorCode.STORE_MISMATCH
    assert "resend_changed=True" in str(info.value)
    assert "\n" not in str(info.value)
    assert adapter.sent == []
    run(engine, FRAME, tmp_path / "s.sqlite", resend_changed=True, **{**base, **change})
    assert len(adapter.sent) == len(FRAME)


def test_failed_rows_are_kept_and_retry_failed_sends_only_them(setup, tmp_path: Path) -> None:
    engine, adapter = setup
    store = tmp_path / "s.sqlite"
    run(engine, FRAME, store, template="Review: {text}")
    adapter.sent.clear()
    again = run(engine, FRAME, store, template="Review: {text}")
    assert adapter.sent == []  # a failed row is a result: not sent without retry_failed
    assert again.loc[12, "error"].startswith("AUTH")
    adapter.refuse = False
    fixed = run(engine, FRAME, store, template="Review: {text}", retry_failed=True)
    assert adapter.sent == ["Review: deny me"]
    assert fixed.loc[12, "answer"] == "Review: deny me"
    assert fixed.loc[12, "error"] is None
    conn = sqlite3.connect(store)
    assert conn.execute("SELECT attempts FROM rows WHERE pos = 2").fetchone() == (2,)
    conn.close()


def test_the_cost_cap_counts_what_earlier_runs_spent(setup, tmp_path: Path) -> None:
    engine, adapter = setup
    store = tmp_path / "s.sqlite"
    rows = [f"row {i}" for i in range(10)]
    run(engine, rows, store)
    conn = sqlite3.connect(store)
    (spent,) = conn.execute("SELECT total(cost) FROM rows").fetchone()
    conn.close()
    assert spent > 0
    adapter.sent.clear()
    more = rows + [f"row {i}" for i in range(10, 20)]
    # The cap equals what the first run spent: a fresh batch could send ten more rows, this
    # one may send nothing.
    with pytest.raises(LlmError) as info:
        run(engine, more, store, max_cost=spent)
    assert info.value.code == ErrorCode.BUDGET_EXCEEDED
    assert adapter.sent == []


def test_the_journal_reads_without_the_package(setup, tmp_path: Path) -> None:
    engine, _ = setup
    store = tmp_path / "s.sqlite"
    run(engine, FRAME, store, template="Review: {text}")
    conn = sqlite3.connect(store)
    rows = conn.execute("SELECT pos, status, answer, error FROM rows ORDER BY pos").fetchall()
    (definition,) = conn.execute("SELECT definition FROM batch").fetchone()
    conn.close()
    assert rows[0] == (0, "done", "Review: good", None)
    assert rows[2][1] == "failed"
    assert rows[2][3].startswith("AUTH: no access")
    assert '"template": "Review: {text}"' in definition


def test_the_row_key_covers_prompt_provider_model_and_options() -> None:
    base = batch_definition("T {x}", "openai", "gpt", {"temperature": 0})
    key = row_key("T 1", base)
    assert key == row_key("T 1", batch_definition("T {x}", "openai", "gpt", {"temperature": 0}))
    assert key != row_key("T 2", base)
    assert key != row_key("T 1", batch_definition("T {x}", "anthropic", "gpt", {"temperature": 0}))
    assert key != row_key("T 1", batch_definition("T {x}", "openai", "gpt-2", {"temperature": 0}))
    assert key != row_key("T 1", batch_definition("T {x}", "openai", "gpt", {"temperature": 1}))
    assert key != row_key("T 1", batch_definition("U {x}", "openai", "gpt", {"temperature": 0}))


# ------------------------------------------------------------------ bad stores, one line each


def _one_line(err: LlmError, code: str) -> None:
    assert err.code == code
    assert "\n" not in str(err)


def test_an_unwritable_store_path(setup, tmp_path: Path) -> None:
    engine, adapter = setup
    for path, words in [
        (tmp_path / "missing" / "s.sqlite", "does not exist"),
        (tmp_path, "it is a folder"),
        (Path("/proc/notebook_llm_store.sqlite"), "cannot write it"),
    ]:
        with pytest.raises(LlmError, match=words) as info:
            run(engine, ["a"], path)
        _one_line(info.value, ErrorCode.STORE_UNAVAILABLE)
    assert adapter.sent == []


def test_a_file_that_is_not_a_store_is_reported_and_left_alone(setup, tmp_path: Path) -> None:
    engine, adapter = setup
    text = tmp_path / "notes.sqlite"
    text.write_text("my notes, not a database")
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    for path in (text, other):
        before = path.read_bytes()
        with pytest.raises(LlmError, match="left as it is") as info:
            run(engine, ["a"], path)
        _one_line(info.value, ErrorCode.STORE_CORRUPT)
        assert path.read_bytes() == before
    assert adapter.sent == []


def test_a_damaged_journal_is_reported_and_never_overwritten(setup, tmp_path: Path) -> None:
    engine, adapter = setup
    store = tmp_path / "s.sqlite"
    run(engine, [f"row {i} " * 50 for i in range(200)], store)
    conn = sqlite3.connect(store)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(store.read_bytes())
    page = 4096
    assert len(data) > 4 * page
    data[2 * page : 3 * page] = b"\xff" * page  # a torn page in the middle of the file
    store.write_bytes(bytes(data))
    adapter.sent.clear()
    with pytest.raises(LlmError, match="damaged") as info:
        run(engine, [f"row {i} " * 50 for i in range(200)], store)
    _one_line(info.value, ErrorCode.STORE_CORRUPT)
    assert store.read_bytes() == bytes(data)
    assert adapter.sent == []


# ------------------------------------------------------------------ streamed inputs


def test_an_iterator_with_a_store_streams_to_disk_and_reads_back_in_chunks(setup, tmp_path) -> None:
    engine, _ = setup
    rows = (f"row {i}" for i in range(5_000))
    out = run(engine, rows, tmp_path / "s.sqlite")
    assert isinstance(out, StoredResults)
    assert len(out) == 5_000
    chunks = list(out.chunks(2_000))
    assert [len(c) for c in chunks] == [2_000, 2_000, 1_000]
    frame = out.to_pandas()
    assert list(frame["answer"][:3]) == ["row 0", "row 1", "row 2"]
    assert list(frame.index[-2:]) == [4_998, 4_999]


@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_a_file_is_read_in_chunks(setup, tmp_path: Path, kind: str) -> None:
    engine, adapter = setup
    frame = pd.DataFrame({"text": [f"t{i}" for i in range(3_000)], "n": range(3_000)})
    path = tmp_path / f"in.{kind}"
    if kind == "parquet":
        frame.to_parquet(path)
    else:
        frame.to_csv(path, index=False)
    out = run(engine, path, tmp_path / "s.sqlite", template="{text}/{n}")
    assert isinstance(out, StoredResults)
    got = out.to_pandas()
    assert list(got["answer"]) == [f"t{i}/{i}" for i in range(3_000)]
    adapter.sent.clear()
    run(engine, path, tmp_path / "s.sqlite", template="{text}/{n}")
    assert adapter.sent == []  # resumed: the file read again, nothing sent


class Review(BaseModel):
    stars: int
    summary: str


def test_a_typed_map_reads_back_the_same_frame(tmp_path: Path) -> None:
    engine = Engine(config_file=False, env_file=False, retries=0)
    frame = pd.DataFrame({"text": ["a", "b", "c"]})
    live = map_prompts(
        frame,
        engine=engine,
        provider="mock-direct",
        template="{text}",
        schema=Review,
        progress=False,
    )
    stored = map_prompts(
        frame,
        engine=engine,
        provider="mock-direct",
        template="{text}",
        schema=Review,
        store=str(tmp_path / "s.sqlite"),
        progress=False,
    )
    resumed = map_prompts(
        frame,
        engine=engine,
        provider="mock-direct",
        template="{text}",
        schema=Review,
        store=str(tmp_path / "s.sqlite"),
        progress=False,
    )
    pd.testing.assert_frame_equal(live, stored)
    pd.testing.assert_frame_equal(live, resumed)


def test_a_list_comes_back_as_completions(setup, tmp_path: Path) -> None:
    engine, _ = setup
    first = run(engine, ["x", "deny", "y"], tmp_path / "s.sqlite")
    again = run(engine, ["x", "deny", "y"], tmp_path / "s.sqlite")
    for out in (first, again):
        assert isinstance(out[0], Completion)
        assert out[0].text == "x"
        assert isinstance(out[1], LlmError)
        assert out[1].code == "AUTH"
        assert out[0].usage is not None
