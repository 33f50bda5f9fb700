"""The Lua adapter contract's response side, in pure Python: unified chunks -> protocol events.

No I/O. :class:`ChunkMapper` turns the *unified stream chunks* a script's
``transform_stream_chunk`` returns into protocol events obeying the five stream rules;
:func:`map_response` does the same for the unified non-stream response of
``transform_response``. The request side (``GenerateOptions`` -> the *kernel request* JSON a
script's ``transform_request`` receives) is :mod:`notebook_llm.adapters.lua.kernel_request`; its
:func:`build_request` is re-exported here for the callers that import it from this module.

Unified stream chunk (every field optional)::

    {content, reasoning_content, done, finish_reason,
     tool_call:  {id, type, name, arguments: <object or JSON text fragment>},
     tool_calls: [ {index, id, type, function: {name, arguments: <fragment>}}      # OpenAI delta
                 | {stream_index, id, type, name, raw_arguments: <fragment>}       # kernel shape
                 | {id, type, name, arguments: <object or string>} ],              # whole call
     usage: {prompt, completion, total, cache_read, cache_miss, cache_write, reasoning_tokens},
     error: {message, code, status} | "message"}                                 # our extension

Decisions (the contract is silent or the reference kernel is wrong; the request side's are in
:mod:`notebook_llm.adapters.lua.kernel_request`):

* Tool calls are matched by ``stream_index``/``index``, then ``id``; an entry with neither is a
  new call when it carries a name or an object ``arguments`` (a whole call), else the
  continuation of the last call. An ``index`` that matches a call with a *different* given id
  starts a new call (servers that number every parallel call 0). Missing ids become
  ``call_<n>``. A call's ``block-start`` waits for its name, so the first delta carries it.
* Empty tool arguments (Anthropic's ``partial_json: ""`` for a no-argument tool) stay ``""`` in
  the deltas and the block, so folding the deltas gives the block; ``ToolCallBlock.args`` reads
  ``""`` as ``{}``, and it is never reported as truncated.
* Usage frames merge field by field. ``prompt`` is the total input (cache reads included, OpenAI
  semantics); when ``completion`` is missing it is ``total - prompt``. ``cache_miss`` is
  accepted and ignored (it is part of ``prompt``). OpenAI's and Anthropic's names of the same
  counts (``prompt_tokens``, ``input_tokens``, ``completion_tokens``, ...) are accepted as
  them (:mod:`.usage_keys`).
* A finish reason is read through the vocabulary of finish meanings
  (:mod:`.finish_vocabulary`): stop, length (``max-tokens``), tool calls, and content filter
  or error (an ``error`` finish whose code is the value upper-cased); a progress value
  (``null``, ``in_progress``) is no finish; a value outside the vocabulary ends the answer
  with a finish of kind ``other`` that keeps the answer and the raw value.
* A finish reason without any content (llama.cpp's empty answer: a role chunk, then
  ``finish_reason: "stop"``) is an empty answer: ``finish`` stop with no blocks. Only a stream
  with neither content nor a finish reason is ``EMPTY_RESPONSE`` (retryable): the server ended
  the stream early (llama-cpp-python's does when the next request arrives), and says so.
* The ``error`` field ends the stream with ``finish{kind:'error'}``. Its code: ``status`` maps
  like an HTTP status; a provider code/type maps to ours where one fits (``overloaded_error`` ->
  ``SERVER``, ``rate_limit_error`` -> ``RATE_LIMIT``, ...), else is upper-cased; with neither
  the code is ``SERVER`` (an error event after a 200 is a server-side failure, retryable). The
  provider's own code is kept in ``details['provider_code']``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ...core.errors import ErrorCode, LlmError, code_for_status
from ...core.protocol import (
    Block,
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    FinishKind,
    FinishReason,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)
from ...core.redaction import redact, shorten
from .finish_vocabulary import FinishMeaning, finish_meaning, is_progress
from .kernel_request import build_request
from .usage_keys import USAGE_FIELDS, usage_field

__all__ = ["FINISH_KINDS", "ChunkMapper", "build_request", "map_response"]

# --------------------------------------------------------------------------------------------
# Stream chunks -> events

#: A finish meaning (:mod:`.finish_vocabulary`) -> the finish kind it ends the stream with
#: (content filter and error end it as an ``error`` whose code is the raw value upper-cased).
FINISH_KINDS: dict[FinishMeaning, FinishKind] = {
    "stop": "stop",
    "tool_calls": "tool-calls",
    "length": "max-tokens",
    "content_filter": "error",
    "error": "error",
}

_PROVIDER_CODES: dict[str, str] = {
    "overloaded_error": ErrorCode.SERVER,
    "api_error": ErrorCode.SERVER,
    "server_error": ErrorCode.SERVER,
    "internal": ErrorCode.SERVER,
    "unavailable": ErrorCode.SERVER,
    "rate_limit_error": ErrorCode.RATE_LIMIT,
    "rate_limit_exceeded": ErrorCode.RATE_LIMIT,
    "resource_exhausted": ErrorCode.RATE_LIMIT,
    "insufficient_quota": ErrorCode.QUOTA,
    "authentication_error": ErrorCode.AUTH,
    "permission_error": ErrorCode.AUTH,
    "invalid_api_key": ErrorCode.AUTH,
    "invalid_request_error": ErrorCode.INVALID_REQUEST,
    "context_length_exceeded": ErrorCode.CONTEXT_WINDOW_EXCEEDED,
    "not_found_error": ErrorCode.NOT_FOUND,
    "model_not_found": ErrorCode.NOT_FOUND,
}

_KNOWN_CODES = frozenset(c.value for c in ErrorCode)
#: What a provider's own code may look like to become ours (upper-cased): a short name, not
#: a sentence, markup or a pasted value.
_CODE_SHAPE = re.compile(r"[A-Z][A-Z0-9_.-]{0,63}")


class _Call:
    """One tool call being streamed; ``index`` is -1 until its block has started."""

    __slots__ = ("given_id", "id", "index", "name", "parts")

    def __init__(self, call_id: str, given_id: bool, name: str | None) -> None:
        self.id = call_id
        self.given_id = given_id
        self.name = name
        self.index = -1
        self.parts: list[str] = []


def _as_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # an infinity is no count either
        return None


def _bad_field(field: str, value: Any) -> LlmError:
    return LlmError(
        f"unified chunk field {field!r} has an unexpected value {value!r}", ErrorCode.ADAPTER_ERROR
    )


class ChunkMapper:
    """Maps unified stream chunks onto protocol events (one instance per stream).

    Call :meth:`feed` per chunk, :meth:`mark_end` when the framing's end marker (SSE
    ``[DONE]``) is seen, and :meth:`finish` once at the end; every call returns the new events.
    """

    __slots__ = (
        "_adapter",
        "_by_id",
        "_by_index",
        "_calls",
        "_end_seen",
        "_error",
        "_finish_reason",
        "_finished",
        "_last_call",
        "_next_index",
        "_provider",
        "_reasoning_index",
        "_reasoning_parts",
        "_text_index",
        "_text_parts",
        "_usage",
    )

    def __init__(self, provider: str | None = None, adapter: str | None = None) -> None:
        self._provider = provider
        self._adapter = adapter
        self._next_index = 0
        self._text_index = -1
        self._text_parts: list[str] = []
        self._reasoning_index = -1
        self._reasoning_parts: list[str] = []
        self._calls: list[_Call] = []
        self._by_index: dict[Any, _Call] = {}
        self._by_id: dict[str, _Call] = {}
        self._last_call: _Call | None = None
        self._usage: dict[str, int] = {}
        self._finish_reason: str | None = None
        self._error: LlmError | None = None
        self._end_seen = False
        self._finished = False

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def provider(self) -> str | None:
        """The provider named in this stream's errors."""
        return self._provider

    def mark_end(self) -> None:
        """Record a framing-level end marker (e.g. SSE ``data: [DONE]``)."""
        self._end_seen = True

    # -- feeding ------------------------------------------------------------------------------

    def feed(self, chunk: Mapping[str, Any]) -> list[Event]:
        """Events for one unified chunk (often one delta, sometimes none; none after finish)."""
        if self._finished:
            return []
        if len(chunk) == 1 and self._text_index >= 0:  # the common chunk: more text
            value = chunk.get("content")
            if value and type(value) is str:
                self._text_parts.append(value)
                return [TextDelta(self._text_index, value)]
        out: list[Event] = []
        get = chunk.get
        value = get("reasoning_content")
        if value:
            if not isinstance(value, str):
                raise _bad_field("reasoning_content", value)
            if self._reasoning_index < 0:
                self._reasoning_index = self._next_index
                self._next_index += 1
                out.append(BlockStart(self._reasoning_index, "reasoning"))
            self._reasoning_parts.append(value)
            out.append(ReasoningDelta(self._reasoning_index, value))
        value = get("content")
        if value:
            if not isinstance(value, str):
                raise _bad_field("content", value)
            if self._text_index < 0:
                self._text_index = self._next_index
                self._next_index += 1
                out.append(BlockStart(self._text_index, "text"))
            self._text_parts.append(value)
            out.append(TextDelta(self._text_index, value))
        value = get("tool_call")
        if value:
            self._tool_entry(value, out)
        value = get("tool_calls")
        if value:
            if not isinstance(value, list):
                raise _bad_field("tool_calls", value)
            for entry in value:
                self._tool_entry(entry, out)
        value = get("usage")
        if value:
            self._merge_usage(value)
        value = get("finish_reason")
        if value and not (isinstance(value, str) and is_progress(value)):
            self._finish_reason = str(value)
            self._end_seen = True
        value = get("error")
        if value:
            self._error = self._chunk_error(value)
        if get("done"):
            self._end_seen = True
        return out

    def _tool_entry(self, entry: Any, out: list[Event]) -> None:
        if not isinstance(entry, Mapping):
            raise _bad_field("tool_calls", entry)
        function = entry.get("function")
        if isinstance(function, Mapping):
            name = function.get("name")
            args = function.get("arguments")
        else:
            name = entry.get("name")
            args = entry.get("raw_arguments")
            if args is None:
                args = entry.get("arguments")
        key = entry.get("stream_index")
        if key is None:
            key = entry.get("index")
        raw_id = entry.get("id")
        call_id = str(raw_id) if raw_id else None
        whole = isinstance(args, Mapping | list)
        call: _Call | None = None
        if key is not None:
            call = self._by_index.get(key)
            if call is not None and call_id and call.given_id and call.id != call_id:
                call = None
        if call is None and call_id:
            call = self._by_id.get(call_id)
        if call is None and key is None and not call_id and not name and not whole:
            call = self._last_call
        if call is None:
            call = self._new_call(call_id, name)
        if key is not None:
            self._by_index[key] = call
        self._last_call = call
        if whole:
            fragment = json.dumps(args, ensure_ascii=False, separators=(",", ":")) if args else "{}"
        elif args is None:
            fragment = ""
        elif isinstance(args, str):
            fragment = args
        else:
            raise _bad_field("tool call arguments", args)
        if call.index >= 0:
            if fragment:
                call.parts.append(fragment)
                out.append(ToolCallDelta(call.index, call.id, fragment))
            return
        if fragment:
            call.parts.append(fragment)
        if name and not call.name:
            call.name = str(name)
        if call.name:
            self._start_call(call, out)

    def _new_call(self, call_id: str | None, name: Any) -> _Call:
        if call_id:
            call = _Call(call_id, True, str(name) if name else None)
            self._by_id[call.id] = call
        else:
            call = _Call(f"call_{len(self._calls)}", False, str(name) if name else None)
        self._calls.append(call)
        return call

    def _start_call(self, call: _Call, out: list[Event]) -> None:
        call.index = self._next_index
        self._next_index += 1
        out.append(BlockStart(call.index, "tool-call"))
        out.append(ToolCallDelta(call.index, call.id, "".join(call.parts), call.name or ""))

    def _merge_usage(self, frame: Any) -> None:
        if not isinstance(frame, Mapping):
            raise _bad_field("usage", frame)
        usage = self._usage
        # the contract's own keys last, so they win over an alias of the same count
        for key, value in sorted(frame.items(), key=lambda kv: str(kv[0]) in USAGE_FIELDS):
            field = usage_field(str(key))
            number = _as_int(value) if field is not None else None
            if field is not None and number is not None:
                usage[field] = number

    def _chunk_error(self, value: Any) -> LlmError:
        if isinstance(value, str):
            return LlmError(value, ErrorCode.SERVER, provider=self._provider, adapter=self._adapter)
        if not isinstance(value, Mapping):
            raise _bad_field("error", value)
        message = str(value.get("message") or "the provider reported an error in the stream")
        status = _as_int(value.get("status"))
        raw = value.get("code") or value.get("type")
        # redacted before it is upper-cased into our code (an upper-cased key is not found)
        provider_code = redact(str(raw)) if raw is not None else None
        if provider_code and provider_code.upper() in _KNOWN_CODES:
            code: str = provider_code.upper()
        elif provider_code and provider_code.lower() in _PROVIDER_CODES:
            code = _PROVIDER_CODES[provider_code.lower()]
        elif status is not None:
            code = code_for_status(status, message)
        elif provider_code and _CODE_SHAPE.fullmatch(provider_code.upper()):
            code = provider_code.upper()
        else:
            code = ErrorCode.SERVER
        return LlmError(
            message,
            code,
            status=status,
            provider=self._provider,
            adapter=self._adapter,
            details={"provider_code": provider_code} if provider_code else None,
        )

    # -- finishing ----------------------------------------------------------------------------

    def finish(self, error: LlmError | None = None) -> list[Event]:
        """Close every block (content kept), then emit ``usage`` (if any) and ``finish``.

        ``error`` (e.g. a transport failure) takes precedence over what the stream said.
        A second call returns no events.
        """
        if self._finished:
            return []
        self._finished = True
        out: list[Event] = []
        for call in self._calls:  # a call that never got a name still gets its block
            if call.index < 0:
                self._start_call(call, out)
        ends: list[tuple[int, Block]] = []
        if self._text_index >= 0:
            ends.append((self._text_index, TextBlock("".join(self._text_parts))))
        if self._reasoning_index >= 0:
            ends.append((self._reasoning_index, ReasoningBlock("".join(self._reasoning_parts))))
        tool_blocks = [ToolCallBlock(c.id, c.name or "", "".join(c.parts)) for c in self._calls]
        ends.extend((c.index, b) for c, b in zip(self._calls, tool_blocks, strict=True))
        ends.sort(key=lambda pair: pair[0])
        out.extend(BlockEnd(index, block) for index, block in ends)
        usage = self._token_usage()
        if usage is not None:
            out.append(Usage(usage))
        out.append(Finish(self._finish_reason_for(error, bool(ends), tool_blocks)))
        return out

    def _token_usage(self) -> TokenUsage | None:
        u = self._usage
        if not u:
            return None
        prompt = u.get("prompt", 0)
        completion = u.get("completion")
        if completion is None:
            total = u.get("total")
            completion = max(total - prompt, 0) if total is not None else 0
        return TokenUsage(
            prompt, completion, u.get("cache_read"), u.get("cache_write"), u.get("reasoning_tokens")
        )

    def _fail(self, message: str, code: str) -> LlmError:
        return LlmError(message, code, provider=self._provider, adapter=self._adapter)

    def _finish_reason_for(
        self, error: LlmError | None, any_block: bool, tool_blocks: list[ToolCallBlock]
    ) -> FinishReason:
        err = error or self._error
        if err is not None:
            return Finish.error(err).reason
        if not self._end_seen:
            return FinishReason(
                "error",
                self._fail(
                    "the stream ended without its end marker (connection closed early); "
                    "the partial answer is kept",
                    ErrorCode.STREAM_CLOSED,
                ),
            )
        raw = self._finish_reason
        kind: FinishKind | None = None
        if raw is not None:
            meaning = finish_meaning(raw)
            if meaning is None:
                # Outside the vocabulary: the answer stands, and the value is kept to be shown
                # (the conformance kit warns about it).
                return FinishReason("other", raw=shorten(redact(raw), 64, "..."))
            kind = FINISH_KINDS[meaning]
            if kind == "error":
                shaped = "".join(ch if ch.isalnum() else "_" for ch in redact(raw).upper())
                code = shaped if _CODE_SHAPE.fullmatch(shaped) else ErrorCode.SERVER
                err = self._fail(f"the model stopped with finish reason {raw!r}", code)
                err.details["finish_meaning"] = meaning
                return FinishReason("error", err)
        if not any_block and kind is None:
            # Nothing at all: no content and no finish reason, only the end marker. A model that
            # says "stop" without text has answered nothing, which is an answer (finish stop,
            # empty text), not a failure to retry. This is a server that ended the stream early:
            # llama-cpp-python's cuts the running stream ([DONE], no finish reason) when the
            # next request arrives, unless started with --interrupt_requests False.
            return FinishReason(
                "error",
                self._fail(
                    "the server ended the stream early: it sent the end marker with no content "
                    "and no finish reason. A local server answering one request at a time does "
                    "this when another request arrives (llama-cpp-python: start it with "
                    "--interrupt_requests False, see 'Local models' in the README)",
                    ErrorCode.EMPTY_RESPONSE,
                ),
            )
        if tool_blocks and kind in (None, "stop"):
            return FinishReason("tool-calls")
        if kind == "max-tokens":
            for block in tool_blocks:
                if not _complete_json_object(block.arguments):
                    return FinishReason(
                        "max-tokens",
                        self._fail(
                            f"the arguments of tool call {block.name} ({block.id}) were cut off by "
                            f"max_tokens after {len(block.arguments)} characters; the raw text is "
                            "kept in the block. Raise max_tokens and retry.",
                            ErrorCode.MALFORMED_RESPONSE,
                        ),
                    )
        return FinishReason(kind or "stop")


