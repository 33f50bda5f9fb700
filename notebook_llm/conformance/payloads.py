"""Warnings: a script that passes every rule of the stream yet loses the answer.

The mistake a truthy JSON-null sentinel caused in kernel scripts (``done = (fr ~= nil)`` read
every chunk as done) breaks none of the five stream rules, so :mod:`.report`'s verdict cannot
see it. Here each payload of a 200 body is also run through the hook on its own, in one fresh
Lua state (as one stream would), and the kit warns when the script reports ``done`` (or a
finish) while a later payload still carries content, when payloads carried content and the
script mapped none of it, or when output tokens were counted but no text, reasoning or tool call
came out. A warning names the hook and the payload number (1-based, ``[DONE]`` not counted);
``check-adapter --strict`` fails on one. "Carries content" is judged by key names common to the
provider APIs (``CONTENT_KEYS``), so this is a heuristic: a warning, never a failure.

A body whose text is all dropped is not a warning but a failure, found by the engine itself
(:mod:`notebook_llm.adapters.lua.dropped_text`), so the cell fails too. What stays a warning is a partial
loss that leaves an answer standing:

* the body carries reasoning (``reasoning``, ``reasoning_content``, ``thinking``) and the
  script mapped text but no reasoning: the answer is right, the thinking view is empty;
* the body reports usage (``usage``, ``usageMetadata``, Ollama's ``eval_count``) and the script
  mapped none: the answer is right, token counts and costs are missing;
* the script's usage object holds keys the runtime does not read (``n_in``, ``input``): each is
  named (the contract's keys and OpenAI's and Anthropic's names of them are read, see
  :mod:`notebook_llm.adapters.lua.usage_keys`);
* the answer ended with a finish reason outside the vocabulary of finish meanings: it is kept,
  as finish ``other``, and the raw value is named so the script can map it.
"""

from __future__ import annotations

import json
from typing import Any

from ..adapters.lua.dropped_text import CONTENT_KEYS
from ..adapters.lua.lua_adapter import LuaAdapter
from ..adapters.lua.runtime import LuaSandbox
from ..adapters.lua.usage_keys import unknown_usage_keys
from ..core.completion import Completion
from ..core.errors import LlmError
from ..wire.ndjson import NDJSONDecoder
from ..wire.sse import SSEDecoder
from .fixtures import Fixture

__all__ = ["payload_warnings"]

#: Keys whose non-empty object value is a tool call's arguments (Gemini ``args``, Ollama
#: ``arguments``, Anthropic ``input``), and keys that hold a tool call (its name is content).
_ARGS_KEYS = frozenset({"args", "arguments", "input"})
_CALL_KEYS = frozenset({"function", "functionCall"})


