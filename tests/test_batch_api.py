"""``map(..., batch_api=True)`` end to end against the mock server's batch endpoints: the same
answers as a live ``map`` (typed ones too), half the price, everything kept in the store, a
new engine collecting what an earlier one sent, splitting at the limits, failed and expired
rows kept with the provider's error and sent again with ``retry_failed=True``, and the
refusals."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from notebook_llm.adapters.mock.batch_endpoints import BatchScript
from notebook_llm.adapters.mock.server import MockServer
from notebook_llm.api.batch import map_prompts
from notebook_llm.api.batch_api import BatchApi
from notebook_llm.core.cancel import StopSignal
from notebook_llm.core.completion import Completion
from notebook_llm.core.errors import ErrorCode, LlmError
from notebook_llm.engine.engine import Engine
from notebook_llm.engine.pricing import cost

PRICE = (2.0, 8.0)  # per million tokens
NOW = BatchApi(
    poll_first=0, poll_max=0
)  # no wait between polls: the mock decides when a batch ends


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer() as srv:
        yield srv


def _engine(server: MockServer) -> Engine:
    """An engine with the mock server as an OpenAI and an Anthropic provider (no key)."""
    engine = Engine(config_file=False, retries=0)
    engine.add_provider(
        "oa", adapter="openai", base_url=server.url + "/v1", model="echo", prices={"echo": PRICE}
    )
    engine.add_provider(
        "claude", adapter="anthropic", base_url=server.url, model="echo", prices={"echo": PRICE}
    )
    return engine


API = {"oa": "openai", "claude": "anthropic"}


def _run(engine: Engine, provider: str, prompts: Any, store: Path, **options: Any) -> Any:
    settings = options.pop("batch_api", NOW)
    if isinstance(settings, BatchApi) and settings.api is None:
        settings = BatchApi(**{**settings.__dict__, "api": API.get(provider)})
    return map_prompts(
        prompts,
        provider=provider,
        engine=engine,
        batch_api=settings,
        store=str(store),
        progress=options.pop("progress", False),
        **options,
    )


def _texts(results: list[Any]) -> list[Any]:
    return [r.text if isinstance(r, Completion) else r.code for r in results]


def _created(server: MockServer, api: str) -> int:
    path = "/v1/batches" if api == "openai" else "/v1/messages/batches"
    return sum(1 for r in server.requests if r.method == "POST" and r.path == path)


def _generated(server: MockServer) -> int:
    """Live generation requests (not batch ones) the server answered."""
    return sum(1 for r in server.requests if r.path in ("/v1/chat/completions", "/v1/messages"))


@pytest.mark.parametrize("provider", ["oa", "claude"])
def test_a_batch_gives_the_answers_and_usage_a_live_map_gives(
    server: MockServer, tmp_path: Path, provider: str
) -> None:
    engine = _engine(server)
    prompts = ["alpha", "beta gamma", "delta"]
    live = map_prompts(prompts, provider=provider, engine=engine, progress=False)
    server.clear_requests()
    batched = _run(engine, provider, prompts, tmp_path / "s.sqlite")
    assert _texts(batched) == _texts(live) == prompts
    assert [r.usage for r in batched] == [r.usage for r in live]
    assert _generated(server) == 0  # every row went through the batch endpoints
    assert _created(server, API[provider]) == 1


def test_the_mock_provider_has_the_openai_batch_api(tmp_path: Path) -> None:
    out = map_prompts(
        ["one", "two"],
        provider="mock",
        model="echo",
        engine=Engine(config_file=False),
        batch_api=NOW,
        store=str(tmp_path / "s.sqlite"),
        progress=False,
    )
    assert _texts(out) == ["one", "two"]
    db = sqlite3.connect(tmp_path / "s.sqlite")
    assert db.execute("SELECT api, state FROM batch_api_jobs").fetchall() == [
        ("openai", "collected")
    ]


class Review(BaseModel):
    sentiment: str
    stars: int


@pytest.mark.parametrize("provider", ["oa", "claude"])
def test_typed_answers_of_a_dataframe_are_the_live_ones(
    server: MockServer, tmp_path: Path, provider: str
) -> None:
    import pandas as pd

    engine = _engine(server)
    frame = pd.DataFrame({"text": ["great phone", "bad battery"]}, index=["a", "b"])
    options: dict[str, Any] = {"template": "Review: {text}", "schema": Review}
    live = map_prompts(frame, provider=provider, engine=engine, progress=False, **options)
    batched = _run(engine, provider, frame, tmp_path / "s.sqlite", **options)
    assert list(batched.index) == ["a", "b"]
    assert batched.to_dict() == live.to_dict()
    assert set(batched.columns) >= {"sentiment", "stars"}


def test_a_batch_costs_half_the_live_price_and_the_store_keeps_it(
    server: MockServer, tmp_path: Path
) -> None:
    engine = _engine(server)
    prompts = ["one two three", "four five"]
    live = map_prompts(prompts, provider="oa", engine=engine, progress=False)
    full = sum(cost(r.usage, PRICE) for r in live)

    class Report:
        def __init__(self) -> None:
            self.spent: float | None = None
            self.calls: list[tuple[int, int]] = []

        def __call__(self, done: int, total: int) -> None:
            self.calls.append((done, total))

    report = Report()
    _run(engine, "oa", prompts, tmp_path / "s.sqlite", progress=report)
    assert report.spent == pytest.approx(full / 2)
    assert report.calls[-1] == (2, 2)
    db = sqlite3.connect(tmp_path / "s.sqlite")
    stored = db.execute("SELECT sum(cost) FROM batch_api_rows").fetchone()[0]
    assert stored == pytest.approx(full / 2)


def test_the_store_holds_the_batch_and_every_rows_line_readable_without_the_package(
    server: MockServer, tmp_path: Path
) -> None:
    engine = _engine(server)
    _run(engine, "oa", ["x", "y"], tmp_path / "s.sqlite")
    db = sqlite3.connect(tmp_path / "s.sqlite")
    (remote_id, state, status, counts, fields), *more = db.execute(
        "SELECT remote_id, state, status, counts, fields FROM batch_api_jobs"
    ).fetchall()
    assert not more
    assert remote_id.startswith("batch_")
    assert state == "collected"
    assert status == "completed"
    assert json.loads(counts) == {"total": 2, "completed": 2, "failed": 0}
    assert json.loads(fields)["output_file_id"].startswith("file-")
    rows = db.execute(
        "SELECT custom_id, state, line FROM batch_api_rows ORDER BY row_id"
    ).fetchall()
    assert [r[1] for r in rows] == ["done", "done"]
    for custom_id, _state, line in rows:
        doc = json.loads(line)
        assert doc["custom_id"] == custom_id
        assert doc["response"]["body"]["choices"][0]["message"]["content"] in ("x", "y")


@pytest.mark.parametrize("provider", ["oa", "claude"])
def test_a_new_engine_collects_what_an_earlier_run_sent(
    server: MockServer, tmp_path: Path, provider: str
) -> None:
    store = tmp_path / "s.sqlite"
    server.batches.queue(BatchScript(polls=3))
    first = _run(
        _engine(server),
        provider,
        ["a", "b"],
        store,
        batch_api=BatchApi(api=API[provider], wait=False, poll_first=0),
    )
    assert [r.code for r in first] == [ErrorCode.BATCH_PENDING] * 2
    assert "run the same map call again" in first[0].message
    assert _created(server, API[provider]) == 1

    again = _run(_engine(server), provider, ["a", "b"], store)  # a new engine, the same call
    assert _texts(again) == ["a", "b"]
    assert _created(server, API[provider]) == 1  # collected, not sent again

    server.clear_requests()
    third = _run(_engine(server), provider, ["a", "b"], store)
    assert _texts(third) == ["a", "b"]
    assert server.requests == []  # everything came from the store


@pytest.mark.parametrize("provider", ["oa", "claude"])
def test_a_run_splits_at_the_request_limit_and_tracks_every_batch(
    server: MockServer, tmp_path: Path, provider: str
) -> None:
    store = tmp_path / "s.sqlite"
    prompts = [f"row {i}" for i in range(5)]
    out = _run(
        _engine(server),
        provider,
        prompts,
        store,
        batch_api=BatchApi(api=API[provider], poll_first=0, max_requests=2),
    )
    assert _texts(out) == prompts
    assert _created(server, API[provider]) == 3
    db = sqlite3.connect(store)
    assert db.execute("SELECT rows, state FROM batch_api_jobs ORDER BY job_id").fetchall() == [
        (2, "collected"),
        (2, "collected"),
        (1, "collected"),
    ]


def _input_lines(server: MockServer) -> list[list[str]]:
    """The custom ids of each OpenAI batch input the server was given."""
    from notebook_llm.adapters.mock.batch_endpoints import MockBatches

    batches: MockBatches = server.batches
    return [[r["custom_id"] for r in b.requests] for b in batches._batches.values()]


def test_a_run_splits_at_the_byte_limit(server: MockServer, tmp_path: Path) -> None:
    prompts = ["a" * 300, "b" * 300, "c" * 300, "d" * 300]
    # Room for two rows of ~400 bytes each, not three.
    out = _run(
        _engine(server),
        "oa",
        prompts,
        tmp_path / "s.sqlite",
        batch_api=BatchApi(api="openai", poll_first=0, max_bytes=1000),
    )
    assert _texts(out) == prompts
    assert [len(ids) for ids in _input_lines(server)] == [2, 2]


def test_a_row_larger_than_a_whole_batch_fails_alone(server: MockServer, tmp_path: Path) -> None:
    out = _run(
        _engine(server),
        "oa",
        ["small", "x" * 2000, "tiny"],
        tmp_path / "s.sqlite",
        batch_api=BatchApi(api="openai", poll_first=0, max_bytes=1000),
    )
    assert _texts(out) == ["small", ErrorCode.INPUT_TOO_LARGE, "tiny"]
    assert "more than one openai batch may hold (1,000 bytes)" in out[1].message


def test_identical_rows_are_sent_once(server: MockServer, tmp_path: Path) -> None:
    out = _run(_engine(server), "oa", ["same", "other", "same"], tmp_path / "s.sqlite")
    assert _texts(out) == ["same", "other", "same"]
    assert [len(ids) for ids in _input_lines(server)] == [2]


@pytest.mark.parametrize("provider", ["oa", "claude"])
def test_failed_and_expired_rows_keep_the_providers_error_and_retry_failed_sends_them(
    server: MockServer, tmp_path: Path, provider: str
) -> None:
    store = tmp_path / "s.sqlite"
    api = API[provider]
    prompts = [f"p{i}" for i in range(5)]
    server.batches.queue(BatchScript(fail_lines=frozenset({1}), expire_after=3))
    out = _run(_engine(server), provider, prompts, store)
    assert _texts(out) == [
        "p0",
        ErrorCode.SERVER,
        "p2",
        ErrorCode.BATCH_EXPIRED,
        ErrorCode.BATCH_EXPIRED,
    ]
    provider_message = "The server had an error while processing your request. Sorry about that!"
    assert provider_message in out[1].message
    db = sqlite3.connect(store)
    assert db.execute(
        "SELECT state, error_code FROM batch_api_rows ORDER BY row_id"
    ).fetchall() == [
        ("done", None),
        ("failed", "SERVER"),
        ("done", None),
        ("failed", "BATCH_EXPIRED"),
        ("failed", "BATCH_EXPIRED"),
    ]

    again = _run(_engine(server), provider, prompts, store)  # failed rows are kept, not re-sent
    assert _texts(again) == _texts(out)
    assert _created(server, api) == 1

    retried = _run(_engine(server), provider, prompts, store, retry_failed=True)
    assert _texts(retried) == prompts
    assert _created(server, api) == 2
    if api == "openai":
        assert [len(ids) for ids in _input_lines(server)] == [5, 3]  # only the failed rows


def test_a_batch_that_fails_as_a_whole_fails_each_row_with_its_reason(
    server: MockServer, tmp_path: Path
) -> None:
    server.batches.queue(BatchScript(fail="the input is not valid JSONL"))
    out = _run(_engine(server), "oa", ["a", "b"], tmp_path / "s.sqlite")
    assert [r.code for r in out] == [ErrorCode.INVALID_REQUEST] * 2
    assert "the batch failed: line 1: the input is not valid JSONL" in out[0].message


def test_progress_shows_the_rows_the_provider_finished(server: MockServer, tmp_path: Path) -> None:
    server.batches.queue(BatchScript(polls=2))
    calls: list[tuple[int, int]] = []
    _run(
        _engine(server),
        "oa",
        ["a", "b", "c"],
        tmp_path / "s.sqlite",
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls[0] == (0, 3)
    assert (0, 3) in calls[1:-1]  # polled while the provider was still at work
    assert calls[-1] == (3, 3)


def test_stop_while_waiting_keeps_the_rows_pending_and_the_next_call_collects_them(
    server: MockServer, tmp_path: Path
) -> None:
    store = tmp_path / "s.sqlite"
    server.batches.queue(BatchScript(polls=10**6))  # never ends on its own
    stop = StopSignal()

    def report(done: int, total: int) -> None:
        if _created(server, "openai"):
            stop.set("enough")  # pressed while the batch runs

    out = _run(_engine(server), "oa", ["a", "b"], store, progress=report, stop_signal=stop)
    assert [r.code for r in out] == [ErrorCode.BATCH_PENDING] * 2
    server.batches.end_running()
    assert _texts(_run(_engine(server), "oa", ["a", "b"], store)) == ["a", "b"]
    assert _created(server, "openai") == 1


def test_a_recorded_batch_run_replays_with_no_server(tmp_path: Path) -> None:
    recording = tmp_path / "batch.jsonl"
    with MockServer() as server:
        engine = _engine(server)
        with engine.recording(recording):
            first = _run(engine, "oa", ["a", "b"], tmp_path / "first.sqlite")
    replaying = _engine(server)  # the server is gone: only the recording answers
    with replaying.replaying(recording, strict=True):
        second = _run(replaying, "oa", ["a", "b"], tmp_path / "second.sqlite")
    assert _texts(first) == _texts(second) == ["a", "b"]


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"provider": "mock-direct"}, ["has no batch API", "openai, anthropic, mock"]),
        ({"batch_api": "gemini"}, ["not a batch API", "'openai' or 'anthropic'"]),
        ({"tools": "schemas"}, ["does not run tools"]),
        ({"tools": "functions"}, ["does not run tools", "map without batch_api"]),
        ({"tools": "mcp"}, ["does not run tools"]),
        ({"schema_retries": 2, "schema": Review}, ["schema_retries does not apply"]),
        ({"store": None}, ["batch_api needs store="]),
        ({"rpm": 60}, ["rpm=, tpm= and rate_limits= do not apply to batch_api"]),
    ],
)
def test_what_a_batch_cannot_do_is_refused_in_one_line(
    tmp_path: Path, options: dict[str, Any], words: list[str]
) -> None:
    from notebook_llm.core.protocol import ToolSchema

    def lookup(query: str) -> str:
        """Finds things."""
        return query

    tools = {
        "schemas": [ToolSchema("lookup", "finds things", {"type": "object"})],
        # functions the tool loop would run, and an MCP server's tools (none is configured:
        # refused before any server is looked up or started)
        "functions": [lookup],
        "mcp": ["mcp:time"],
    }
    if options.get("tools"):
        options["tools"] = tools[options["tools"]]
    kwargs: dict[str, Any] = {
        "provider": "mock",
        "model": "echo",
        "engine": Engine(config_file=False),
        "batch_api": True,
        "store": str(tmp_path / "s.sqlite"),
        "progress": False,
        **options,
    }
    with pytest.raises(LlmError) as info:
        map_prompts(["a"], **kwargs)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert "\n" not in info.value.message
    for word in words:
        assert word in info.value.message
    assert not (tmp_path / "s.sqlite").exists()  # refused before the store was opened


def test_a_batch_and_a_live_map_share_the_stores_rows(server: MockServer, tmp_path: Path) -> None:
    """The same row has the same key in both paths: what one answered, the other returns
    without sending it again."""
    store = tmp_path / "s.sqlite"
    engine = _engine(server)
    batched = _run(engine, "oa", ["a", "b"], store)
    server.clear_requests()
    live = map_prompts(
        ["a", "b", "c"], provider="oa", engine=engine, store=str(store), progress=False
    )
    assert _texts(live) == ["a", "b", "c"]
    assert [r.body["messages"][-1]["content"] for r in server.requests] == ["c"]  # only c sent
    assert _texts(batched) == ["a", "b"]
    server.clear_requests()
    again = _run(engine, "oa", ["a", "b", "c"], store)
    assert _texts(again) == ["a", "b", "c"]
    assert server.requests == []  # the live answer counts for the batch too


def test_a_streamed_input_comes_back_from_the_store(server: MockServer, tmp_path: Path) -> None:
    from notebook_llm.api.batch_results import StoredResults

    out = _run(_engine(server), "oa", (f"row {i}" for i in range(4)), tmp_path / "s.sqlite")
    assert isinstance(out, StoredResults)
    assert list(out.to_pandas()["answer"]) == [f"row {i}" for i in range(4)]


def test_the_progress_view_shows_the_providers_counts(server: MockServer, tmp_path: Path) -> None:
    server.batches.queue(BatchScript(polls=2))
    lines: list[str | None] = []

    class View:
        run: Any = None

        def attach(self, run: Any) -> None:
            self.run = run

        def __call__(self, done: int, total: int) -> None:
            if self.run is not None:
                lines.append(self.run.status().remote)

    _run(_engine(server), "oa", ["a", "b"], tmp_path / "s.sqlite", progress=View())
    running = [line for line in lines if line]
    assert running
    assert all(line.startswith("openai batch batch_") for line in running)
    assert any(line.endswith(": in_progress (2 total)") for line in running)  # while it ran
    assert running[-1].endswith(": completed (2 total, 2 completed)")
    assert lines[-1] is None  # ended and collected: no batch left at the provider


def test_a_batch_the_provider_no_longer_has_fails_its_rows_and_retry_failed_sends_them(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s.sqlite"
    with MockServer() as first:
        first.batches.queue(BatchScript(polls=10**6))
        pending = _run(
            _engine(first), "oa", ["a", "b"], store, batch_api=BatchApi(api="openai", wait=False)
        )
    assert [r.code for r in pending] == [ErrorCode.BATCH_PENDING] * 2
    with MockServer() as second:  # the provider has forgotten the batch (404)
        engine = _engine(second)
        gone = _run(engine, "oa", ["a", "b"], store)
        assert [r.code for r in gone] == [ErrorCode.NOT_FOUND] * 2
        assert "is no longer at the provider" in gone[0].message
        again = _run(engine, "oa", ["a", "b"], store, retry_failed=True)
    assert _texts(again) == ["a", "b"]


def test_a_refused_batch_opens_no_store(tmp_path: Path) -> None:
    with pytest.raises(LlmError):
        map_prompts(
            ["a"], provider="groq", batch_api=True, store=str(tmp_path / "s.sqlite"), progress=False
        )
    assert not (tmp_path / "s.sqlite").exists()


def test_batch_api_on_a_dask_frame_is_refused_in_one_line(tmp_path: Path) -> None:
    import dask.dataframe as dd
    import pandas as pd

    frame = dd.from_pandas(pd.DataFrame({"text": ["a", "b"]}), npartitions=1)
    with pytest.raises(LlmError) as info:
        map_prompts(frame, template="{text}", batch_api=True, store=str(tmp_path / "s.sqlite"))
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert "batch_api does not go with a Dask DataFrame" in info.value.message


def test_a_batch_that_was_being_sent_when_the_run_died_is_sent_again(
    server: MockServer, tmp_path: Path
) -> None:
    """A run killed while it sent a batch (recorded, never accepted) leaves a ``preparing``
    batch: the next run forgets it and sends its rows."""
    store = tmp_path / "s.sqlite"
    _run(_engine(server), "oa", ["a"], store)  # makes the store
    from notebook_llm.api.batch_api.journal import BatchJournal
    from notebook_llm.api.batch_store import BatchStore

    db = sqlite3.connect(store)
    (definition,) = db.execute("SELECT definition FROM batch").fetchone()
    db.close()
    with BatchStore.open(store, json.loads(definition)) as opened:
        journal = BatchJournal(opened)
        job = journal.new_job("oa", "openai")
        journal.add_rows(job, [(f"j{job}-0", "a-key-of-a-row-never-sent")])
    server.clear_requests()
    out = _run(_engine(server), "oa", ["a", "b"], store)
    assert _texts(out) == ["a", "b"]
    db = sqlite3.connect(store)
    assert db.execute(
        "SELECT state, rows FROM batch_api_jobs WHERE job_id = ?", (job,)
    ).fetchone() == (
        "abandoned",
        0,
    )
    assert _created(server, "openai") == 1  # b, in a new batch
