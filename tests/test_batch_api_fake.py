"""The batch API flow against a loopback fake built from the documented shapes
(:mod:`batch_api_fake`), which refuses any request that does not follow the documentation:
both APIs end to end, the rows' bodies equal to the live requests' bodies, splitting at the
fake's (injected, small) limits, and a run killed between submit and collect resumed by the
same call in a new process."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from batch_api_fake import FakeBatchApi

from notebook_llm.adapters.mock.server import MockServer
from notebook_llm.api.batch import map_prompts
from notebook_llm.api.batch_api import BatchApi
from notebook_llm.core.completion import Completion
from notebook_llm.engine.engine import Engine

API = {"fake-openai": "openai", "fake-claude": "anthropic"}
CREATE = {"openai": "/v1/batches", "anthropic": "/v1/messages/batches"}


def _engine(url: str, key: str) -> Engine:
    engine = Engine(config_file=False, retries=0)
    engine.add_provider(
        "fake-openai",
        adapter="openai",
        base_url=url + "/v1",
        api_key=key,
        model="gpt-4o-mini",
        max_tokens_field="max_completion_tokens",
    )
    engine.add_provider(
        "fake-claude", adapter="anthropic", base_url=url, api_key=key, model="claude-haiku-4-5"
    )
    return engine


def _map(engine: Engine, provider: str, prompts: list[str], store: Path, **settings: Any) -> Any:
    return map_prompts(
        prompts,
        provider=provider,
        engine=engine,
        batch_api=BatchApi(api=API[provider], poll_first=0, poll_max=0, **settings),
        store=str(store),
        progress=False,
        system="Answer briefly.",
        max_tokens=64,
    )


@pytest.mark.parametrize("provider", ["fake-openai", "fake-claude"])
def test_both_batch_apis_work_against_the_documented_shapes(tmp_path: Path, provider: str) -> None:
    with FakeBatchApi() as fake:
        out = _map(_engine(fake.url, fake.key), provider, ["a", "b", "c"], tmp_path / "s.sqlite")
    assert fake.violations == []
    assert [r.text for r in out] == ["answer to a", "answer to b", "answer to c"]
    assert all(isinstance(r, Completion) and r.usage is not None for r in out)
    assert fake.created(CREATE[API[provider]]) == 1


@pytest.mark.parametrize(
    ("provider", "adapter"), [("fake-openai", "openai"), ("fake-claude", "anthropic")]
)
def test_a_batch_row_is_the_body_the_adapter_sends_live(
    tmp_path: Path, provider: str, adapter: str
) -> None:
    """The row's body is what the same adapter sends for the same prompt, only not streamed."""
    with MockServer() as server:
        live_engine = Engine(config_file=False)
        base = server.url + ("/v1" if adapter == "openai" else "")
        live_engine.add_provider(provider, adapter=adapter, base_url=base, needs_key=False)
        options = {"system": "Answer briefly.", "max_tokens": 64, "temperature": 0.2}
        model = "echo"  # a mock model, so the live request is answered
        live_engine.complete_sync(provider, model, prompt="what is 2+2?", **options)  # type: ignore[arg-type]
        live = server.requests[-1].body
    with FakeBatchApi() as fake:
        engine = _engine(fake.url, fake.key)
        if adapter == "openai":  # the same provider settings as the live one
            engine.add_provider(
                provider, adapter="openai", base_url=fake.url + "/v1", api_key=fake.key
            )
        map_prompts(
            ["what is 2+2?"],
            provider=provider,
            model=model,
            engine=engine,
            batch_api=BatchApi(api=API[provider], poll_first=0),
            store=str(tmp_path / "s.sqlite"),
            progress=False,
            **options,  # type: ignore[arg-type]
        )
        ((_, batch),) = list(fake._batches.items())
    sent = batch["requests"][0]
    row = sent["body"] if adapter == "openai" else sent["params"]
    expected = {k: v for k, v in live.items() if k not in ("stream", "stream_options")}
    if adapter == "openai":  # the kernel request's stream flag, passed through, now false
        expected["stream"] = False
    assert live["stream"] is True
    assert row == expected
    assert fake.violations == []


