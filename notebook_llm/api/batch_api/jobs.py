"""One ``map(..., batch_api=True)`` run: send the rows that need an answer as remote batches,
poll them, collect their results, and give every row its outcome; all of it kept in the store,
so the same call run again (a day later, in a new kernel) carries on where the last one ended.

The steps, each committed to the store as it ends (:mod:`.journal`):

1. every row's key (:func:`row_key`); rows with an answer in the store are not sent again, nor
   are rows in a batch that is still running (they are waited for), nor failed rows unless
   ``retry_failed=True``; identical rows are sent once;
2. the rest are built by the provider's adapter (:mod:`.codec`) and written, as they are built,
   into one remote batch after another, each within the API's limits (requests and bytes) and
   recorded before it is sent; a batch that could not be sent is forgotten (its rows go again);
3. every open batch is polled (first at once, then after 1, 2, 4 ... up to 60 s), the
   provider's counts go to the store and the progress; an ended batch is collected: each
   results line is mapped by the adapter into a ``Completion`` (at half the price: the batch
   price) and recorded; a row with no line fails with the batch's own error (failed, expired,
   cancelled);
4. with ``wait=False``, or once Stop is pressed, the run returns what it has: rows still in a
   running batch hold ``BATCH_PENDING`` (run the same call again to collect them).
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from ...core.cancel import StopSignal, sleep_unless_stopped
from ...core.completion import Completion
from ...core.errors import ErrorCode, LlmError
from ...engine.engine import Engine
from ...engine.pricing import Price, cost
from ...engine.request import Request
from ...wire.http_errors import backoff_delay
from .anthropic import AnthropicBatches
from .codec import RowCodec, batch_api_of, prompt_fields
from .http_calls import BatchHttp
from .journal import BatchJournal, JobRecord
from .openai import OpenAIBatches
from .remote import BatchApiSpeaker, BatchLimits, RemoteStatus, RowOutcome

__all__ = ["BATCH_PRICE_FACTOR", "BatchApi", "run_batch_api"]

log = logging.getLogger("notebook_llm.api.batch_api")

#: Both providers charge a batch's tokens at half their price.
BATCH_PRICE_FACTOR = 0.5

#: The id a request carries is ``<batch token>-<n>``; the most characters it reserves.
CUSTOM_ID_CHARS = 24

#: Outcomes recorded per commit while a batch is collected.
COMMIT_EVERY = 500

Result = Completion | LlmError
ProgressReport = Callable[[int, int, "float | None"], None]
_T = TypeVar("_T")


@dataclass(frozen=True)
class BatchApi:
    """How ``map`` uses a provider's batch API: ``map(..., batch_api=BatchApi(...))``
    (``batch_api=True`` is ``BatchApi()``).

    ``api``: ``"openai"`` or ``"anthropic"`` for a provider not known to have one (a gateway,
    a compatible server); ``None``: the provider's own. ``wait``: poll until every batch has
    ended (``False``: send, look once, and return; the rows still running hold
    ``BATCH_PENDING``). ``poll_first`` / ``poll_max``: seconds between polls, doubling from the
    first to the most. ``max_requests`` / ``max_bytes``: smaller batches than the API allows.
    """

    api: str | None = None
    wait: bool = True
    poll_first: float = 1.0
    poll_max: float = 60.0
    max_requests: int | None = None
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in ("poll_first", "poll_max"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise LlmError(
                    f"BatchApi({name}=...) takes seconds (a number, 0 or more), not {value!r}",
                    ErrorCode.INVALID_OPTIONS,
                )
        for name in ("max_requests", "max_bytes"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise LlmError(
                    f"BatchApi({name}=...) takes a positive whole number, not {value!r}",
                    ErrorCode.INVALID_OPTIONS,
                )

    @classmethod
    def of(cls, value: Any) -> BatchApi:
        """``batch_api=`` as settings: ``True``, an API's name, or a ``BatchApi``."""
        if isinstance(value, BatchApi):
            return value
        if value is True:
            return cls()
        if isinstance(value, str):
            return cls(api=value)
        raise LlmError(
            f"batch_api takes True, 'openai', 'anthropic' or a BatchApi(...), not {value!r}",
            ErrorCode.INVALID_OPTIONS,
        )


