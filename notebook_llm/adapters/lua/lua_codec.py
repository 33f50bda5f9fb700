"""``LuaCodec``: a Lua adapter's part of one generation, as the exchange's codec.

The exchange (:mod:`notebook_llm.wire.exchange`) sends the request, reads and frames the body
and maps transport failures; this codec translates, in the stream's own sandbox:

* :meth:`LuaCodec.request`: ``GenerateOptions`` -> the script's ``transform_request`` and
  ``build_headers`` -> URL, headers and body (:mod:`.provider_request`);
* :meth:`LuaCodec.feed`: the payloads of one network read -> ``transform_stream_chunk`` (each
  payload under its own CPU budget, all of them in one crossing into Lua:
  :meth:`~notebook_llm.adapters.lua.runtime.LuaSandbox.call_each`) -> :class:`ChunkMapper` ->
  protocol events;
* :meth:`LuaCodec.whole`: a whole (non-stream) body -> ``transform_response`` -> events.

* ``[DONE]`` or a chunk with ``done = true`` ends the answer (:attr:`LuaCodec.finished`); the
  exchange reads no further;
* an error met in the middle of a read's payloads is held (``pending``) and raised by
  :meth:`~LuaCodec.raise_pending` once the events mapped before it were handed on;
* while no block has been opened, the payloads are shown to a
  :class:`~notebook_llm.adapters.lua.dropped_text.DroppedText`: an answer that ends with no
  block although they held text is the script's ``ADAPTER_ERROR`` naming the field, not an
  empty answer.
"""

from __future__ import annotations

from ...core.errors import LlmError
from ...core.protocol import Event, GenerateOptions
from ...wire.codec import WireRequest
from .chunk_mapping import ChunkMapper
from .dropped_text import DroppedText, has_block, judge_events
from .hook_results import amap_whole_body, blame_provider_if_not_json, json_object_output
from .provider_request import aprepare_request, with_max_tokens_hint
from .runtime import LuaSandbox

__all__ = ["LuaCodec"]


class LuaCodec:
    """One generation of a Lua adapter, in ``sandbox`` (a fresh state for this stream)."""

    __slots__ = ("mapper", "name", "options", "pending", "sandbox", "witness")

    def __init__(self, sandbox: LuaSandbox, options: GenerateOptions, name: str) -> None:
        self.sandbox = sandbox
        self.options = options
        self.name = name
        self.mapper = ChunkMapper(provider=options.provider, adapter=name)
        #: An error met in the middle of a read's payloads; raised once the events mapped
        #: before it have been handed on, so nothing that arrived is lost.
        self.pending: LlmError | None = None
        #: Until the first block: the payloads' text, to fail an answer that dropped it all.
        self.witness: DroppedText | None = DroppedText()

    async def request(self) -> WireRequest:
        """The script's request (its hooks' ``http_get`` go out on the stream's exchange)."""
        url, headers, body, streaming = await aprepare_request(
            self.sandbox, self.options, self.name
        )
        ndjson = self.sandbox.meta().get("stream_format") == "ndjson"
        return WireRequest(
            "POST", url, headers, body.encode("utf-8"), streaming, "ndjson" if ndjson else "sse"
        )

    @property
    def finished(self) -> bool:
        return self.mapper.finished

    def raise_pending(self) -> None:
        if self.pending is not None:
            err, self.pending = self.pending, None
            raise err

    def feed(self, payloads: list[str]) -> list[Event]:
        out: list[Event] = []
        try:
            self._map(payloads, out)
        except LlmError as err:
            self.pending = err
        if self.witness is not None:
            self._watch(payloads, out)
        return out

    def _watch(self, payloads: list[str], out: list[Event]) -> None:
        assert self.witness is not None
        if has_block(out):
            self.witness = None  # the script maps this API's text: nothing more to watch
            return
        self.witness.feed_payloads(payloads)
        judge_events(
            out,
            self.witness,
            "transform_stream_chunk",
            provider=self.mapper.provider,
            adapter=self.name,
        )

    def _map(self, payloads: list[str], out: list[Event]) -> None:
        if self.mapper.finished or not payloads:
            return
        mapper = self.mapper
        try:
            end = payloads.index("[DONE]")  # the end marker: what follows it is ignored
        except ValueError:
            end = len(payloads)
        items = payloads[:end]
        # parsed: what json.encode wrote comes back as dicts, from one json.loads per read
        results, error = self.sandbox.call_each("transform_stream_chunk", items, parsed=True)
        feed = mapper.feed
        # The mapper finishes only by mapper.finish(), which returns at once below: checked
        # once above, not per result.
        for result in results:
            if not result:  # "" (or nil): the script skipped this payload; {} maps to nothing
                continue
            if type(result) is dict:
                chunk = result
            else:
                chunk = json_object_output(result, self.name, "transform_stream_chunk")
            out += feed(chunk)
            if chunk.get("done") is True:  # the script's own end marker (message_stop, ...)
                out.extend(mapper.finish())
                return
        if error is not None:
            raise blame_provider_if_not_json(error, items[len(results)])
        if end < len(payloads) and not mapper.finished:
            mapper.mark_end()
            out.extend(mapper.finish())

    def end(self) -> list[Event]:
        if self.mapper.finished:
            return []
        error, self.pending = self.pending, None
        out = self.mapper.finish(error)
        if self.witness is not None:
            self._watch([], out)
        return out

    async def whole(self, body: bytes) -> list[Event]:
        return await amap_whole_body(
            self.sandbox, body, provider=self.options.provider, adapter=self.name
        )

    def fail(self, error: LlmError) -> list[Event] | None:
        if self.mapper.finished:
            return None
        return self.mapper.finish(error)

    def refine(self, error: LlmError, body: bytes) -> LlmError:
        return with_max_tokens_hint(error, body, self.options)
