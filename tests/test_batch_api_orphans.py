"""The Batch API's orphan window: a batch the provider made whose id never reached the store.

Creating a batch is not idempotent. A run may end after the provider made the batch and
before the store recorded its id (a kill, a crash, Stop during a retry), and an attempt that
failed (a timeout, a 5xx) may have made it all the same. Each batch is therefore created with
a tag (OpenAI's ``metadata``), recorded in the store with its rows before it is sent; a retry,
and the next run, look for the tag in the provider's list of batches before sending again.
Against the mock server's OpenAI endpoints: no batch is made twice, no row is paid twice."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from test_batch_api import API, PRICE, _created, _run, _texts

from notebook_llm.adapters.mock.batch_endpoints import MockBatches
from notebook_llm.adapters.mock.server import MockServer
from notebook_llm.api.batch_api.journal import BatchJournal
from notebook_llm.api.batch_api.openai import TAG_KEY
from notebook_llm.engine.engine import Engine


class Killed(Exception):
    """The process ending at this point (what a SIGKILL leaves on disk: every commit so far)."""


@pytest.fixture
def server() -> Any:
    with MockServer() as srv:
        yield srv


def _engine(server: MockServer, retries: int = 0) -> Engine:
    engine = Engine(config_file=False, retries=retries, retry_base=0.0)
    for name, adapter, base in (("oa", "openai", "/v1"), ("claude", "anthropic", "")):
        engine.add_provider(
            name, adapter=adapter, base_url=server.url + base, model="echo", prices={"echo": PRICE}
        )
    return engine


def _jobs(store: Path) -> list[tuple[str, str | None]]:
    db = sqlite3.connect(store)
    try:
        return [
            (str(r[0]), r[1])
            for r in db.execute("SELECT state, remote_id FROM batch_api_jobs ORDER BY job_id")
        ]
    finally:
        db.close()


def test_a_batch_made_before_its_id_was_recorded_is_found_again_not_sent_twice(
    server: MockServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "s.sqlite"
    prompts = ["alpha", "beta", "gamma"]

    def killed(*args: Any) -> None:
        raise Killed  # the provider answered with the batch's id; the store never got it

    monkeypatch.setattr(BatchJournal, "submitted", killed)
    with pytest.raises(Killed):
        _run(_engine(server), "oa", prompts, store)
    monkeypatch.undo()
    assert _created(server, "openai") == 1
    assert _jobs(store) == [("preparing", None)]  # the batch and its rows, recorded before

    out = _run(_engine(server), "oa", prompts, store)  # the same call, "after the restart"
    assert _texts(out) == prompts
    assert _created(server, "openai") == 1  # found by its tag: not made again
    ((state, remote_id),) = _jobs(store)
    assert state == "collected"
    assert str(remote_id).startswith("batch_")
    listed = [r for r in server.requests if r.method == "GET" and r.path == "/v1/batches"]
    assert listed  # it was looked for in the provider's list


def test_a_create_that_failed_after_the_provider_made_the_batch_is_not_made_twice(
    server: MockServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first ``POST /v1/batches`` makes the batch but answers 500 (its answer lost): the
    retry finds the batch by its tag instead of making a second one."""
    make = MockBatches._create_openai
    failed: list[int] = []

    def made_then_500(self: MockBatches, raw: bytes) -> Any:
        reply = make(self, raw)
        if not failed:
            failed.append(1)
            body = {"error": {"message": "The server had an error", "type": "server_error"}}
            return 500, json.dumps(body).encode(), "application/json"
        return reply

    monkeypatch.setattr(MockBatches, "_create_openai", made_then_500)
    out = _run(_engine(server, retries=2), "oa", ["one", "two"], tmp_path / "s.sqlite")
    assert failed == [1]
    assert _texts(out) == ["one", "two"]
    assert _created(server, "openai") == 1
    assert server.batches.created == 1


def test_a_batch_is_created_with_its_tag_and_the_tag_is_the_same_for_the_same_rows(
    server: MockServer, tmp_path: Path
) -> None:
    """The tag is made from the rows it carries, not drawn: the same rows in a new store make
    the same request (so a recorded run replays)."""
    for name in ("first", "second"):
        _run(_engine(server), "oa", ["a", "b"], tmp_path / f"{name}.sqlite")
    tags = [
        r.body["metadata"][TAG_KEY]
        for r in server.requests
        if r.method == "POST" and r.path == "/v1/batches"
    ]
    assert len(tags) == 2
    assert tags[0] == tags[1]
    assert tags[0].startswith("nbllm-")
    _run(_engine(server), "oa", ["a", "c"], tmp_path / "third.sqlite")
    last = [r for r in server.requests if r.method == "POST" and r.path == "/v1/batches"][-1]
    assert last.body["metadata"][TAG_KEY] != tags[0]  # other rows, another tag


def test_without_a_label_to_find_it_by_the_rows_are_sent_again(
    server: MockServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anthropic's Message Batches keep no label of ours: a batch whose id was never
    recorded cannot be found, so its rows go in a new batch (what docs/batch.md says)."""
    store = tmp_path / "s.sqlite"
    monkeypatch.setattr(BatchJournal, "submitted", lambda *a: (_ for _ in ()).throw(Killed()))
    with pytest.raises(Killed):
        _run(_engine(server), "claude", ["x", "y"], store)
    monkeypatch.undo()
    out = _run(_engine(server), "claude", ["x", "y"], store)
    assert _texts(out) == ["x", "y"]
    assert _created(server, API["claude"]) == 2
    assert [s for s, _ in _jobs(store)] == ["abandoned", "collected"]


def test_against_the_fake_built_from_the_documented_shapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same as the first test, against the loopback fake of the documented shapes (its
    list of batches is ``batch/list.md``'s): found again, made once, nothing the documentation
    does not allow."""
    from batch_api_fake import FakeBatchApi
    from test_batch_api_fake import CREATE, _map
    from test_batch_api_fake import _engine as fake_engine

    store = tmp_path / "s.sqlite"
    prompts = ["first", "second"]
    with FakeBatchApi() as fake:
        monkeypatch.setattr(BatchJournal, "submitted", lambda *a: (_ for _ in ()).throw(Killed()))
        with pytest.raises(Killed):
            _map(fake_engine(fake.url, fake.key), "fake-openai", prompts, store)
        monkeypatch.undo()
        out = _map(fake_engine(fake.url, fake.key), "fake-openai", prompts, store)
    assert [r.text for r in out] == [f"answer to {p}" for p in prompts]
    assert fake.created(CREATE["openai"]) == 1
    assert fake.violations == []