def row_key(request: Request, prompt: Any) -> str:
    """What decides a row's answer, as a hex digest: the provider, the model, the filled prompt
    and every request option that reaches the provider (not the stop signal, retries or time
    limits)."""
    schema = request.schema.response_format() if request.schema is not None else None
    fields = prompt_fields(prompt)
    doc = {
        "provider": request.provider,
        "model": request.model,
        "prompt": fields["prompt"],
        "messages": [m.to_dict() for m in fields["messages"] or ()],
        "system": request.system,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "stop": list(request.stop_sequences or ()),
        "reasoning_effort": request.reasoning_effort,
        "extra_body": request.extra_body,
        "schema": schema,
        "images": repr(request.images) if request.images is not None else None,
    }
    text = json.dumps(doc, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def speaker_for(
    api: str, provider: str, base_url: str, endpoint_url: str, settings: BatchApi
) -> BatchApiSpeaker:
    """The batch API ``api`` for a provider's endpoint, within ``settings``' limits."""
    cls: type[OpenAIBatches] | type[AnthropicBatches] = (
        OpenAIBatches if api == "openai" else AnthropicBatches
    )
    documented = cls(provider, base_url, endpoint_url).limits
    limits = BatchLimits(
        min(settings.max_requests or documented.max_requests, documented.max_requests),
        min(settings.max_bytes or documented.max_bytes, documented.max_bytes),
    )
    return cls(provider, base_url, endpoint_url, limits)


class _Run:
    """The state of one run (see the module docstring)."""

    def __init__(
        self,
        engine: Engine,
        request: Request,
        settings: BatchApi,
        journal: BatchJournal,
        codec: RowCodec,
        speaker: BatchApiSpeaker,
        http: BatchHttp,
        price: Price | None,
        stop: StopSignal | None,
    ) -> None:
        self.engine = engine
        self.request = request
        self.provider = request.provider
        self.settings = settings
        self.journal = journal
        self.codec = codec
        self.speaker = speaker
        self.http = http
        self.price = price
        self.stop = stop
        #: The outcome of each key answered (now or before).
        self.results: dict[str, Result] = {}
        #: Batches still running: job id -> their last status.
        self.open: dict[int, RemoteStatus | None] = {}

    def stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    # ------------------------------------------------------------------ what is known

    def known(self, keys: Sequence[str], retry_failed: bool) -> list[str]:
        """Fill in what the store knows of ``keys``; the keys to send."""
        for job_id in self.journal.preparing_jobs(self.provider):
            self.journal.abandon(job_id)  # a run ended while sending it: never accepted
        to_send: list[str] = []
        latest = self.journal.latest(keys)
        for key in keys:
            record = latest.get(key)
            if record is None:
                to_send.append(key)
            elif record.state == "done" and record.line is not None:
                self.results[key] = self.result_of_line(record.line)
            elif record.state == "failed":
                if retry_failed:
                    to_send.append(key)
                else:
                    self.results[key] = record.error or LlmError("failed", ErrorCode.UNKNOWN)
            elif self.journal.job(record.job_id).state == "submitted":
                self.open.setdefault(record.job_id, None)
            else:
                to_send.append(key)
        return to_send

    def result_of_line(self, line: bytes) -> Result:
        """A stored results line, mapped again (the store keeps what the provider sent)."""
        outcome = self.speaker.outcome(line)
        if outcome is None:
            return LlmError("the stored results line cannot be read", ErrorCode.MALFORMED_RESPONSE)
        result, _ = self.result_of(outcome)
        return result

    def result_of(self, outcome: RowOutcome) -> tuple[Result, float | None]:
        """A results line's outcome as a row's result, and what it cost."""
        if outcome.body is None:
            assert outcome.error is not None
            return outcome.error, None
        try:
            completion = self.codec.completion(outcome.body)
        except LlmError as err:
            return err, None
        spent = None
        if self.price is not None and completion.usage is not None:
            spent = cost(completion.usage, self.price) * BATCH_PRICE_FACTOR
        error = completion.error
        if error is not None:
            error.details["completion"] = completion
            if error.provider is None:
                error.provider = self.provider
            return error, spent
        return completion, spent

    # ------------------------------------------------------------------ sending

    async def send(self, keys: Sequence[str], prompts: dict[str, Any]) -> None:
        """Build and send the rows of ``keys``, as many batches as the limits need."""
        limits = self.speaker.limits
        room = limits.max_bytes - len(self.speaker.head) - len(self.speaker.tail)
        batch: _Spool | None = None
        try:
            for key in keys:
                if self.stopped():
                    break
                try:
                    body = await self.codec.body(prompts[key])
                except LlmError as err:  # this row cannot be built (bad content): it alone fails
                    self.results[key] = err
                    continue
                if batch is None:
                    batch = self.spool()
                if (batch.size_with(body) > room and batch.count == 0) or len(body) > room:
                    self.results[key] = LlmError(
                        f"this row's request is about {len(body):,} bytes, more than one "
                        f"{self.speaker.api} batch may hold ({limits.max_bytes:,} bytes)",
                        ErrorCode.INPUT_TOO_LARGE,
                        provider=self.provider,
                    )
                    continue
                if batch.size_with(body) > room or batch.count >= limits.max_requests:
                    await self.submit(batch)
                    batch = self.spool()
                batch.add(key, body)
            if batch is not None and batch.count and not self.stopped():
                await self.submit(batch)
                batch = None
        finally:
            if batch is not None:  # written, never sent: forgotten
                batch.data.close()
                self.journal.abandon(batch.job_id)

    def spool(self) -> _Spool:
        """A new batch to write rows into, recorded in the store (nothing sent yet)."""
        return _Spool(self.speaker, self.journal.new_job(self.provider, self.speaker.api))

    async def submit(self, batch: _Spool) -> None:
        """Record ``batch``'s rows, send it, and record the provider's id for it."""
        self.journal.add_rows(batch.job_id, batch.rows)
        data = batch.close()
        try:
            remote = await self.retrying(lambda: self.speaker.submit(self.http, data, batch.count))
        except BaseException:
            self.journal.abandon(batch.job_id)
            raise
        finally:
            data.close()
        self.journal.submitted(batch.job_id, remote.remote_id, remote.fields)
        self.open[batch.job_id] = None
        log.info("%s batch %s: %d rows sent", self.speaker.api, remote.remote_id, batch.count)

    async def retrying(self, step: Callable[[], Awaitable[_T]]) -> _T:
        """``step()`` awaited, with the engine's retry policy for retryable errors."""
        attempt = 0
        while True:
            try:
                return await step()
            except LlmError as err:
                if not err.retryable or attempt >= self.engine.retries or self.stopped():
                    raise
                delay = backoff_delay(
                    attempt,
                    retry_after=err.retry_after,
                    base=self.engine.retry_base,
                    cap=self.engine.retry_cap,
                )
                attempt += 1
                if not await sleep_unless_stopped(delay, self.stop):
                    raise

    # ------------------------------------------------------------------ polling, collecting

    async def poll_all(self) -> None:
        """Poll every open batch once; collect those that ended."""
        for job_id in list(self.open):
            if self.stopped():
                return
            job = self.journal.job(job_id)
            assert job.remote_id is not None
            remote_id = job.remote_id

            def poll(remote_id: str = remote_id) -> Awaitable[RemoteStatus]:
                return self.speaker.poll(self.http, remote_id)

            try:
                status = await self.retrying(poll)
            except LlmError as err:
                if err.retryable:  # tried as often as the policy says: next round
                    log.warning("polling %s batch %s: %s", job.api, job.remote_id, err)
                    continue
                raise
            self.journal.polled(job_id, status.status, status.counts, status.fields)
            self.open[job_id] = status
            if status.ended:
                await self.collect(job, status)

    async def collect(self, job: JobRecord, status: RemoteStatus) -> None:
        """Record the outcome of every row of an ended batch."""
        pending: list[RowOutcome] = []
        async for outcome in self.speaker.results(self.http, status):
            pending.append(outcome)
            if len(pending) >= COMMIT_EVERY:
                self.record(job.job_id, pending)
                pending = []
        self.record(job.job_id, pending)
        error = _batch_error(job.api, status, self.provider)
        if self.journal.fail_unanswered(job.job_id, error):
            for key in self.journal.keys_failed_with(job.job_id, error):
                self.results[key] = error
        self.journal.collected(job.job_id, status.error)
        self.open.pop(job.job_id, None)

    def record(self, job_id: int, outcomes: list[RowOutcome]) -> None:
        """Map and record a group of results lines of batch ``job_id``."""
        if not outcomes:
            return
        keys = self.journal.keys_of(job_id, [o.custom_id for o in outcomes])
        rows: list[tuple[str, str, bytes, LlmError | None, float | None]] = []
        for outcome in outcomes:
            key = keys.get(outcome.custom_id)
            if key is None:  # not a row of this batch: not ours to record
                log.warning("batch results line for an unknown custom_id %r", outcome.custom_id)
                continue
            result, spent = self.result_of(outcome)
            self.results[key] = result
            error = result if isinstance(result, LlmError) else None
            rows.append(
                (outcome.custom_id, "failed" if error else "done", outcome.line, error, spent)
            )
        self.journal.record_outcomes(rows)

    def pending(self, keys: Sequence[str]) -> None:
        """Rows still in a running batch: ``BATCH_PENDING``, saying where they are."""
        latest = self.journal.latest(k for k in keys if k not in self.results)
        for key, record in latest.items():
            if record.state != "submitted":
                continue
            job = self.journal.job(record.job_id)
            status = self.open.get(record.job_id)
            where = f"{job.api} batch {job.remote_id}"
            if status is not None:
                total = status.total if status.total is not None else job.rows
                where += f" ({status.status}, {status.finished:,}/{total:,} done)"
            self.results[key] = LlmError(
                f"still in {where}: run the same map call again to collect it",
                ErrorCode.BATCH_PENDING,
                provider=self.provider,
            )


class _Spool:
    """One remote batch's input as it is written: to a temporary file (in memory up to a few
    MiB, then on disk), so a 200 MB batch is never held whole. Its rows carry the ids
    ``j<job_id>-<n>``: the same rows in a new store get the same ids, so a recorded run
    replays."""

    #: Bytes kept in memory before the input goes to a file on disk.
    IN_MEMORY = 8 * 1024 * 1024

    def __init__(self, speaker: BatchApiSpeaker, job_id: int) -> None:
        self.speaker = speaker
        self.job_id = job_id
        self.data: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=self.IN_MEMORY)  # noqa: SIM115
        self.data.write(speaker.head)
        self.rows: list[tuple[str, str]] = []
        self.bytes = 0

    @property
    def count(self) -> int:
        return len(self.rows)

    def size_with(self, body: str) -> int:
        """The input's size (without head and tail) with one more row of ``body``: its item
        with the longest id (an upper bound)."""
        item = len(self.speaker.item("x" * CUSTOM_ID_CHARS, "")) + len(body.encode("utf-8"))
        return self.bytes + (len(self.speaker.separator) if self.rows else 0) + item

    def add(self, key: str, body: str) -> None:
        custom_id = f"j{self.job_id}-{len(self.rows)}"
        item = self.speaker.item(custom_id, body)
        if self.rows:
            self.data.write(self.speaker.separator)
            self.bytes += len(self.speaker.separator)
        self.data.write(item)
        self.bytes += len(item)
        self.rows.append((custom_id, key))

    def close(self) -> IO[bytes]:
        """The whole input, ready to send (its tail written)."""
        self.data.write(self.speaker.tail)
        return self.data


