"""The HTTP calls of a provider's batch API, made through the package's wire layer.

The one place where the batch API touches HTTP, kept narrow so that it can move onto the wire
layer's single exchange: a JSON request (create a batch, poll it), a file upload (OpenAI's Files
API) and a JSON-lines download (the output and error files, Anthropic's ``results_url``). What
it uses is the wire layer's:

* the client: :func:`~notebook_llm.wire.transport.network_client` on the engine's transport (so
  ``Engine(transport=...)``, a recording and a replay carry these requests too, and environment
  proxies apply);
* bodies read within their caps on decoded bytes (:mod:`notebook_llm.wire.body`); a download
  is read piece by piece and cut into lines, each line under ``max_body_bytes``, so a file of
  any size is never held whole;
* a failed status as the provider's own error (:func:`~notebook_llm.wire.http_errors.error_from_http`),
  a transport failure as ``TRANSPORT`` / ``TIMEOUT`` / ``MALFORMED_RESPONSE`` (the mapping the
  adapters use), the request's deadline (:class:`~notebook_llm.wire.deadline.RequestClock`);
  a download has no deadline (a 200 MB file may take long) but an idle limit per piece.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Callable
from typing import IO, Any

import httpx

from ...adapters.lua.chunk_mapping import ChunkMapper
from ...adapters.lua.hook_results import TransportGuard
from ...core.errors import ErrorCode, LlmError
from ...core.redaction import shorten
from ...core.timeouts import DEFAULT_TIMEOUTS, Timeouts
from ...wire.body import decoded, read_body, read_error_body, too_large
from ...wire.deadline import RequestClock
from ...wire.http_errors import error_from_http
from ...wire.limits import DEFAULT_LIMITS, WireLimits
from ...wire.response_watch import notify_response
from ...wire.transport import network_client

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
        make_transport: Callable[[], httpx.AsyncBaseTransport] | None = None,
        *,
        timeouts: Timeouts | None = None,
        limits: WireLimits = DEFAULT_LIMITS,
    ) -> None:
        self.provider = provider
        self._headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        self._timeouts = timeouts or DEFAULT_TIMEOUTS
        self._limits = limits
        transport = make_transport() if make_transport is not None else None
        self._client = network_client(timeout=SOCKET_TIMEOUT, transport=transport)

    async def __aenter__(self) -> BatchHttp:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    def _guard(self) -> TransportGuard:
        return TransportGuard(self.provider, ChunkMapper(provider=self.provider))

    async def _checked(self, response: httpx.Response, clock: RequestClock) -> None:
        """Tell whoever watches the responses (:mod:`notebook_llm.wire.response_watch`), and
        raise the provider's error for a failed status."""
        notify_response(response.status_code, response.headers)
        if response.status_code < 400:
            return
        raw = await clock.run(read_error_body(response, self._limits.max_error_body_bytes))
        raise error_from_http(response.status_code, response.headers, raw, provider=self.provider)

    async def json(self, method: str, url: str, body: Any = None) -> dict[str, Any]:
        """``method url`` with a JSON ``body`` (none for ``None``); the answer's JSON object."""
        headers = dict(self._headers)
        content = None
        if body is not None:
            headers["content-type"] = "application/json"
            content = json.dumps(body, ensure_ascii=False).encode("utf-8")
        request = self._client.build_request(method, url, content=content, headers=headers)
        return await self._send_for_json(request)

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
        request = self._client.build_request(
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
        request = self._client.build_request("POST", url, content=_chunks(data), headers=headers)
        return await self._send_for_json(request)

    async def _send_for_json(self, request: httpx.Request) -> dict[str, Any]:
        clock = RequestClock(self._timeouts, self.provider, False)
        with self._guard() as guard:
            response = await clock.run(self._client.send(request, stream=True))
            async with contextlib.aclosing(response):
                await self._checked(response, clock)
                guard.accepted = True
                raw = await clock.run(
                    read_body(
                        response,
                        self._limits.max_body_bytes,
                        "the batch API's answer",
                        "max_body_bytes",
                    )
                )
        return _json_object(raw, self.provider, str(request.url.path))

    async def lines(self, url: str) -> AsyncIterator[bytes]:
        """The non-empty lines of a JSON-lines download, as they arrive (each at most
        ``max_body_bytes``, the cap on one answer body: a line holds one)."""
        request = self._client.build_request("GET", url, headers=self._headers)
        clock = RequestClock(Timeouts(deadline=None, idle=self._timeouts.idle), self.provider, True)
        cap = self._limits.max_body_bytes
        with self._guard() as guard:
            response = await clock.run(self._client.send(request, stream=True))
            async with contextlib.aclosing(response):
                await self._checked(response, clock)
                guard.accepted = True
                pending = bytearray()
                async for piece in clock.paced(decoded(response)):
                    clock.heard()
                    pending += piece
                    start = 0
                    while (end := pending.find(b"\n", start)) >= 0:
                        if end - start > cap:
                            raise too_large("a line of the batch results", cap, "max_body_bytes")
                        line = bytes(pending[start:end]).strip()
                        start = end + 1
                        if line:
                            yield line
                    del pending[:start]
                    if len(pending) > cap:
                        raise too_large("a line of the batch results", cap, "max_body_bytes")
                last = bytes(pending).strip()
                if last:
                    yield last


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