@pytest.mark.parametrize("provider", ["fake-openai", "fake-claude"])
def test_a_run_splits_to_stay_within_the_providers_request_limit(
    tmp_path: Path, provider: str
) -> None:
    prompts = [f"row {i}" for i in range(7)]
    with FakeBatchApi(max_requests=3) as fake:
        out = _map(
            _engine(fake.url, fake.key), provider, prompts, tmp_path / "s.sqlite", max_requests=3
        )
    assert fake.violations == []  # the fake refuses a batch over its limit
    assert fake.batch_sizes() == [3, 3, 1]
    assert [r.text for r in out] == [f"answer to row {i}" for i in range(7)]
    db = sqlite3.connect(tmp_path / "s.sqlite")
    assert [r[0] for r in db.execute("SELECT rows FROM batch_api_jobs ORDER BY job_id")] == [
        3,
        3,
        1,
    ]


@pytest.mark.parametrize("provider", ["fake-openai", "fake-claude"])
def test_a_run_splits_to_stay_within_the_providers_byte_limit(
    tmp_path: Path, provider: str
) -> None:
    prompts = [f"{i} " + "word " * 60 for i in range(6)]
    limit = 1500
    with FakeBatchApi(max_bytes=limit) as fake:
        out = _map(
            _engine(fake.url, fake.key), provider, prompts, tmp_path / "s.sqlite", max_bytes=limit
        )
    assert fake.violations == []  # the fake refuses an input over its limit
    assert len(fake.batch_sizes()) > 1
    assert sum(fake.batch_sizes()) == 6
    assert [r.text for r in out] == [f"answer to {p}" for p in prompts]


def test_the_fake_refuses_what_the_documentation_does_not_allow(tmp_path: Path) -> None:
    """The fake is strict: a batch over its limit is refused (so a test that splits proves
    something), and the refusal reaches the caller as the provider's error."""
    from notebook_llm.core.errors import ErrorCode, LlmError

    with FakeBatchApi(max_requests=1) as fake, pytest.raises(LlmError) as info:
        _map(_engine(fake.url, fake.key), "fake-openai", ["a", "b"], tmp_path / "s.sqlite")
    assert info.value.code == ErrorCode.INVALID_REQUEST
    assert fake.violations == ["POST /v1/files: the file has 2 requests"]
    db = sqlite3.connect(tmp_path / "s.sqlite")
    # never accepted: nothing waits for it, the same call sends the rows again
    assert db.execute("SELECT count(*) FROM batch_api_rows").fetchone() == (0,)


CHILD = textwrap.dedent(
    """
    import json, os, sys
    sys.path.insert(0, os.environ["TESTS_DIR"])
    from test_batch_api_fake import _engine, _map
    args = json.loads(os.environ["BATCH_ARGS"])
    _map(_engine(args["url"], args["key"]), args["provider"], args["prompts"], args["store"])
    print("finished", flush=True)
    """
)


def _wait_for(check: Any, what: str, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _submitted(store: Path) -> bool:
    if not store.exists():
        return False
    try:
        db = sqlite3.connect(store)
        row = db.execute(
            "SELECT count(*) FROM batch_api_jobs WHERE state = 'submitted' AND remote_id IS NOT NULL"
        ).fetchone()
        db.close()
    except sqlite3.Error:
        return False
    return bool(row and row[0])


@pytest.mark.parametrize("provider", ["fake-openai", "fake-claude"])
def test_a_run_killed_between_submit_and_collect_is_collected_by_the_same_call_in_a_new_process(
    tmp_path: Path, provider: str
) -> None:
    store = tmp_path / "s.sqlite"
    prompts = ["first", "second", "third"]
    with FakeBatchApi() as fake:
        fake.hold()  # the batch runs until the child is gone
        args = {"url": fake.url, "key": fake.key, "provider": provider, "prompts": prompts}
        env = {
            **os.environ,
            "TESTS_DIR": str(Path(__file__).parent),
            "BATCH_ARGS": json.dumps({**args, "store": str(store)}),
        }
        with subprocess.Popen(
            [sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        ) as child:
            try:
                _wait_for(
                    lambda: _submitted(store) or child.poll() is not None, "the batch to be sent"
                )
                assert child.poll() is None, child.communicate()
                reads = len(fake.calls)
                _wait_for(lambda: len(fake.calls) > reads, "the child to poll")  # it waits
            finally:
                child.kill()  # SIGKILL: no clean-up of any kind in the child
                child.communicate(timeout=60)
            assert child.returncode == -signal.SIGKILL
        fake.release()
        out = _map(_engine(fake.url, fake.key), provider, prompts, store)
    assert [r.text for r in out] == [f"answer to {p}" for p in prompts]
    assert fake.created(CREATE[API[provider]]) == 1  # collected, never sent again
    assert fake.violations == []
