"""One ``map(..., batch_api=True)`` run: send the rows that need an answer as remote batches,
poll them, collect their results, and give every row its outcome; all of it kept in the store,
so the same call run again (a day later, in a new kernel) carries on where the last one ended.

It is a :class:`~notebook_llm.api.batch_run.BatchRun` (the same input, journal, keys, results,
progress view and Stop as every ``map``) whose rows travel differently. The steps, each
committed to the store as it ends (:mod:`.journal`; each row's result into the journal's
``rows`` as any ``map`` writes it):

1. the rows the journal has a result for are skipped (failed ones are sent again only with
   ``retry_failed=True``); rows in a batch that is still running are waited for, not sent
   again; identical rows are sent once;
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

The progress view gets the provider's own counts (``BatchStatus.remote``).
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import IO, Any, TypeVar

from ...core.cancel import sleep_unless_stopped
from ...core.completion import Completion
from ...core.errors import ErrorCode, LlmError
from ...engine.request import Request
from ...wire.http_errors import backoff_delay
from ..batch_inputs import Source
from ..batch_run import BatchRun, BatchSettings, WorkItem, _request_fields
from ..observers import BatchStatus
from .anthropic import AnthropicBatches
from .codec import RowCodec, batch_api_of, check_batchable
from .http_calls import BatchHttp
from .journal import BatchJournal, JobRecord
from .openai import OpenAIBatches
from .remote import BatchApiSpeaker, BatchLimits, RemoteBatch, RemoteStatus, RowOutcome

__all__ = ["BATCH_PRICE_FACTOR", "BatchApi", "BatchApiRun", "check_batch_api", "run_batch_api"]

log = logging.getLogger("notebook_llm.api.batch")  # map's own: one batch, one log

#: Both providers charge a batch's tokens at half their price.
BATCH_PRICE_FACTOR = 0.5

#: The id a request carries is ``j<job_id>-<n>``; the most characters it reserves.
CUSTOM_ID_CHARS = 24

#: Outcomes recorded per commit while a batch is collected.
COMMIT_EVERY = 500

Result = Completion | LlmError
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


class BatchApiRun(BatchRun):
    """One run through a provider's batch API (see the module docstring)."""

    def __init__(
        self,
        source: Source,
        settings: BatchSettings,
        batch_api: BatchApi,
        codec: RowCodec,
        speaker: BatchApiSpeaker,
        http: BatchHttp,
    ) -> None:
        assert settings.store is not None
        store = settings.store
        if settings.price is not None:  # every row is journaled at the batch price
            price = settings.price
            settings = replace(
                settings, price=(price[0] * BATCH_PRICE_FACTOR, price[1] * BATCH_PRICE_FACTOR)
            )
        super().__init__(source, settings)
        self.settings = batch_api
        self.codec = codec
        self.provider = settings.request.provider
        self.journal = BatchJournal(store)
        self.speaker = speaker
        self.http = http
        #: The rows of this input waiting for each key's outcome (identical rows share one).
        self.waiting: dict[str, list[WorkItem]] = {}
        #: Batches still running: job id -> their last status.
        self.open: dict[int, RemoteStatus | None] = {}

    def stopped(self) -> bool:
        stop = self.s.stop_signal
        return stop is not None and stop.is_set()

    def status(self) -> BatchStatus:
        return replace(super().status(), remote=self.remote_line())

    def remote_line(self) -> str | None:
        """The provider's batches as one line: ``openai batch batch_abc: in_progress,
        1,200/50,000 done, 3 failed``."""
        parts = []
        for job_id, status in list(self.open.items()):
            job = self.journal.job(job_id)
            text = f"{job.api} batch {job.remote_id}"
            if status is not None:
                counts = ", ".join(f"{v:,} {k}" for k, v in status.counts.items() if v)
                text += f": {status.status}" + (f" ({counts})" if counts else "")
            parts.append(text)
        return "; ".join(parts) or None

    # ------------------------------------------------------------------ the run

    async def run(self) -> Any:
        self._tick()
        self._attach_view()
        try:
            async with self.http:
                for job_id in self.journal.preparing_jobs(self.provider):
                    await self.reconcile(job_id)  # a run ended while sending it
                await self.send(self.known())
                await self.wait()
            self.pending()
        finally:
            self.finished_at = time.monotonic()
            if self._commit_timer is not None:
                self._commit_timer.cancel()
            self.journal.store.commit()  # the rows' results written in a group, not committed yet
            self._tick(final=True)
        if self._commit_error is not None:
            raise self._commit_error
        return self._output()

    async def reconcile(self, job_id: int) -> None:
        """Batch ``job_id`` was being sent by a run that ended before the store had the
        provider's id for it: the provider may have accepted it. Looked for by its tag
        (:func:`job_tag`, in the batch's labels where the API keeps them: OpenAI's
        ``metadata``); found, it is kept, polled and collected like any; not found (or the API
        keeps no label, or cannot be asked), it is forgotten and its rows are sent again."""
        rows = self.journal.rows_of(job_id)
        found = None
        if rows:
            tag, since = job_tag(job_id, rows), self.journal.created(job_id)
            try:
                found = await self.retrying(lambda: self.speaker.find(self.http, tag, since))
            except LlmError as err:
                log.warning(
                    "%s batch j%d: could not look for it at the provider (%s); its rows are "
                    "sent again",
                    self.speaker.api,
                    job_id,
                    err,
                )
        if found is None:
            self.journal.abandon(job_id)
            return
        self.journal.submitted(job_id, found.remote_id, found.fields)
        log.info(
            "%s batch %s: found by its tag after a run ended before recording it",
            self.speaker.api,
            found.remote_id,
        )

    def known(self) -> list[str]:
        """Read the input (the rows without a result in the journal, :meth:`_work`), group
        its rows by key, settle the keys this table knows; the keys to send, in input order."""
        for item in self._work():
            assert item.key is not None
            self.waiting.setdefault(item.key, []).append(item)
        to_send: list[str] = []
        latest = self.journal.latest(self.waiting)
        for key in self.waiting:
            record = latest.get(key)
            if record is None:
                to_send.append(key)
            elif record.state == "done" and record.line is not None:
                self.settle(key, self.result_of_line(record.line), first_cost=False)
            elif record.state == "failed" and not self.s.retry_failed and record.error:
                self.settle(key, record.error, first_cost=False)
            elif (
                record.state == "submitted" and self.journal.job(record.job_id).state == "submitted"
            ):
                self.open.setdefault(record.job_id, None)
            else:
                to_send.append(key)
        return to_send

    def settle(
        self, key: str, result: Result, *, first_cost: bool = True, cost: float | None = None
    ) -> None:
        """``key``'s outcome to every row of this input that has it (journaled, counted,
        shown). Only the first row pays for it, and only when it was paid for in this run:
        an answer sent once is counted once."""
        if cost is None:
            cost = self.row_cost(key, result) if first_cost else 0.0
        for n, item in enumerate(self.waiting.pop(key, [])):
            paid = cost if n == 0 else 0.0
            self.spent += paid
            self._finish(item, result, paid)

    def row_request(self, key: str) -> Request:
        """The request of ``key``'s row (its prompt in the map's request)."""
        items = self.waiting.get(key)
        if not items:
            return self.s.request
        return replace(self.s.request, **_request_fields(items[0].prompt))

    def row_cost(self, key: str, result: Result) -> float:
        """What ``key``'s answer cost at the batch price, counted as the cost cap counts every
        answer (:meth:`CostCap.cost_of`): a results line without usage, or with counts that
        are not counts (negative, huge, not whole), is estimated from the row's request and
        the text it holds, never taken as free."""
        return self.meter.cost_of(result, self.row_request(key), BATCH_PRICE_FACTOR)

    def result_of_line(self, line: bytes) -> Result:
        """A stored results line, mapped again (the table keeps what the provider sent)."""
        outcome = self.speaker.outcome(line)
        if outcome is None:
            return LlmError("the stored results line cannot be read", ErrorCode.MALFORMED_RESPONSE)
        return self.result_of(outcome)

    def result_of(self, outcome: RowOutcome) -> Result:
        """A results line's outcome as a row's result."""
        if outcome.body is None:
            assert outcome.error is not None
            return outcome.error
        try:
            completion = self.codec.completion(outcome.body)
        except LlmError as err:
            return err
        error = completion.error
        if error is not None:
            error.details["completion"] = completion
            if error.provider is None:
                error.provider = self.provider
            return error
        return completion

    # ------------------------------------------------------------------ sending

    async def send(self, keys: Sequence[str]) -> None:
        """Build and send the rows of ``keys``, as many batches as the limits need."""
        limits = self.speaker.limits
        room = limits.max_bytes - len(self.speaker.head) - len(self.speaker.tail)
        batch: _Spool | None = None
        cap = self.s.cap
        reserved = 0.0  # the estimated cost of the rows sent in this run, not answered yet
        try:
            for key in keys:
                if self.stopped():
                    break
                if cap is not None:
                    # every row of a batch is in flight at once: a row goes only while what
                    # is spent (this run and earlier ones) plus the rows sent stays under the
                    # cap (the first row of a run always goes while nothing is spent), so a
                    # streamed input, which no estimate covered before sending, cannot pass it
                    cost = cap.estimate(self.row_request(key), BATCH_PRICE_FACTOR)
                    spent = self.spent
                    first = reserved == 0 and spent == 0
                    if not first and (spent >= cap.cap or spent + reserved + cost > cap.cap):
                        for item in self.waiting.pop(key):
                            self._unsent(item, cap.refusal(self.provider))
                        continue
                    reserved += cost
                try:
                    body = await self.codec.body(self.waiting[key][0].prompt)
                except LlmError as err:  # this row cannot be built (bad content): it alone fails
                    self.settle(key, err, cost=0.0)  # never sent
                    continue
                if batch is None:
                    batch = self.spool()
                if (batch.size_with(body) > room and batch.count == 0) or len(body) > room:
                    self.settle(key, self._too_large(len(body)), cost=0.0)
                    continue
                if batch.size_with(body) > room or batch.count >= limits.max_requests:
                    full, batch = batch, None  # from here, submit() says what becomes of it
                    await self.submit(full)
                    batch = self.spool()
                batch.add(key, body)
            if batch is not None and batch.count and not self.stopped():
                full, batch = batch, None
                await self.submit(full)
        finally:
            if batch is not None:  # written, never sent: forgotten
                batch.data.close()
                self.journal.abandon(batch.job_id)

    def _too_large(self, size: int) -> LlmError:
        return LlmError(
            f"this row's request is about {size:,} bytes, more than one {self.speaker.api} "
            f"batch may hold ({self.speaker.limits.max_bytes:,} bytes)",
            ErrorCode.INPUT_TOO_LARGE,
            provider=self.provider,
        )

    def spool(self) -> _Spool:
        """A new batch to write rows into, recorded in the store (nothing sent yet)."""
        return _Spool(self.speaker, self.journal.new_job(self.provider, self.speaker.api))

    async def submit(self, batch: _Spool) -> None:
        """Record ``batch``'s rows, send it (labelled with its tag), and record the provider's
        id for it.

        Creating a batch is not idempotent: an attempt that failed (a timeout, a dropped
        connection, a 5xx) may have created it all the same. So a retry first looks for the
        batch by its tag, and a run that ends here for any other reason than the provider's
        refusal (retries used up, Stop, a crash, a kill) leaves the batch ``preparing``, for the
        next run to look for (:meth:`reconcile`) before it sends its rows again."""
        speaker, http = self.speaker, self.http
        self.journal.add_rows(batch.job_id, batch.rows)
        tag, since = job_tag(batch.job_id, batch.rows), self.journal.created(batch.job_id)
        data = batch.close()
        tried = False

        async def attempt() -> RemoteBatch:
            nonlocal tried
            if tried:  # the last attempt may have created it before it failed
                found = await speaker.find(http, tag, since)
                if found is not None:
                    return found
            tried = True
            return await speaker.submit(http, data, batch.count, tag)

        try:
            remote = await self.retrying(attempt)
        except LlmError as err:
            if not err.retryable:  # the provider refused it (a 4xx): it was certainly not made
                self.journal.abandon(batch.job_id)
            raise
        finally:
            data.close()
        self.journal.submitted(batch.job_id, remote.remote_id, remote.fields)
        self.open[batch.job_id] = None
        self.sent += batch.count
        log.info("%s batch %s: %d rows sent", speaker.api, remote.remote_id, batch.count)
        self._tick()

    async def retrying(self, step: Callable[[], Awaitable[_T]]) -> _T:
        """``step()`` awaited, with the engine's retry policy for retryable errors."""
        engine = self.s.engine
        attempt = 0
        while True:
            try:
                return await step()
            except LlmError as err:
                if not err.retryable or attempt >= engine.retries or self.stopped():
                    raise
                delay = backoff_delay(
                    attempt,
                    retry_after=err.retry_after,
                    base=engine.retry_base,
                    cap=engine.retry_cap,
                )
                attempt += 1
                if not await sleep_unless_stopped(delay, self.s.stop_signal):
                    raise

    # ------------------------------------------------------------------ polling, collecting

    async def wait(self) -> None:
        """Poll the open batches until they end (at once, then after longer and longer
        pauses), or once only (``wait=False``), or until Stop."""
        delay = self.settings.poll_first
        while self.open and not self.stopped():
            await self.poll_all()
            self._tick()
            if not self.open or not self.settings.wait:
                return
            if not await sleep_unless_stopped(delay, self.s.stop_signal):
                return
            delay = min(max(delay * 2, self.settings.poll_first), self.settings.poll_max)

    async def poll_all(self) -> None:
        """Poll every open batch once; collect those that ended."""
        speaker, http = self.speaker, self.http
        for job_id in list(self.open):
            if self.stopped():
                return
            job = self.journal.job(job_id)
            assert job.remote_id is not None

            def poll(remote_id: str = job.remote_id) -> Awaitable[RemoteStatus]:
                return speaker.poll(http, remote_id)

            try:
                status = await self.retrying(poll)
                self.journal.polled(job_id, status.status, status.counts, status.fields)
                self.open[job_id] = status
                if status.ended:
                    await self.collect(job, status)
            except LlmError as err:
                if err.retryable:  # tried as often as the policy says: next round
                    log.warning("polling %s batch %s: %s", job.api, job.remote_id, err)
                    continue
                if err.code != ErrorCode.NOT_FOUND:
                    raise
                self.close_job(job, _gone(job, err), err.message)

    async def collect(self, job: JobRecord, status: RemoteStatus) -> None:
        """Record the outcome of every row of an ended batch."""
        pending: list[RowOutcome] = []
        async for outcome in self.speaker.results(self.http, status):
            pending.append(outcome)
            if len(pending) >= COMMIT_EVERY:
                self.record(job.job_id, pending)
                pending = []
        self.record(job.job_id, pending)
        self.close_job(job, _batch_error(job.api, status, self.provider), status.error)

    def close_job(self, job: JobRecord, error: LlmError, why: str | None) -> None:
        """Batch ``job`` is over: its rows without an outcome fail with ``error``."""
        if self.journal.fail_unanswered(job.job_id, error):
            for key in self.journal.keys_failed_with(job.job_id, error):
                self.settle(key, error, cost=0.0)  # a row with no result is not billed
        self.journal.collected(job.job_id, why)
        self.open.pop(job.job_id, None)

    def record(self, job_id: int, outcomes: list[RowOutcome]) -> None:
        """Map and record a group of results lines of batch ``job_id``."""
        if not outcomes:
            return
        keys = self.journal.keys_of(job_id, [o.custom_id for o in outcomes])
        rows: list[tuple[str, str, bytes, LlmError | None, float | None]] = []
        settled: list[tuple[str, Result, float]] = []
        for outcome in outcomes:
            key = keys.get(outcome.custom_id)
            if key is None:  # not a row of this batch: not ours to record
                log.warning("batch results line for an unknown custom_id %r", outcome.custom_id)
                continue
            result = self.result_of(outcome)
            error = result if isinstance(result, LlmError) else None
            spent = self.row_cost(key, result)
            rows.append(
                (
                    outcome.custom_id,
                    "failed" if error else "done",
                    outcome.line,
                    error,
                    spent if self.s.price is not None else None,
                )
            )
            settled.append((key, result, spent))
        self.journal.record_outcomes(rows)  # the provider's lines first, then the rows' results
        for key, result, spent in settled:
            self.settle(key, result, cost=spent)

    def pending(self) -> None:
        """Rows still in a running batch: ``BATCH_PENDING``, saying where they are; rows
        never sent (stopped): ``ABORTED``."""
        latest = self.journal.latest(self.waiting)
        for key in list(self.waiting):
            record = latest.get(key)
            if record is None or record.state != "submitted":
                error = LlmError("not sent: the run was stopped", ErrorCode.ABORTED)
            else:
                job = self.journal.job(record.job_id)
                status = self.open.get(record.job_id)
                where = f"{job.api} batch {job.remote_id}"
                if status is not None:
                    total = status.total if status.total is not None else job.rows
                    where += f" ({status.status}, {status.finished:,}/{total:,} done)"
                error = LlmError(
                    f"still in {where}: run the same map call again to collect it",
                    ErrorCode.BATCH_PENDING,
                    provider=self.provider,
                )
            for item in self.waiting.pop(key):
                self._unsent(item, error)


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


