"""Many prompts at once: :func:`amap` (async) and :func:`map_prompts` (sync, Jupyter-safe).

>>> results = map_prompts(["a", "b"], provider="mock", model="echo")  # doctest: +SKIP
>>> [r.text for r in results]  # doctest: +SKIP
['a', 'b']

Results come back in input order; a prompt that fails for good holds its ``LlmError`` in its
slot instead of a ``Completion``, so one failure never loses the others.

Retries: one policy, the engine's (``Engine(retries=, retry_base=, retry_cap=)``; the shared
session engine's by default). A prompt that fails with a retryable code (RATE_LIMIT, SERVER,
TIMEOUT, TRANSPORT, EMPTY_RESPONSE) is sent at most ``1 + retries`` times in all, waiting
``backoff_delay`` between tries (exponential with full jitter, never shorter than the provider's
``Retry-After``). ``map(..., retries=N)`` sets that count for this batch instead of the
engine's; it does not add a second loop on top.

Nothing here imports notebook code: by default a batch reports its progress to the function that
the package's root installs (:func:`notebook_llm.api.observers.batch_progress`: a progress bar
where a person watches the notebook, :mod:`notebook_llm.notebook.progress`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
from collections.abc import Callable, Sequence
from typing import Any, Unpack, cast

from ..core.background_loop import run_sync
from ..core.cancel import StopSignal
from ..core.completion import Completion
from ..core.errors import ErrorCode, LlmError
from ..core.protocol import ToolSchema
from ..core.response_schema import as_schema
from ..engine.engine import Engine
from ..engine.pricing import price_of
from ..engine.request import OPTION_NAMES, Request, TurnOptions, refuse_unknown_keywords, request_of
from .batch_inputs import source_of
from .batch_run import MAX_LOOKAHEAD, BatchRun, BatchSettings
from .batch_store import BatchStore, batch_definition
from .cost_cap import CostCap
from .dask_map import is_dask, map_dask
from .estimate import cap_value, estimate_request, money
from .observers import BatchProgress, batch_progress
from .rate_limits import RateGate, RateLimits, rate_limits_of
from .tool_calling.loop import ToolSpec, check_tool_timeout, resolve_tools

__all__ = [
    "MAX_LOOKAHEAD",
    "BatchResult",
    "MapOptions",
    "ProgressFn",
    "amap",
    "answer_options",
    "map_prompts",
]

log = logging.getLogger("notebook_llm.api.batch")

#: ``progress(done, total)``, called once with ``done=0`` and after each prompt finishes.
ProgressFn = Callable[[int, int], None]
#: One slot of the result list.
BatchResult = Completion | LlmError


def _engine(engine: Engine | None) -> Engine:
    """``engine``, else the session's (the one the magics and ``Chat`` use, with their keys)."""
    from ..engine.session import default_engine

    return engine if engine is not None else default_engine()


def _progress_fn(progress: ProgressFn | bool | None, total: int) -> BatchProgress | None:
    """The batch's report: the caller's ``progress(done, total)`` (an object with a ``spent``
    attribute gets the cost so far there first, when the price is known; one with an
    ``attach(run)`` method is handed the running batch, see :class:`BatchRun`), none
    (``False``), or by default the progress bar of whoever shows things (the notebook layer,
    via the root)."""
    if progress is None or progress is True:
        return batch_progress(total)
    if progress is False:
        return None
    return _CallerProgress(progress)


class _CallerProgress:
    """The caller's ``progress(done, total)`` as a batch's report."""

    def __init__(self, report: ProgressFn) -> None:
        self.report = report

    def __call__(self, done: int, total: int, spent: float | None) -> None:
        if spent is not None and hasattr(self.report, "spent"):
            self.report.spent = spent  # a callable object with a ``spent`` attribute is told it
        self.report(done, total)

    def attach(self, run: BatchRun) -> None:
        attach = getattr(self.report, "attach", None)
        if callable(attach):
            attach(run)


class MapOptions(TurnOptions, total=False):
    """The keywords of :func:`amap` and :func:`map_prompts`: the batch's own (below, and
    ``stop_signal``, which stops the whole batch) and those of every prompt's request (the
    fields of :class:`~notebook_llm.engine.request.Request`, but the prompt and messages: the
    prompts are those)."""

    engine: Engine | None
    provider: str
    model: str | None
    concurrency: int
    progress: ProgressFn | bool | None
    template: str | None
    max_cost: float | None
    store: str | os.PathLike[str] | None
    resend_changed: bool
    retry_failed: bool
    rpm: float | None
    tpm: float | None
    rate_limits: RateLimits | None
    partition: int
    allow_unpriced: bool
    tools: Sequence[ToolSpec] | Sequence[ToolSchema]
    max_steps: int
    tool_timeout: float | None
    batch_api: Any


