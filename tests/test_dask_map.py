"""map over a Dask DataFrame, on a LocalCluster of two worker processes on loopback.

The provider is the mock server in the test process, asking for a key; the workers read it
from their environment (the variable's name travels, never its value). The result must equal
the pandas run row for row, the task graph must not hold the key, and a journal shared by the
partitions must make a second run send nothing.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import cloudpickle
import dask.dataframe as dd
import pandas as pd
import pytest
from distributed import Client, LocalCluster
from pydantic import BaseModel

from notebook_llm import Engine, LlmError
from notebook_llm.adapters.mock import MockServer
from notebook_llm.api.batch import map_prompts

KEY = "sk-dask-test-0123456789abcdef"
VARIABLE = "NOTEBOOK_LLM_DASK_TEST_KEY"


class Ticket(BaseModel):
    category: str
    urgent: bool


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(VARIABLE, KEY)  # the workers inherit it when they start
        with (
            LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
            ) as cluster,
            Client(cluster) as dask_client,
        ):
            yield dask_client


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer(require_key=KEY) as srv:
        yield srv


def engine_for(srv: MockServer, monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv(VARIABLE, KEY)
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider(
        "loop", adapter="openai", base_url=srv.url + "/v1", model="echo", api_key_env=VARIABLE
    )
    return engine


FRAME = pd.DataFrame(
    {"text": [f"ticket {i}: the parcel is late" for i in range(24)], "n": range(24)},
    index=pd.RangeIndex(100, 124, name="id"),
)


def test_dask_matches_pandas_row_for_row(client: Client, server: MockServer, monkeypatch) -> None:
    engine = engine_for(server, monkeypatch)
    options = {"engine": engine, "provider": "loop", "template": "{n}: {text}"}
    expected = map_prompts(FRAME, progress=False, **options)
    typed_expected = map_prompts(FRAME, progress=False, schema=Ticket, **options)
    ddf = dd.from_pandas(FRAME, npartitions=4)
    got = map_prompts(ddf, **options)
    typed = map_prompts(ddf, schema=Ticket, **options)
    assert isinstance(got, dd.DataFrame)
    pd.testing.assert_frame_equal(got.compute(), expected)
    pd.testing.assert_frame_equal(typed.compute(), typed_expected)
    assert expected["error"].isna().all()  # every row answered: the key reached the server
    assert expected.loc[103, "answer"] == "3: ticket 3: the parcel is late"


def test_the_task_graph_holds_no_key(client: Client, server: MockServer, monkeypatch) -> None:
    engine = engine_for(server, monkeypatch)
    out = map_prompts(
        dd.from_pandas(FRAME, npartitions=2), engine=engine, provider="loop", template="{text}"
    )
    graph = dict(out.__dask_graph__())
    for blob in (cloudpickle.dumps(graph), pickle.dumps(repr(graph)), repr(graph).encode()):
        assert KEY.encode() not in blob
    assert VARIABLE.encode() in cloudpickle.dumps(graph)  # the key travels by its name
    assert out.compute()["error"].isna().all()


def test_a_key_given_in_the_session_is_refused(server: MockServer) -> None:
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider("k", adapter="openai", base_url=server.url + "/v1", api_key=KEY)
    with pytest.raises(LlmError, match="set K_API_KEY in the workers' environment") as info:
        map_prompts(dd.from_pandas(FRAME, npartitions=2), engine=engine, provider="k",
                    template="{text}")  # fmt: skip
    assert info.value.code == "MISSING_CREDENTIAL"
    assert KEY not in str(info.value)


def test_a_shared_journal_makes_the_second_run_send_nothing(
    client: Client, server: MockServer, monkeypatch, tmp_path: Path
) -> None:
    engine = engine_for(server, monkeypatch)
    ddf = dd.from_pandas(FRAME, npartitions=4)
    options = {"engine": engine, "provider": "loop", "template": "{text}"}
    store = str(tmp_path / "tickets.sqlite")
    first = map_prompts(ddf, store=store, **options).compute()
    assert len(server.requests) == len(FRAME)
    server.clear_requests()
    second = map_prompts(ddf, store=store, **options).compute()
    assert server.requests == []
    pd.testing.assert_frame_equal(first, second)
    pd.testing.assert_frame_equal(first, map_prompts(FRAME, progress=False, **options))


def test_one_journal_per_partition(
    client: Client, server: MockServer, monkeypatch, tmp_path: Path
) -> None:
    engine = engine_for(server, monkeypatch)
    ddf = dd.from_pandas(FRAME, npartitions=3)
    out = map_prompts(
        ddf, engine=engine, provider="loop", template="{text}",
        store=str(tmp_path / "part-{partition}.sqlite"),
    ).compute()  # fmt: skip
    assert out["error"].isna().all()
    assert sorted(p.name for p in tmp_path.glob("part-*.sqlite")) == [
        "part-00000.sqlite",
        "part-00001.sqlite",
        "part-00002.sqlite",
    ]