def job_tag(job_id: int, rows: Sequence[tuple[str, str]]) -> str:
    """The label a batch is created with, to find it again when its id never reached the
    store: a digest of its number and its rows' ids and keys (a row key covers the provider,
    model, options and prompt). Made from what it carries, not drawn at random, so that the
    same rows in a new store make the same request (a recorded run replays); a batch of
    another store can match only if it carries the very same requests under the same ids,
    and then its answers are the right ones."""
    digest = hashlib.sha256(f"notebook_llm batch j{job_id}\n".encode())
    for custom_id, key in rows:
        digest.update(f"{custom_id} {key}\n".encode())
    return f"nbllm-{digest.hexdigest()[:40]}"


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


def _gone(job: JobRecord, err: LlmError) -> LlmError:
    """The error of the rows of a batch the provider no longer has (or its results)."""
    return LlmError(
        f"{job.api} batch {job.remote_id} is no longer at the provider ({err.message}); "
        "retry_failed=True sends its rows again",
        ErrorCode.NOT_FOUND,
        provider=err.provider,
    )


def check_batch_api(request: Request, batch_api: Any) -> None:
    """Refuse, in one line, ``batch_api=`` values and requests a batch cannot take (nothing is
    read or opened): an unknown setting, a provider without a batch API, tools,
    ``schema_retries``."""
    batch_api_of(request.provider, BatchApi.of(batch_api).api or True)
    check_batchable(request)


async def run_batch_api(source: Source, settings: BatchSettings, batch_api: Any) -> Any:
    """``map``'s run through ``settings.request.provider``'s batch API (see the module
    docstring); returns what ``map`` returns. ``settings.store`` keeps it."""
    options = BatchApi.of(batch_api)
    codec = RowCodec(settings.engine, settings.request, options.api)
    endpoint = await codec.endpoint()
    provider = settings.request.provider
    base_url = codec.options.base_url or ""
    speaker = speaker_for(codec.api, provider, base_url, endpoint.url, options)
    http = BatchHttp(
        provider,
        endpoint.headers,
        codec.options.make_transport,
        timeouts=codec.options.timeouts,
    )
    return await BatchApiRun(source, settings, options, codec, speaker, http).run()
