"""What comes back to a Lua adapter: hook results, a whole body, and failures, as one-liners.

* :func:`json_object_output` parses what ``transform_stream_chunk`` / ``transform_response``
  returned (a JSON object, fast path through the C scanner) or says what the hook must return;
* :func:`map_whole_body` maps a whole (non-stream) 200 body through ``transform_response`` to
  protocol events; the stream path and the conformance kit's replay share it;
* :func:`blame_provider_if_not_json` turns a hook's failure on a payload that is not JSON into
  the provider's ``MALFORMED_RESPONSE`` (the script is not at fault).

Bodies are read (within their caps) and transport failures mapped by the exchange
(:mod:`notebook_llm.wire.exchange`), never here.
"""

from __future__ import annotations

import json
import json.scanner
from typing import Any, cast

from ...core.errors import ErrorCode, LlmError
from ...core.protocol import Event
from ...core.redaction import shorten
from .chunk_mapping import map_response
from .dropped_text import DroppedText, has_block, judge_events
from .runtime import LuaSandbox


def map_whole_body(sandbox: LuaSandbox, raw: bytes, *, provider: str, adapter: str) -> list[Event]:
    """A whole (non-stream) body -> ``transform_response`` -> protocol events; a body that held
    text mapped to no block ends in the script's error (:mod:`.dropped_text`)."""
    text = raw.decode("utf-8", errors="replace")
    try:
        out = sandbox.call("transform_response", text)
    except LlmError as err:
        raise blame_provider_if_not_json(err, text) from None
    return _whole_body_events(out, text, provider=provider, adapter=adapter)


async def amap_whole_body(
    sandbox: LuaSandbox, raw: bytes, *, provider: str, adapter: str
) -> list[Event]:
    """:func:`map_whole_body` with the hook awaited (its ``http_get`` on the stream's transport)."""
    text = raw.decode("utf-8", errors="replace")
    try:
        out = await sandbox.acall("transform_response", text)
    except LlmError as err:
        raise blame_provider_if_not_json(err, text) from None
    return _whole_body_events(out, text, provider=provider, adapter=adapter)


def _whole_body_events(out: Any, text: str, *, provider: str, adapter: str) -> list[Event]:
    resp = json_object_output(out, adapter, "transform_response")
    events = map_response(resp, provider=provider, adapter=adapter)
    if not has_block(events):  # an answer with nothing in it: did the body hold text?
        witness = DroppedText()
        witness.feed_payloads([text])
        judge_events(events, witness, "transform_response", provider=provider, adapter=adapter)
    return events


def blame_provider_if_not_json(err: LlmError, payload: str) -> LlmError:
    """A hook that failed on a payload that is not JSON: the provider's fault, not the script's."""
    if err.code != ErrorCode.ADAPTER_ERROR:
        return err
    try:
        json.loads(payload)
    except ValueError:
        return LlmError(
            f"the provider sent a body or stream line that is not valid JSON: {shorten(payload, 200)!r} "
            f"(the adapter said: {err.message})",
            ErrorCode.MALFORMED_RESPONSE,
            adapter=err.adapter,
            hook=err.hook,
            lua_line=err.lua_line,
        )
    return err


# The C scanner behind json.loads, called directly: a hook's result is almost always a bare
# object that json.encode wrote, and skipping json.loads' wrappers (type checks, the whitespace
# regex) saves a good part of its cost per stream chunk. Anything else returns None and takes
# the full json.loads path, which gives the same value or the error to report.
_scan_once = json.scanner.make_scanner(cast(Any, json.JSONDecoder()))


def _scan_object(text: str) -> dict[str, Any] | None:
    if not isinstance(text, str) or text[:1] != "{":
        return None
    try:
        value, end = _scan_once(text, 0)
    except (StopIteration, ValueError):
        return None
    if end != len(text) or not isinstance(value, dict):
        return None
    return value


def json_object_output(value: Any, adapter: str, hook: str) -> dict[str, Any]:
    """A hook's result parsed as a JSON object, or ``ADAPTER_ERROR`` saying what was expected."""
    scanned = _scan_object(value)  # the common case, without json.loads' wrappers
    if scanned is not None:
        return scanned
    parsed = _parse_json_output(value, adapter, hook)
    if not isinstance(parsed, dict):
        skip = ' or ""' if hook == "transform_stream_chunk" else ""
        raise LlmError(
            f"adapter {adapter!r}: {hook} must return a JSON object{skip}",
            ErrorCode.ADAPTER_ERROR,
            adapter=adapter,
            hook=hook,
        )
    return parsed


def _parse_json_output(value: Any, adapter: str, hook: str) -> Any:
    if isinstance(value, dict | list):
        return value
    if not isinstance(value, str):
        raise LlmError(
            f"adapter {adapter!r}: {hook} must return a JSON string, got {type(value).__name__}",
            ErrorCode.ADAPTER_ERROR,
            adapter=adapter,
            hook=hook,
        )
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise LlmError(
            f"adapter {adapter!r}: {hook} returned invalid JSON ({exc.msg} at {exc.pos}): {shorten(value, 200)!r}",
            ErrorCode.ADAPTER_ERROR,
            adapter=adapter,
            hook=hook,
        ) from None