#: Every keyword of :func:`amap` (the close ones are named for a typo).
_MAP_OPTIONS = (
    "provider",
    "model",
    "engine",
    "concurrency",
    "progress",
    "template",
    "max_cost",
    "store",
    "resend_changed",
    "retry_failed",
    "rpm",
    "tpm",
    "rate_limits",
    "partition",
    "allow_unpriced",
    "tools",
    "max_steps",
    "tool_timeout",
    "batch_api",
    *(name for name in OPTION_NAMES if name not in ("prompt", "messages")),
)

#: Request fields that do not change an answer: left out of the row key.
_NOT_IN_KEY = frozenset({"provider", "model", "prompt", "messages", "timeouts", "retries",
                         "stop_signal"})  # fmt: skip


def answer_options(request: Request) -> dict[str, Any]:
    """The request's options that decide an answer (beside provider, model and prompt), as
    JSON-ready values: what a row key covers (:func:`notebook_llm.api.batch_store.row_key`).
    A schema counts as its JSON Schema; ``extra_body`` as a digest (it may hold anything)."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(request):
        name = field.name
        value = getattr(request, name)
        if name in _NOT_IN_KEY or value is None:
            continue
        if name == "schema":
            value = as_schema(value).schema
        elif name == "extra_body":
            text = json.dumps(value, sort_keys=True, default=repr)
            value = {"sha256": hashlib.sha256(text.encode()).hexdigest()}
        elif name == "tools":
            value = [t.to_dict() for t in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    return out


def _flag(options: dict[str, Any], name: str) -> bool:
    value = options.pop(name, False)
    if not isinstance(value, bool):
        raise LlmError(f"{name} takes True or False, not {value!r}", ErrorCode.INVALID_OPTIONS)
    return value


async def amap(prompts: Any, **options: Unpack[MapOptions]) -> Any:
    """Complete every prompt, at most ``concurrency`` at a time; results in input order.

    ``prompts``: a list (or any iterable: a generator, a pandas Series: its values) of strings,
    ``Message`` s or message lists; a pandas DataFrame (with ``template=``, filled from each
    row's columns); or a Parquet or CSV file as a ``pathlib.Path``, read in chunks
    (:mod:`notebook_llm.api.batch_inputs`). ``provider`` (``"mock"`` by default) and
    ``model``: where they go; the request options (``system``, ``temperature``,
    ``max_tokens``, ``retries``...) go to every prompt's request, checked once before anything
    is sent (see :meth:`Engine.complete`). ``concurrency`` (8 by default): the most requests at
    the provider at once; with an adapter that supports it (the Lua adapters), up to
    :data:`MAX_LOOKAHEAD` more prompts are prepared meanwhile, so each goes out as soon as a
    slot frees (:mod:`notebook_llm.wire.slots`). ``progress``: a ``(done, total)`` callback,
    ``False`` for none, ``None`` for a progress bar when running in a Jupyter kernel.
    ``stop_signal``: once set, running requests are aborted and the remaining prompts are not
    sent; their slots hold ``LlmError(ABORTED)``.

    A DataFrame or Series gives a DataFrame back, with the input's index: the schema's fields
    (``schema=``) or an ``answer`` column, and an ``error`` column
    (:mod:`notebook_llm.api.dataframes`). ``template=`` also fills a list's items. ``schema=``,
    ``schema_retries=`` and ``images=`` go to every request. ``max_cost``: a cap in US dollars;
    the batch is refused (``BUDGET_EXCEEDED``, nothing sent) when its estimate
    (:func:`notebook_llm.estimate_cost`) is over it, and once the cost spent reaches it the
    remaining prompts are not sent (their slots hold ``BUDGET_EXCEEDED``).

    ``store="run.sqlite"``: a journal on disk (:mod:`notebook_llm.api.batch_store`); each
    finished row is written as it arrives, and the same call run again (after a crash, in a new
    kernel) sends only the rows without a result and returns every row. A failed row is kept
    with its error; ``retry_failed=True`` sends those again. A store made for another template,
    model or options is refused unless ``resend_changed=True``. ``max_cost`` counts what the
    journal's earlier runs spent. With a store, a streamed input (a file, an iterator) returns
    a :class:`~notebook_llm.api.batch_results.StoredResults` to read back whole or in chunks.

    A Dask DataFrame gives a Dask DataFrame back: each partition runs this ``map`` on a worker
    (:mod:`notebook_llm.api.dask_map`), with the same store semantics.

    ``rpm=`` / ``tpm=``: requests and tokens a minute, kept on this side
    (:mod:`notebook_llm.api.rate_limits`); without them the provider's own limits are learned
    from its headers, and one 429 pauses the whole batch. ``rate_limits=RateLimits(...)`` for a
    window other than a minute.

    ``batch_api=True`` sends the rows through the provider's own batch API (OpenAI's Batch API,
    Anthropic's Message Batches) at its batch price, half the normal one; it needs a ``store=``,
    where the batches are kept so that the same call, run again later (in a new kernel, a day
    later), collects them (:mod:`notebook_llm.api.batch_api`, ``docs/batch.md``).
    """
    if is_dask(prompts):
        return _on_dask(prompts, dict(options))
    engine, provider = options.pop("engine", None), options.pop("provider", "mock")
    model, concurrency = options.pop("model", None), options.pop("concurrency", 8)
    progress, stop_signal = options.pop("progress", None), options.pop("stop_signal", None)
    template, max_cost = options.pop("template", None), options.pop("max_cost", None)
    allow_unpriced = bool(options.pop("allow_unpriced", False))
    given, max_steps = options.pop("tools", ()), options.pop("max_steps", 8)
    tool_timeout = check_tool_timeout(options.pop("tool_timeout", None))
    tool_specs: Sequence[ToolSpec] = ()
    if given and all(isinstance(t, ToolSchema) for t in given):
        options["tools"] = given  # schemas only: offered to the model, not run
    else:
        tool_specs = cast(Sequence[ToolSpec], given)
    if tool_timeout is not None and not tool_specs:
        raise LlmError(
            "tool_timeout= goes with tools= (the functions or mcp: servers each row's tool loop "
            "runs): with none, no tool is called",
            ErrorCode.INVALID_OPTIONS,
        )
    store_path = options.pop("store", None)
    resend_changed = _flag(options, "resend_changed")  # type: ignore[arg-type]
    retry_failed = _flag(options, "retry_failed")  # type: ignore[arg-type]
    batch_api = options.pop("batch_api", None)
    rates = (options.pop("rpm", None), options.pop("tpm", None), options.pop("rate_limits", None))
    if batch_api is not None and batch_api is not False:
        _check_batch_api(rates, store_path, tool_specs)
    else:
        batch_api = None
    limits = rate_limits_of(*rates)
    part = options.pop("partition", 0)
    if isinstance(part, bool) or not isinstance(part, int) or part < 0:
        raise LlmError(
            f"partition takes a whole number >= 0, not {part!r}", ErrorCode.INVALID_OPTIONS
        )
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise LlmError(
            f"concurrency must be at least 1, not {concurrency}", ErrorCode.INVALID_OPTIONS
        )
    for key in ("prompt", "messages"):
        if key in options:
            raise LlmError(
                f"{key}= cannot be used with map; pass the prompts", ErrorCode.INVALID_OPTIONS
            )
    if max_cost is not None:
        max_cost = cap_value(max_cost)
    refuse_unknown_keywords(options, "map", _MAP_OPTIONS)  # a typo of a batch keyword is named too
    # Every prompt's request: checked once, here, before anything is sent.
    request = request_of(provider, model, options, "map")
    if batch_api is not None:  # refused before a store is opened or anything is read
        from .batch_api import check_batch_api

        check_batch_api(request, batch_api)
    eng = _engine(engine)
    source = source_of(prompts, template)
    store = None
    if store_path is not None:
        definition = batch_definition(
            template, provider, _model_of(eng, provider, model), answer_options(request)
        )
        store = BatchStore.open(store_path, definition, resend_changed=resend_changed)
    elif retry_failed or resend_changed:
        raise LlmError(
            "retry_failed= and resend_changed= need a store= (the journal of an earlier run)",
            ErrorCode.INVALID_OPTIONS,
        )
    try:
        cap = (
            CostCap(max_cost, eng, allow_unpriced=allow_unpriced) if max_cost is not None else None
        )
        # what the progress report shows as spent: the cap's count, else the same uncapped
        meter = cap or CostCap(math.inf, eng, allow_unpriced=True, tell_unpriced=False)
        if store is not None:
            meter.spent = store.spent()  # what earlier runs spent: a cap holds across restarts
        priced = meter.price(request) is not None
        if max_cost is not None and not source.streamed:
            items = next(source.chunks)
            source.chunks = iter([items])
            factor = 1.0 if batch_api is None else _batch_price_factor()
            _check_cap(request, eng, items, max_cost, allow_unpriced, store, factor)
        tools = await resolve_tools(tool_specs, eng, stop_signal) if tool_specs else []
        settings = BatchSettings(
            engine=eng,
            request=request,
            concurrency=concurrency,
            report=_progress_fn(progress, source.total or 0),
            stop_signal=stop_signal,
            max_cost=max_cost,
            price=price_of(eng, provider, model),
            schema=as_schema(request.schema) if request.schema is not None else None,
            gate=RateGate(limits),
            store=store,
            part=part,
            retry_failed=retry_failed,
            cap=cap,
            meter=meter,
            priced=priced,
            tools=tools,
            max_steps=max_steps,
            tool_timeout=tool_timeout,
        )
        if batch_api is not None:
            from .batch_api import run_batch_api

            return await run_batch_api(source, settings, batch_api)
        return await BatchRun(source, settings).run()
    finally:
        if store is not None:
            store.close()


def _model_of(engine: Engine, provider: str, model: str | None) -> str | None:
    """The model the requests go to: ``model``, else the provider's default (so a changed
    default is a changed batch)."""
    if model is not None:
        return model
    try:
        return engine.provider(provider).model
    except LlmError:
        return None


def _check_cap(
    request: Request,
    engine: Engine,
    items: list[Any],
    max_cost: float,
    allow_unpriced: bool,
    store: BatchStore | None,
    price_factor: float = 1.0,
) -> None:
    """Refuse, before anything is sent, a batch whose estimate is over ``max_cost``
    (:meth:`CostCap.check_batch`); with a journal, the rows still to send against what is left
    of the cap after what earlier runs spent. ``price_factor``: the share of the price the rows
    pay (a provider's batch API: half)."""
    left, rest = items, max_cost
    if store is not None:
        counts = store.counts()
        left = items[: max(len(items) - counts["done"] - counts["failed"], 0)]
        rest = max(max_cost - store.spent(), 0.0)
    cap = CostCap(rest, engine, allow_unpriced=allow_unpriced, tell_unpriced=False)
    if price_factor == 1.0:
        cap.check_batch(request, left)
        return
    price = cap.price(request)
    if price is None:
        return
    estimate = estimate_request(request, engine, left)
    usd = price_factor * (estimate.input_tokens * price[0] + estimate.output_tokens * price[1])
    usd /= 1_000_000
    if usd > rest:
        raise LlmError(
            f"not sent: the estimated cost {money(usd)} at the batch price ({estimate.prompts:,} "
            f"prompts) is over what max_cost leaves ({money(rest)}); raise max_cost=, lower "
            "max_tokens= or send fewer prompts",
            ErrorCode.BUDGET_EXCEEDED,
            provider=request.provider,
            details={"estimate": usd, "max_cost": max_cost},
        )


def _batch_price_factor() -> float:
    from .batch_api import BATCH_PRICE_FACTOR

    return BATCH_PRICE_FACTOR


def _no_batch_api_on_dask(options: Any) -> None:
    if options.get("batch_api") not in (None, False):
        raise LlmError(
            "batch_api does not go with a Dask DataFrame: the provider runs a batch itself, so "
            "workers add nothing; map the rows (e.g. frame.compute()) with batch_api",
            ErrorCode.INVALID_OPTIONS,
        )


def _check_batch_api(rates: tuple[Any, Any, Any], store: Any, tools: Sequence[Any]) -> None:
    """What ``batch_api=`` cannot be given with, refused in one line each, before a store is
    opened, a server started or anything sent. ``tools``: the functions and ``"mcp:"`` specs
    of ``tools=`` (schemas alone are the request's, refused by the batch API's own check)."""
    if tools:
        from .batch_api.codec import NO_TOOLS_IN_BATCHES

        raise LlmError(NO_TOOLS_IN_BATCHES, ErrorCode.INVALID_OPTIONS)
    if store is None:
        raise LlmError(
            "batch_api needs store='some.sqlite': a batch can take up to 24 hours, and the "
            "store is where the same map call finds it again to collect it",
            ErrorCode.INVALID_OPTIONS,
        )
    if any(value is not None for value in rates):
        raise LlmError(
            "rpm=, tpm= and rate_limits= do not apply to batch_api: the provider runs a batch "
            "at its own pace, under its own batch limits",
            ErrorCode.INVALID_OPTIONS,
        )


def _on_dask(data: Any, options: dict[str, Any]) -> Any:
    """``map`` of a Dask DataFrame: each partition runs :func:`map_prompts` on a worker."""
    _no_batch_api_on_dask(options)
    engine = _engine(options.get("engine"))
    return map_dask(data, options, engine=engine, run=map_prompts, keywords=_MAP_OPTIONS)


def map_prompts(prompts: Any, **options: Unpack[MapOptions]) -> Any:
    """:func:`amap` from synchronous code, also inside a running loop (Jupyter): a list of
    results, or a DataFrame for a DataFrame or Series (see :func:`amap`).

    An interrupt (Ctrl-C, the kernel's stop button) aborts the requests in flight and skips the
    rest; the results gathered so far are still returned (the others hold ``ABORTED`` errors).
    ``stop_signal``: the caller's own signal (e.g. set from a progress callback); an interrupt
    sets it too.
    """
    if is_dask(prompts):
        return _on_dask(prompts, dict(options))  # lazy: nothing runs here
    stop = options["stop_signal"] = options.get("stop_signal") or StopSignal()
    return run_sync(amap(prompts, **options), on_interrupt=stop.set)