def _carries_content(value: Any, key: str = "", depth: int = 0) -> bool:
    """Whether a decoded payload holds answer content (see ``CONTENT_KEYS``)."""
    if depth > 32:
        return False
    if isinstance(value, str):
        return bool(value) and key in CONTENT_KEYS
    if isinstance(value, dict):
        if value and key in _ARGS_KEYS:
            return True
        name = value.get("name")
        named = isinstance(name, str) and bool(name)
        if named and (key in _CALL_KEYS or value.get("type") == "tool_use"):
            return True
        return any(_carries_content(v, str(k), depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return any(_carries_content(v, key, depth + 1) for v in value)
    return False


def _payloads(fixture: Fixture) -> list[str]:
    """A stream body's payloads as the adapter's hook gets them, up to the ``[DONE]`` marker."""
    try:
        if fixture.framing == "ndjson":
            nd = NDJSONDecoder()
            items = nd.feed(fixture.body) + nd.flush()
        else:
            sse = SSEDecoder()
            items = sse.feed_data(fixture.body) + sse.flush_data()
    except LlmError:
        return []
    if "[DONE]" in items:
        items = items[: items.index("[DONE]")]
    return items


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _mapped_content(chunk: Any) -> bool:
    """Whether a unified chunk the script returned holds any answer content."""
    if not isinstance(chunk, dict):
        return False
    for key in ("content", "reasoning_content"):
        if isinstance(chunk.get(key), str) and chunk[key]:
            return True
    return bool(chunk.get("tool_calls")) or bool(chunk.get("tool_call"))


def _reports_done(chunk: Any) -> bool:
    if not isinstance(chunk, dict):
        return False
    finish = chunk.get("finish_reason")
    return chunk.get("done") is True or (isinstance(finish, str) and finish != "")


#: Keys whose non-blank string is reasoning ("thinking") text.
_REASONING_KEYS = frozenset({"reasoning", "reasoning_content", "thinking"})
#: Keys that hold a provider's token counts.
_USAGE_KEYS = frozenset({"usage", "usageMetadata", "eval_count", "prompt_eval_count"})


def _field_with(value: Any, keys: frozenset[str], path: str = "", depth: int = 0) -> str | None:
    """The path of the first field under one of ``keys`` holding a non-blank string or a
    number / an object of numbers (usage), or ``None``."""
    if depth > 32:
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            here = f"{path}.{k}" if path else str(k)
            if k in keys and (
                (isinstance(v, str) and v.strip())
                or (isinstance(v, int | float) and not isinstance(v, bool) and v > 0)
                or (isinstance(v, dict) and any(isinstance(x, int) and x for x in v.values()))
            ):
                return here
            found = _field_with(v, keys, here, depth + 1)
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _field_with(v, keys, f"{path}[{i}]", depth + 1)
            if found:
                return found
    return None


def _partial_losses(decoded: list[Any], completion: Completion, hook: str) -> list[str]:
    """Warnings for reasoning or usage the body carried and the script did not map."""
    out: list[str] = []
    if completion.text and not completion.reasoning:
        for n, payload in enumerate(decoded, 1):
            where = _field_with(payload, _REASONING_KEYS)
            if where:
                out.append(
                    f"{hook}, payload {n}: the body carries reasoning in `{where}`, but the "
                    "script mapped none of it (the answer is kept; the reasoning is lost): map it "
                    "to reasoning_content"
                )
                break
    if completion.usage is None:
        for n, payload in enumerate(decoded, 1):
            where = _field_with(payload, _USAGE_KEYS)
            if where:
                out.append(
                    f"{hook}, payload {n}: the body reports token usage in `{where}`, but the "
                    "script mapped none (token counts and costs will be missing): map it to "
                    "usage / token_usage"
                )
                break
    return out


def payload_warnings(
    adapter: LuaAdapter, fixture: Fixture, completion: Completion | None = None
) -> list[str]:
    """Warnings for a 200 body: the script ended early, dropped everything, or counted output
    tokens without output (see the module doc). Each payload goes through the hook on its own,
    in one fresh Lua state (as one stream would), so payloads after an early ``done`` are seen.
    """
    warnings: list[str] = []
    sandbox = LuaSandbox(
        adapter.source,
        name=adapter.name,
        chunkname=str(adapter.path) if adapter.path else adapter.name,
        limits=adapter.limits,
        log=lambda _level, _msg: None,
    )
    if fixture.framing == "json":
        hook = "transform_response"
        text = fixture.body.decode("utf-8", errors="replace")
        decoded = [_loads(text)]
        held = _carries_content(decoded[0])
        first = 1
        mapped = completion is not None and bool(
            completion.text or completion.reasoning or completion.tool_calls
        )
        try:
            out = sandbox.call(hook, text)
        except LlmError:  # the replay reports it
            out = None
        response = _loads(out) if isinstance(out, str) else None
        if isinstance(response, dict):
            usage = response.get("token_usage") or response.get("usage")
            warnings.extend(_usage_key_warnings([usage], hook, "the response"))
    else:
        hook = "transform_stream_chunk"
        items = _payloads(fixture)
        decoded = [_loads(item) for item in items]
        results, _error = sandbox.call_each(hook, items)  # an error is the replay's to report
        content_at = [i + 1 for i, item in enumerate(decoded) if _carries_content(item)]
        held = bool(content_at)
        first = content_at[0] if content_at else 0
        chunks = [_loads(r) if isinstance(r, str) and r else None for r in results]
        mapped = any(_mapped_content(c) for c in chunks)
        frames = [c.get("usage") if isinstance(c, dict) else None for c in chunks]
        warnings.extend(_usage_key_warnings(frames, hook, "payload"))
        done_at = next((i + 1 for i, c in enumerate(chunks) if _reports_done(c)), None)
        later = [i for i in content_at if done_at is not None and i > done_at]
        if later:
            warnings.append(
                f"{hook}, payload {done_at}: the script reported done (or a finish) here, but "
                f"payload {later[0]} still carries content ({len(later)} such payload(s) are "
                "lost); does it read a field that arrives as null as set?"
            )
    if held and not mapped:
        warnings.append(
            f"{hook}, payload {first}: the body carries content from here on, but the script "
            "mapped none of it to text, reasoning or tool calls; does it read a field this API "
            "does not send?"
        )
    usage = completion.usage if completion is not None else None
    if (
        completion is not None
        and usage is not None
        and (usage.output_tokens or 0) > (usage.reasoning_tokens or 0)
        and not (completion.text or completion.reasoning or completion.tool_calls)
        and not (held and not mapped)  # already said
    ):
        warnings.append(
            f"{hook}: {usage.output_tokens} output tokens were counted but no text, reasoning "
            "or tool call came out"
        )
    if completion is not None and completion.error is None:
        warnings.extend(_partial_losses(decoded, completion, hook))
    finish = completion.finish if completion is not None else None
    if finish is not None and finish.kind == "other":
        warnings.append(
            f"{hook}: the answer ended with finish reason {finish.raw!r}, which is outside the "
            "vocabulary of finish meanings (stop, length, tool calls, content filter, error): "
            "it is kept as finish 'other'; map it to stop, length, tool_calls, content_filter "
            "or error if you know what it means"
        )
    return warnings


def _usage_key_warnings(frames: list[Any], hook: str, where: str) -> list[str]:
    """One warning naming the usage keys the runtime ignores, at the first frame that has any."""
    for n, frame in enumerate(frames, 1):
        if not isinstance(frame, dict):
            continue
        unknown = unknown_usage_keys(frame)
        if unknown:
            at = f"{where} {n}" if where == "payload" else where
            return [
                f"{hook}, {at}: the usage holds {', '.join(repr(k) for k in unknown[:6])}, "
                "which the runtime does not read (its keys: prompt, completion, total, "
                "cache_read, cache_write, reasoning_tokens; OpenAI's prompt_tokens... and "
                "Anthropic's input_tokens... are read too): those counts are lost"
            ]
    return []