def _batch_error(api: str, status: RemoteStatus, provider: str) -> LlmError:
    """The error of a row an ended batch gave no result for."""
    if status.status == "expired":
        return LlmError(
            status.error or "the batch expired", ErrorCode.BATCH_EXPIRED, provider=provider
        )
    if status.status in ("cancelled", "canceled"):
        return LlmError(
            status.error or "the batch was cancelled", ErrorCode.ABORTED, provider=provider
        )
    if status.status == "failed":
        return LlmError(
            status.error or "the batch failed", ErrorCode.INVALID_REQUEST, provider=provider
        )
    return LlmError(
        f"the {api} batch ended ({status.status}) without a result for this row",
        ErrorCode.MALFORMED_RESPONSE,
        provider=provider,
    )


async def run_batch_api(
    engine: Engine,
    request: Request,
    prompts: Sequence[Any],
    *,
    batch_api: Any,
    store: str | Path,
    retry_failed: bool = False,
    report: ProgressReport | None = None,
    price: Price | None = None,
    stop: StopSignal | None = None,
) -> list[Result]:
    """Every prompt's outcome, in order, through ``request.provider``'s batch API (see the
    module docstring). ``request``: every row's options; ``store``: the SQLite file that keeps
    the run; ``price``: the model's normal price (the batch pays half)."""
    settings = BatchApi.of(batch_api)
    api = batch_api_of(request.provider, settings.api or True)
    codec = RowCodec(engine, request)
    endpoint = await codec.endpoint()
    keys = [row_key(request, p) for p in prompts]
    first: dict[str, Any] = {}
    for key, prompt in zip(keys, prompts, strict=True):
        first.setdefault(key, prompt)
    unique = list(first)
    base_url = codec.options.base_url or ""
    speaker = speaker_for(api, request.provider, base_url, endpoint.url, settings)
    with BatchJournal(store) as journal:
        async with BatchHttp(
            request.provider,
            endpoint.headers,
            codec.options.make_transport,
            timeouts=codec.options.timeouts,
        ) as http:
            run = _Run(engine, request, settings, journal, codec, speaker, http, price, stop)
            to_send = run.known(unique, retry_failed)

            def tick() -> None:
                if report is None:
                    return
                done = sum(1 for k in keys if k in run.results)
                spent = journal.spent() if price is not None else None
                try:
                    report(done, len(keys), spent)
                except Exception:
                    log.warning("batch: the progress callback failed", exc_info=True)

            tick()
            await run.send(to_send, first)
            delay = settings.poll_first
            while run.open and not run.stopped():
                await run.poll_all()
                tick()
                if not run.open or not settings.wait:
                    break
                if not await sleep_unless_stopped(delay, stop):
                    break
                delay = min(max(delay * 2, settings.poll_first), settings.poll_max)
            run.pending(unique)
            tick()
    stopped = LlmError(
        "not sent: the run was stopped", ErrorCode.ABORTED, provider=request.provider
    )
    return [run.results.get(key, stopped) for key in keys]
