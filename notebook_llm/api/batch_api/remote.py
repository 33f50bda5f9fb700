"""What every provider's batch API has in common: its limits, the state of one remote batch,
the outcome of one row, and the interface each API's module implements
(:mod:`.openai`, :mod:`.anthropic`).

A batch API takes many requests in one body, runs them within a window (24 hours for both),
and hands back one JSON line per request, keyed by the ``custom_id`` the request carried. The
modules here only speak the API: the requests' bodies come from the provider's adapter
(:mod:`.codec`), the HTTP from :mod:`.http_calls`, and what is kept from :mod:`.journal`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from ...core.errors import ErrorCode, LlmError
from ...core.redaction import shorten
from .http_calls import BatchHttp

__all__ = ["BatchApiSpeaker", "BatchLimits", "RemoteBatch", "RemoteStatus", "RowOutcome"]


@dataclass(frozen=True)
class BatchLimits:
    """The most one remote batch may hold: requests, and bytes of its input (the JSON-lines
    file, or the JSON body of the request that creates it)."""

    max_requests: int
    max_bytes: int

    def __post_init__(self) -> None:
        if self.max_requests < 1 or self.max_bytes < 1:
            raise ValueError("batch limits must be positive")


@dataclass(frozen=True)
class RemoteBatch:
    """A batch the provider accepted: its id, and the fields the API gave that later calls
    need (OpenAI's input file id)."""

    remote_id: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RemoteStatus:
    """One poll of a remote batch.

    ``ended``: the provider finished with it (every request has its line, or the batch failed
    as a whole, ``error`` then says why); ``status`` the provider's own word for its state;
    ``counts`` its own counts, as it named them (shown in the progress); ``finished`` how
    many requests are done either way, out of ``total`` (``None`` when it does not say yet);
    ``fields`` what reading the results needs (output and error file ids, the results URL).
    """

    ended: bool
    status: str
    counts: dict[str, int]
    finished: int
    total: int | None
    fields: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class RowOutcome:
    """One line of a batch's results: the answer body of the request ``custom_id`` (a whole
    response of the endpoint, for the adapter to map), or why it failed (the provider's error,
    as an ``LlmError``). ``line`` is the line as the provider wrote it (kept in the journal)."""

    custom_id: str
    body: bytes | None
    error: LlmError | None
    line: bytes


class BatchApiSpeaker(Protocol):
    """One provider's batch API, for one provider's endpoint (see the module docstring):
    ``api`` is its name (``"openai"``, ``"anthropic"``), ``limits`` the ones this run keeps to
    (the documented ones unless a smaller one is given).

    The input is built by the caller from :attr:`head`, one :meth:`item` per request joined by
    :attr:`separator`, and :attr:`tail`, so that its size is known while it is written.
    """

    api: str
    limits: BatchLimits
    head: bytes
    separator: bytes
    tail: bytes

    def item(self, custom_id: str, body: str) -> bytes:
        """One request of the input, carrying ``body`` (the adapter's JSON body)."""
        ...

    async def submit(self, http: BatchHttp, data: IO[bytes], count: int, tag: str) -> RemoteBatch:
        """Send the input (``data``, read from its start) and create the batch, labelled with
        ``tag`` where the API keeps a label (:meth:`find` looks for it)."""
        ...

    async def find(self, http: BatchHttp, tag: str, since: float) -> RemoteBatch | None:
        """The batch created with ``tag`` (at ``since``, a Unix time, or later), if the provider
        has one and its API can say: how a batch whose id never reached the store is found
        again. ``None``: not found, or the API keeps no label (Anthropic's)."""
        ...

    async def poll(self, http: BatchHttp, remote_id: str) -> RemoteStatus:
        """The batch's state now."""
        ...

    def results(self, http: BatchHttp, status: RemoteStatus) -> AsyncIterator[RowOutcome]:
        """Every line of an ended batch's results, as they download."""
        ...

    def outcome(self, line: bytes) -> RowOutcome | None:
        """One results line read (``None``: not a results line); a stored line is read again
        with it."""
        ...


# ---------------------------------------------------------------- reading the APIs' answers
#
# Everything below reads what a server sent: numbers are checked before they count anything,
# ids before they go into a URL, and a line that cannot be read is reported, never guessed at.

#: The most requests any batch API counts; a larger count is not a real answer.
MAX_COUNT = 10_000_000
#: The longest id (a batch's, a file's, a row's) taken from an answer.
MAX_ID_CHARS = 256


def count_of(value: Any) -> int:
    """A request count from an answer: a non-negative integer, else 0 (never a bool, a float
    or a huge number)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return 0


def id_of(value: Any, what: str, provider: str) -> str:
    """An id from an answer (printable, at most :data:`MAX_ID_CHARS`), or
    ``MALFORMED_RESPONSE`` naming what was expected."""
    if (
        isinstance(value, str)
        and 0 < len(value) <= MAX_ID_CHARS
        and value.isprintable()
        and not any(c.isspace() for c in value)
    ):
        return value
    raise LlmError(
        f"{provider}'s batch API sent no usable {what} (got {shorten(repr(value), 80)})",
        ErrorCode.MALFORMED_RESPONSE,
        provider=provider,
    )


def status_of(value: Any, known: frozenset[str], provider: str, remote_id: str) -> str:
    """A batch's status from an answer, one of ``known``, or ``MALFORMED_RESPONSE``."""
    if isinstance(value, str) and value in known:
        return value
    raise LlmError(
        f"{provider}'s batch {remote_id} has an unknown status {shorten(repr(value), 60)}",
        ErrorCode.MALFORMED_RESPONSE,
        provider=provider,
    )


def counts_of(value: Any, names: Sequence[str]) -> dict[str, int]:
    """A batch's ``request_counts``: each of ``names`` as :func:`count_of` reads it."""
    counts = value if isinstance(value, dict) else {}
    return {name: count_of(counts.get(name)) for name in names}


async def outcomes(
    http: BatchHttp, url: str, read: Callable[[bytes], RowOutcome | None]
) -> AsyncIterator[RowOutcome]:
    """The results lines downloaded from ``url``, each read by ``read`` (lines it cannot
    read are skipped)."""
    async for line in http.lines(url):
        outcome = read(line)
        if outcome is not None:
            yield outcome


def optional_id(value: Any, what: str, provider: str) -> str | None:
    """:func:`id_of` for a field that may be null."""
    return None if value is None else id_of(value, what, provider)


def line_object(line: bytes) -> dict[str, Any] | None:
    """One results line as a JSON object with a string ``custom_id``, or ``None``."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("custom_id"), str):
        return None
    return value


def body_bytes(value: Any) -> bytes:
    """A JSON value of a results line as the body an adapter maps."""
    return json.dumps(value, ensure_ascii=False).encode("utf-8")
