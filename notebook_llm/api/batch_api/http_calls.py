"""The HTTP calls of a provider's batch API, made through the package's one exchange.

A JSON request (create a batch, poll it), a file upload (OpenAI's Files API) and a JSON-lines
download (the output and error files, Anthropic's ``results_url``), each one
:class:`~notebook_llm.wire.exchange.HttpExchange`: the engine's transport (so
``Engine(transport=...)``, a recording and a replay carry these requests too, and environment
proxies apply), bodies within their caps on decoded bytes, a failed status as the provider's
own error, transport failures mapped in the exchange's one place, every response reported to
:mod:`notebook_llm.wire.response_watch`, and the request's deadline. A download has no
deadline (a 200 MB file may take long) but an idle limit per piece, and is read line by line,
each line under ``max_body_bytes``, so a file of any size is never held whole.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from typing import IO, Any

import httpx

from ...core.errors import ErrorCode, LlmError
from ...core.redaction import shorten
from ...core.timeouts import DEFAULT_TIMEOUTS, Timeouts
from ...wire.clients import MakeTransport
from ...wire.exchange import HttpExchange
from ...wire.limits import DEFAULT_LIMITS, WireLimits

__all__ = ["BatchHttp"]

#: One socket operation's limits (the request as a whole has its deadline, a download its idle
#: limit): an upload of 200 MB needs a long write.
SOCKET_TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=300.0, pool=30.0)


class BatchHttp:
    """The HTTP calls of one batch run to one provider (see the module docstring); an async
    context manager that closes its client.

    ``headers`` go with every request (the key, as the provider's adapter sends it);
    ``make_transport``: the engine's transport maker (``GenerateOptions.make_transport``),
    ``None`` for the network.
    """

    def __init__(
        self,
        provider: str,
        headers: dict[str, str],
        make_transport: MakeTransport | None = None,
        *,
        timeouts: Timeouts | None = None,
        limits: WireLimits = DEFAULT_LIMITS,
    ) -> None:
        self.provider = provider
        self._headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        self._timeouts = timeouts or DEFAULT_TIMEOUTS
        self._limits = limits
        self._make = make_transport

    async def __aenter__(self) -> BatchHttp:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def _exchange(self, timeouts: Timeouts | None = None) -> HttpExchange:
        """A fresh exchange for one call: its deadline runs from that call, not the run's start."""
        return HttpExchange(
            self.provider,
            timeouts=timeouts or self._timeouts,
            limits=self._limits,
            make_transport=self._make,
            timeout=SOCKET_TIMEOUT,
        )

    async def json(self, method: str, url: str, body: Any = None) -> dict[str, Any]:
        """``method url`` with a JSON ``body`` (none for ``None``); the answer's JSON object."""
        headers = dict(self._headers)
        content = None
        if body is not None:
            headers["content-type"] = "application/json"
            content = json.dumps(body, ensure_ascii=False).encode("utf-8")
        return await self._send_for_json(
            httpx.Request(method, url, content=content, headers=headers)
        )

    async def upload(
        self, url: str, fields: dict[str, str], name: str, file: IO[bytes], content_type: str
    ) -> dict[str, Any]:
        """A ``multipart/form-data`` POST of ``fields`` and one file (read from ``file`` as it
        is sent, not held whole); the answer's JSON object. The parts' boundary is made from
        the file's digest (a text cannot hold its own digest), so the same upload is the same
        request: a recorded run replays."""
        digest = hashlib.sha256()
        file.seek(0)
        while piece := file.read(CHUNK):
            digest.update(piece)
        file.seek(0)
        boundary = f"notebook-llm-{digest.hexdigest()[:40]}"
        headers = {**self._headers, "content-type": f"multipart/form-data; boundary={boundary}"}
        request = httpx.Request(
            "POST",
            url,
            data=fields,
            files={"file": (name, file, content_type)},
            headers=headers,
        )
        return await self._send_for_json(request)

    async def post_file(self, url: str, data: IO[bytes], content_type: str) -> dict[str, Any]:
        """A POST whose body is ``data`` (from its start to its end, sent as it is read); the
        answer's JSON object."""
        data.seek(0, 2)
        size = data.tell()
        data.seek(0)
        headers = {**self._headers, "content-type": content_type, "content-length": str(size)}
        request = httpx.Request("POST", url, content=_chunks(data), headers=headers)
        return await self._send_for_json(request)

    async def _send_for_json(self, request: httpx.Request) -> dict[str, Any]:
        answer = await self._exchange().fetch_built(
            request, what="the batch API's answer", doing=f"calling {self.provider}'s batch API"
        )
        return _json_object(answer.body, self.provider, str(request.url.path))

    async def lines(self, url: str) -> AsyncIterator[bytes]:
        """The non-empty lines of a JSON-lines download, as they arrive (each at most
        ``max_body_bytes``, the cap on one answer body: a line holds one)."""
        exchange = self._exchange(Timeouts(deadline=None, idle=self._timeouts.idle))
        request = httpx.Request("GET", url, headers=self._headers)
        async for line in exchange.lines(
            request,
            what="the batch results",
            doing=f"downloading {self.provider}'s batch results",
        ):
            yield line


def _json_object(raw: bytes, provider: str, path: str) -> dict[str, Any]:
    """A JSON object body, or ``MALFORMED_RESPONSE`` naming the endpoint."""
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise LlmError(
            f"{provider} answered {path} with something that is not a JSON object: "
            f"{shorten(raw.decode('utf-8', 'replace'), 200)!r}",
            ErrorCode.MALFORMED_RESPONSE,
            provider=provider,
        )
    return value


#: The piece of a request body read from its file at a time.
CHUNK = 64 * 1024


async def _chunks(data: IO[bytes]) -> AsyncIterator[bytes]:
    """A file's bytes from its start, a piece at a time (a request body sent as it is read)."""
    data.seek(0)
    while piece := data.read(CHUNK):
        yield piece
