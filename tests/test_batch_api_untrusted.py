"""What a batch API's server sends is untrusted, and the cost cap holds through it.

* A results line whose usage is missing, zero, negative or absurd is counted as the cost cap
  counts every answer (estimated from the row's request and the text received), at the batch
  price, and journaled; it is never free, never lowers what is spent, and never ends the run
  (a count past SQLite's integers raised ``OverflowError`` while journaling).
* A streamed input (an iterator), which no estimate covers before sending, is sent only while
  the cap has room: every row of a batch is in flight at once.
* The batch store never holds the key (request headers), and errors that echo it are redacted.
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from batch_api_fake import FakeBatchApi

from notebook_llm.api.batch import map_prompts
from notebook_llm.api.batch_api import BatchApi
from notebook_llm.api.cost_cap import token_count
from notebook_llm.core.completion import Completion
from notebook_llm.engine.engine import Engine

PRICE = (2.0, 8.0)
API = {"oa": "openai", "claude": "anthropic"}


def _engine(fake: FakeBatchApi) -> Engine:
    engine = Engine(config_file=False, retries=0)
    engine.add_provider(
        "oa", adapter="openai", base_url=fake.url + "/v1", api_key=fake.key, model="m",
        prices={"m": PRICE},
    )  # fmt: skip
    engine.add_provider(
        "claude", adapter="anthropic", base_url=fake.url, api_key=fake.key, model="m",
        prices={"m": PRICE},
    )  # fmt: skip
    return engine


def _map(fake: FakeBatchApi, provider: str, prompts: Any, store: Path, **options: Any) -> Any:
    return map_prompts(
        prompts,
        provider=provider,
        engine=_engine(fake),
        batch_api=BatchApi(api=API[provider], poll_first=0, poll_max=0),
        store=str(store),
        progress=False,
        max_tokens=64,
        **options,
    )


def _usage(**counts: Any) -> Callable[[dict[str, Any]], None]:
    def edit(body: dict[str, Any]) -> None:
        body["usage"] = {
            "prompt_tokens": counts["i"],
            "completion_tokens": counts["o"],
            "input_tokens": counts["i"],
            "output_tokens": counts["o"],
        }

    return edit


USAGES: dict[str, Callable[[dict[str, Any]], None]] = {
    "missing": lambda body: body.pop("usage", None),
    "zero": _usage(i=0, o=0),
    "negative": _usage(i=-1_000_000, o=-5_000_000),
    "fractional": _usage(i=0.5, o=1.5),
    "past SQLite's integers": _usage(i=10**30, o=10**30),
    "1e300": _usage(i=1e300, o=1e300),
}


@pytest.mark.parametrize("provider", list(API))
@pytest.mark.parametrize("usage", list(USAGES))
def test_a_results_lines_usage_is_checked_before_it_is_counted(
    tmp_path: Path, provider: str, usage: str
) -> None:
    prompts = ["tell me about " + "words " * 40 + str(n) for n in range(3)]
    with FakeBatchApi() as honest:
        _map(honest, provider, prompts, tmp_path / "honest.sqlite")
    with FakeBatchApi() as fake:
        fake.edit_body = USAGES[usage]
        out = _map(fake, provider, prompts, tmp_path / "s.sqlite", max_cost=100.0)
    assert all(isinstance(r, Completion) for r in out)
    db = sqlite3.connect(tmp_path / "s.sqlite")
    costs = [c for (c,) in db.execute("SELECT cost FROM rows")]
    assert len(costs) == 3
    for c in costs:
        assert math.isfinite(c)
        assert c > 0  # an answer that came is never free
        # at most one full answer of max_tokens and the input, at the batch price
        assert c < (2_000 * PRICE[0] + 64 * PRICE[1]) / 1e6
    for i, o in db.execute("SELECT input_tokens, output_tokens FROM rows"):
        assert i is None or token_count(i) == i
        assert o is None or token_count(o) == o


@pytest.mark.parametrize("provider", list(API))
def test_a_streamed_input_is_sent_only_while_the_cap_has_room(
    tmp_path: Path, provider: str
) -> None:
    """An iterator is not estimated before sending (it is read as it goes); every row of a batch
    is in flight at once, so each row is reserved at its estimate (64 output tokens here: its
    worst case) before it goes. All 40 rows went before."""
    rows = 40

    def prompts() -> Iterator[str]:
        for n in range(rows):
            yield f"row {n}"

    one_row = 0.5 * (20 * PRICE[0] + 64 * PRICE[1]) / 1e6  # about: a short prompt, 64 out
    cap = 5 * one_row
    with FakeBatchApi() as fake:
        _map(fake, provider, prompts(), tmp_path / "s.sqlite", max_cost=cap)
        sent = sum(fake.batch_sizes())
    assert 1 <= sent < rows
    db = sqlite3.connect(tmp_path / "s.sqlite")
    spent = db.execute("SELECT sum(cost) FROM rows").fetchone()[0] or 0.0
    assert spent <= cap + one_row


@pytest.mark.parametrize("provider", list(API))
def test_the_cap_holds_across_runs_of_a_streamed_input(tmp_path: Path, provider: str) -> None:
    """The second run of the same store starts at what the first spent."""
    one_row = 0.5 * (20 * PRICE[0] + 64 * PRICE[1]) / 1e6
    cap = 4 * one_row
    store = tmp_path / "s.sqlite"
    sent = []
    for batch in (range(0, 20), range(0, 40)):
        with FakeBatchApi() as fake:
            _map(fake, provider, iter([f"row {n}" for n in batch]), store, max_cost=cap)
            sent.append(sum(fake.batch_sizes()))
    db = sqlite3.connect(store)
    spent = db.execute("SELECT sum(cost) FROM rows").fetchone()[0]
    assert spent <= cap + one_row
    assert sent[1] < sent[0]  # the second run starts at what the first spent


@pytest.mark.parametrize("provider", list(API))
def test_the_store_never_holds_the_key_and_echoes_are_redacted(
    tmp_path: Path, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key given by reference (the environment), echoed by the server in an answer, in a
    row's error and in a batch's error: no byte of it in the journal file, the results or the
    log."""
    key = "sk-planted-batch-key-0123456789abcdef"
    monkeypatch.setenv("PLANTED_BATCH_KEY", key)
    with FakeBatchApi(key=key) as fake:
        engine = Engine(config_file=False, retries=0)
        base = fake.url + ("/v1" if provider == "oa" else "")
        adapter = "openai" if provider == "oa" else "anthropic"
        engine.add_provider(
            provider, adapter=adapter, base_url=base, api_key_env="PLANTED_BATCH_KEY", model="m",
            prices={"m": PRICE},
        )  # fmt: skip
        fake.answer = lambda text: f"your key is {key} and ?api_key={key}"
        store = tmp_path / "s.sqlite"
        out = map_prompts(
            ["a", "b"],
            provider=provider,
            engine=engine,
            batch_api=BatchApi(api=API[provider], poll_first=0, poll_max=0),
            store=str(store),
            progress=False,
            max_tokens=16,
        )
    assert [isinstance(r, Completion) for r in out] == [True, True]
    for path in (p for p in store.parent.iterdir() if p.name.startswith("s.sqlite")):
        data = path.read_bytes()
        for spelling in (key, key.encode().hex(), key[:20]):
            assert (spelling.encode() if isinstance(spelling, str) else spelling) not in data, path
    assert os.environ["PLANTED_BATCH_KEY"] == key


def test_a_live_journal_keeps_no_key_and_takes_any_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``map(..., store=)`` without a batch API: a prompt and an answer that hold the key are
    journaled redacted; a prompt with a lone surrogate is its row's error, not a
    ``UnicodeEncodeError`` that ended the run."""
    from notebook_llm.adapters.mock.server import MockServer

    key = "sk-planted-live-key-0123456789abcdef"
    monkeypatch.setenv("PLANTED_LIVE_KEY", key)
    store = tmp_path / "live.sqlite"
    with MockServer() as server:
        engine = Engine(config_file=False, retries=0)
        engine.add_provider(
            "oa", adapter="openai", base_url=server.url + "/v1", model="echo",
            api_key_env="PLANTED_LIVE_KEY",
        )  # fmt: skip
        out = map_prompts(
            [f"repeat {key}", "odd \ud800 prompt"],
            provider="oa",
            engine=engine,
            store=str(store),
            progress=False,
        )
    assert isinstance(out[0], Completion)
    assert getattr(out[1], "code", None) == "INVALID_OPTIONS"
    for path in (p for p in tmp_path.iterdir() if p.name.startswith("live.sqlite")):
        assert key.encode() not in path.read_bytes(), path