def _complete_json_object(text: str) -> bool:
    if not text.strip():
        return True  # a no-argument tool
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


# --------------------------------------------------------------------------------------------
# Non-stream responses


def map_response(
    resp: Mapping[str, Any], provider: str | None = None, adapter: str | None = None
) -> list[Event]:
    """The events of a unified non-stream response (``transform_response``'s output).

    ``{content, reasoning_content?, finish_reason?, token_usage?, tool_calls?: [{id, type, name,
    arguments}], error?}``; each listed tool call is a separate call, even without ids.
    """
    mapper = ChunkMapper(provider, adapter)
    chunk: dict[str, Any] = {
        "content": resp.get("content"),
        "reasoning_content": resp.get("reasoning_content"),
        "usage": resp.get("token_usage") or resp.get("usage"),
        "finish_reason": resp.get("finish_reason"),
        "error": resp.get("error"),
        "done": True,
    }
    calls = resp.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise _bad_field("tool_calls", calls)
        entries: list[Any] = []
        for position, call in enumerate(calls):
            if (
                isinstance(call, Mapping)
                and call.get("index") is None
                and call.get("stream_index") is None
            ):
                call = {**call, "stream_index": position}
            entries.append(call)
        chunk["tool_calls"] = entries
    events = mapper.feed(chunk)
    events.extend(mapper.finish())
    return events
