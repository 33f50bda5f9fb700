"""``map`` over a Dask DataFrame: each partition runs this package's own ``map`` on a worker.

``map(ddf, template=..., schema=...)`` returns a Dask DataFrame at once (nothing runs until it
is computed). Each partition becomes one task: on its worker, :func:`run_partition` builds an
engine from a :class:`WorkerEngine` and runs the partition through the same async ``map`` a
notebook runs (request slots, retries, the rate gate, typed answers), and returns the
partition's frame with its index. Work past one machine is Dask's job; this package adds no
scheduler of its own.

**Keys never travel in the graph.** The task graph (what the dashboard shows, what is pickled
to the scheduler and the workers) holds a :class:`WorkerEngine`: the provider's settings with
its key variable's *name* (``api_key_env``), the adapter (a Lua adapter's source, or a Python
adapter object), the engine's retry policy; never a key. Each worker reads the key from its own
environment (or its ``.env``), as the notebook does. A provider whose key was given in the
session (``api_key=``, ``%llm key``) or whose headers hold a key is refused in one line: give
the workers the variable instead.

**The journal.** With ``store=``, every partition journals into the same SQLite file (WAL; its
rows keyed by partition number and position, see :mod:`.batch_store`), which several processes
on one machine may write at once; a re-run (after a crash of the client, a worker or the
cluster) sends only the rows without a result. On a cluster of several machines, SQLite over a
network file system is not safe: give each machine its own ``store`` path on a local disk
(``store="/local/run-{partition}.sqlite"``: ``{partition}`` is replaced by the partition
number, one journal per partition), and keep the partitions as they are between runs.

**Rate limits.** ``rpm=`` / ``tpm=`` hold per partition while it runs, so with N partitions
running at once set them to the provider's limit divided by N; without them each worker learns
the provider's limits from its headers and backs off on a 429. The provider's limits, not the
cluster, set the pace: more workers than the limits allow only wait longer.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import ErrorCode, LlmError
from ..core.redaction import redact
from ..engine.engine import Engine

__all__ = ["WorkerEngine", "is_dask", "map_dask", "run_partition"]


def is_dask(data: Any) -> bool:
    """A Dask DataFrame or Series (checked without importing dask)."""
    return type(data).__module__.startswith("dask") and hasattr(data, "map_partitions")


@dataclass(frozen=True)
class WorkerEngine:
    """What a worker needs to build the engine of one provider: picklable, and holding no key
    (see the module docstring)."""

    provider: str
    #: The provider's settings (``ProviderConfig`` fields but its key); ``None`` for a route a
    #: plugin gives every engine (``mock``, ``mock-direct``).
    settings: dict[str, Any] | None
    #: A Lua adapter's name and source, loaded on the worker as the session loaded it.
    lua_name: str | None = None
    lua_source: str | None = None
    #: A Python adapter object (pickled as it is).
    python_adapter: Any = None
    retries: int = 2
    retry_base: float = 0.5
    retry_cap: float = 30.0

    def build(self) -> Engine:
        """The engine on the worker (its keys from the worker's own environment)."""
        engine = Engine(retries=self.retries, retry_base=self.retry_base, retry_cap=self.retry_cap)
        if self.settings is None:
            return engine
        adapter: Any = self.python_adapter
        if adapter is None and self.lua_source is not None:
            adapter = engine.load_adapter(self.lua_source, name=self.lua_name)
        if adapter is None:
            adapter = self.settings["adapter"]
        settings = {k: v for k, v in self.settings.items() if k not in ("name", "adapter")}
        engine.add_provider(self.provider, adapter=adapter, **settings)
        return engine


_SETTINGS = (
    "base_url",
    "model",
    "api_key_env",
    "headers",
    "extra_body",
    "needs_key",
    "models",
    "prices",
    "max_tokens_field",
)


def worker_engine(engine: Engine, provider: str) -> WorkerEngine:
    """The :class:`WorkerEngine` of ``provider`` on ``engine``; refuses a key given in the
    session, which a worker could only get through the graph."""
    adapter = engine.adapter_of(provider)
    base = WorkerEngine(provider, None, None, None, None, engine.retries, engine.retry_base,
                        engine.retry_cap)  # fmt: skip
    config = engine._providers.get(provider)
    handle = engine.registry.handle(provider)
    if config is None or (handle is not None and handle.fixed):
        return base  # a plugin's route (mock, mock-direct, a package's): every engine has it
    if provider in engine.credentials._session_keys or config.api_key is not None:
        variable = config.api_key_env or f"{provider.upper().replace('-', '_')}_API_KEY"
        raise LlmError(
            f"provider {provider!r} has its key set in this session, which Dask workers cannot "
            f"read without it travelling in the task graph; set {variable} in the workers' "
            f"environment (add_provider(..., api_key_env={variable!r}))",
            ErrorCode.MISSING_CREDENTIAL,
            provider=provider,
        )
    if any(redact(str(v)) != str(v) for v in config.headers.values()):
        raise LlmError(
            f"provider {provider!r} has a key in its headers, which would travel in the Dask "
            "task graph; use api_key_env= so each worker reads it from its environment",
            ErrorCode.MISSING_CREDENTIAL,
            provider=provider,
        )
    settings = {"adapter": config.adapter} | {name: getattr(config, name) for name in _SETTINGS}
    source = getattr(adapter, "source", None)
    if isinstance(source, str):  # a Lua adapter: its source travels, loaded on the worker
        return dataclasses.replace(base, settings=settings, lua_name=adapter.name,
                                   lua_source=source)  # fmt: skip
    return dataclasses.replace(base, settings=settings, python_adapter=adapter)


def run_partition(
    frame: Any,
    worker: WorkerEngine,
    options: dict[str, Any],
    run: Callable[..., Any],
    partition_info: Any = None,
) -> Any:
    """One partition on its worker: ``run`` (this package's ``map``) over it, its frame back
    with the partition's index."""
    number = int((partition_info or {}).get("number", 0))
    options = dict(options)
    store = options.get("store")
    if isinstance(store, str) and "{partition}" in store:
        options["store"] = store.replace("{partition}", f"{number:05d}")
        number = 0  # its own journal: the partition is the whole file
    return run(
        frame,
        engine=worker.build(),
        provider=worker.provider,
        partition=number,
        progress=False,
        **options,
    )


def map_dask(
    data: Any,
    options: dict[str, Any],
    *,
    engine: Engine,
    run: Callable[..., Any],
    keywords: Sequence[str],
) -> Any:
    """``map`` over a Dask DataFrame or Series (see the module docstring): a Dask DataFrame of
    the same partitions and index, computed when the caller computes it. ``run`` is ``map``
    itself (what each partition runs, named in the graph by reference), ``keywords`` the ones
    it takes."""
    pd: Any = importlib.import_module("pandas")
    from .dataframes import to_frame

    for name in ("progress", "partition", "stop_signal"):
        if options.get(name) not in (None, False):
            raise LlmError(
                f"{name}= does not apply to a Dask DataFrame (its partitions run on workers); "
                "watch them on the Dask dashboard",
                ErrorCode.INVALID_OPTIONS,
            )
        options.pop(name, None)
    from ..engine.request import OPTION_NAMES, refuse_unknown_keywords, request_of
    from .rate_limits import rate_limits_of

    refuse_unknown_keywords(options, "map", keywords)
    options.pop("engine", None)
    provider = options.pop("provider", "mock")
    # Checked here, in the caller's cell, not on a worker an hour later.
    request_of(
        provider,
        options.get("model"),
        {k: v for k, v in options.items() if k in OPTION_NAMES},
        "map",
    )
    rate_limits_of(options.get("rpm"), options.get("tpm"), options.get("rate_limits"))
    worker = worker_engine(engine, provider)
    store = options.get("store")
    if store is not None:
        options["store"] = str(store)
    empty = data._meta if hasattr(data, "_meta") else data.head(0)
    if options.get("template") is None and hasattr(empty, "columns") and len(empty.columns) != 1:
        raise LlmError(
            'map(DataFrame) needs template=, e.g. template="Review: {text}" (columns: '
            f"{', '.join(map(str, empty.columns))})",
            ErrorCode.INVALID_OPTIONS,
        )
    meta = to_frame([], pd.Index([], dtype=empty.index.dtype), options.get("schema"))
    return data.map_partitions(run_partition, worker, options, run, meta=meta)
