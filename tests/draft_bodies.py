"""Bodies of made-up APIs for the drafter's pair tests: each API writes a body for a given
answer, finish value and token counts, so a test can draft from one body and replay another one
the drafter never saw (another text, another finish value, other counts).

The shapes are varied on purpose (event-typed SSE, nested NDJSON, cumulative text, plain JSON,
unusual finish and usage names, a numeric status end, a done flag, bare words); several are
modelled on public APIs that no built-in adapter covers, written from their documented shapes
(no recorded body of theirs is copied here).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["API", "APIS", "Answer", "ndjson", "sse"]


def sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for event, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {event}\n" if event else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def ndjson(lines: list[Any]) -> bytes:
    return "".join(json.dumps(x) + "\n" for x in lines).encode()


@dataclass(frozen=True)
class Answer:
    """What a body says: the text pieces, a finish value, input and output counts, reasoning."""

    pieces: tuple[str, ...]
    finish: str
    counts: tuple[int, int]
    thinking: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return "".join(self.pieces)


Maker = Callable[[Answer], bytes]


@dataclass(frozen=True)
class API:
    name: str
    make: Maker
    #: two (finish value, the finish kind the runtime must end the answer with)
    finishes: tuple[tuple[str, str], tuple[str, str]]
    #: the API streams words without spaces: the draft adds one after each
    words: bool = False
    has_reasoning: bool = False


# ---------------------------------------------------------------- the APIs


def responses_like(a: Answer) -> bytes:
    """Event-typed SSE (OpenAI Responses-like): the end event differs with the finish."""
    rid = "resp_1"
    events: list[tuple[str | None, Any]] = [
        (
            "response.created",
            {"type": "response.created", "response": {"id": rid, "status": "in_progress"}},
        ),
    ]
    for p in a.thinking:
        events.append(
            (
                "response.reasoning_text.delta",
                {"type": "response.reasoning_text.delta", "item_id": "rs_1", "delta": p},
            )
        )
    for p in a.pieces:
        events.append(
            (
                "response.output_text.delta",
                {"type": "response.output_text.delta", "item_id": "msg_1", "delta": p},
            )
        )
    status = {"max_output_tokens": "incomplete", "failed": "failed"}.get(a.finish, "completed")
    final: dict[str, Any] = {
        "id": rid,
        "status": status,
        "usage": {
            "input_tokens": a.counts[0],
            "output_tokens": a.counts[1],
            "total_tokens": sum(a.counts),
        },
    }
    if status == "incomplete":
        final["incomplete_details"] = {"reason": a.finish}
    events.append((f"response.{status}", {"type": f"response.{status}", "response": final}))
    return sse(events)


def cohere_like(a: Answer) -> bytes:
    """Event-typed SSE with hyphens (Cohere v2-like): usage under delta.usage.billed_units."""
    events: list[tuple[str | None, Any]] = [(None, {"type": "message-start", "id": "m1"})]
    events.append(
        (
            None,
            {
                "type": "content-start",
                "index": 0,
                "delta": {"message": {"content": {"type": "text", "text": ""}}},
            },
        )
    )
    for p in a.pieces:
        events.append(
            (
                None,
                {
                    "type": "content-delta",
                    "index": 0,
                    "delta": {"message": {"content": {"text": p}}},
                },
            )
        )
    events.append((None, {"type": "content-end", "index": 0}))
    events.append(
        (
            None,
            {
                "type": "message-end",
                "delta": {
                    "finish_reason": a.finish,
                    "usage": {
                        "billed_units": {"input_tokens": a.counts[0], "output_tokens": a.counts[1]}
                    },
                },
            },
        )
    )
    return sse(events)


def tgi_like(a: Answer) -> bytes:
    """SSE (TGI-like): token.text per payload; the last repeats the whole text with details."""
    events: list[tuple[str | None, Any]] = []
    for i, p in enumerate(a.pieces):
        last = i == len(a.pieces) - 1
        events.append(
            (
                None,
                {
                    "index": i,
                    "token": {"id": 100 + i, "text": p, "logprob": -0.5, "special": False},
                    "generated_text": a.text if last else None,
                    "details": (
                        {
                            "finish_reason": a.finish,
                            "prefill_tokens": a.counts[0],
                            "generated_tokens": a.counts[1],
                        }
                        if last
                        else None
                    ),
                },
            )
        )
    return sse(events)


def dashscope_like(a: Answer) -> bytes:
    """SSE of whole-text-so-far payloads, finish "null" while streaming, running usage."""
    events: list[tuple[str | None, Any]] = []
    so_far = ""
    for i, p in enumerate(a.pieces):
        so_far += p
        last = i == len(a.pieces) - 1
        events.append(
            (
                "result",
                {
                    "output": {"text": so_far, "finish_reason": a.finish if last else "null"},
                    "usage": {
                        "input_tokens": a.counts[0],
                        "output_tokens": 1 + (a.counts[1] - 1) * i // max(len(a.pieces) - 1, 1),
                    },
                    "request_id": "r-77",
                },
            )
        )
    return sse(events)


def spark_like(a: Answer) -> bytes:
    """Whole SSE payloads with a numeric status header (2 = the last), usage under
    payload.usage.text with question/prompt/completion/total tokens."""
    events: list[tuple[str | None, Any]] = []
    for i, p in enumerate(a.pieces):
        last = i == len(a.pieces) - 1
        payload: dict[str, Any] = {
            "choices": {
                "status": 2 if last else 1,
                "seq": i,
                "text": [{"content": p, "role": "assistant", "index": 0}],
            }
        }
        if last:
            payload["usage"] = {
                "text": {
                    "question_tokens": 2,
                    "prompt_tokens": a.counts[0],
                    "completion_tokens": a.counts[1],
                    "total_tokens": sum(a.counts),
                }
            }
        events.append(
            (
                None,
                {
                    "header": {
                        "code": 0,
                        "message": "Success",
                        "sid": "s1",
                        "status": 2 if last else (0 if i == 0 else 1),
                    },
                    "payload": payload,
                },
            )
        )
    return sse(events)


def ernie_like(a: Answer) -> bytes:
    """SSE with `result` pieces, an `is_end` flag and a finish_reason named only at the end."""
    events: list[tuple[str | None, Any]] = []
    for i, p in enumerate(a.pieces):
        last = i == len(a.pieces) - 1
        events.append(
            (
                None,
                {
                    "id": "as-1",
                    "object": "chat.completion",
                    "created": 1700000000,
                    "sentence_id": i,
                    "is_end": last,
                    "result": p,
                    "finish_reason": a.finish if last else "",
                    "usage": {
                        "prompt_tokens": a.counts[0],
                        "completion_tokens": a.counts[1],
                        "total_tokens": sum(a.counts),
                    }
                    if last
                    else None,
                },
            )
        )
    return sse(events)


def nested_ndjson(a: Answer) -> bytes:
    """NDJSON, the text deep inside, `meta.stop` set on the last line, tokens.{in,out}."""
    lines: list[Any] = [
        {
            "seq": i,
            "final": False,
            "data": {"message": {"segments": [{"text": p}]}},
            "meta": {"stop": None},
        }
        for i, p in enumerate(a.pieces)
    ]
    lines.append(
        {
            "seq": len(a.pieces),
            "final": True,
            "data": {"message": {"segments": []}},
            "meta": {"stop": a.finish},
            "tokens": {"in": a.counts[0], "out": a.counts[1]},
        }
    )
    return ndjson(lines)


def plain_json(a: Answer) -> bytes:
    """A non-stream body: typed output parts, a status, billing.{in_tokens,out_tokens}."""
    parts: list[Any] = [{"type": "reasoning", "value": t} for t in a.thinking]
    parts.append({"type": "text", "value": a.text})
    return json.dumps(
        {
            "id": "job-9",
            "result": {"output": parts, "status": a.finish},
            "billing": {"in_tokens": a.counts[0], "out_tokens": a.counts[1]},
        }
    ).encode()


def converse_like(a: Answer) -> bytes:
    """A non-stream body (Bedrock Converse-like): camelCase usage, stopReason."""
    return json.dumps(
        {
            "output": {"message": {"role": "assistant", "content": [{"text": a.text}]}},
            "stopReason": a.finish,
            "usage": {
                "inputTokens": a.counts[0],
                "outputTokens": a.counts[1],
                "totalTokens": sum(a.counts),
            },
            "metrics": {"latencyMs": 412},
        }
    ).encode()


def generation_ndjson(a: Answer) -> bytes:
    """NDJSON (Bedrock Llama-like): prompt_token_count on the first line, a running
    generation_token_count, stop_reason null until the end."""
    lines: list[Any] = []
    for i, p in enumerate(a.pieces):
        last = i == len(a.pieces) - 1
        lines.append(
            {
                "generation": p,
                "prompt_token_count": a.counts[0] if i == 0 else None,
                "generation_token_count": a.counts[1] if last else i + 1,
                "stop_reason": a.finish if last else None,
            }
        )
    return ndjson(lines)


def shout_like(a: Answer) -> bytes:
    """NDJSON of bare upper-case words, a done line with n_in / n_out and a `reason`."""
    lines: list[Any] = [{"word": w.upper()} for w in a.text.split()]
    lines.append({"done": True, "reason": a.finish, "n_in": a.counts[0], "n_out": a.counts[1]})
    return ndjson(lines)


def odd_names_sse(a: Answer) -> bytes:
    """data:-only SSE: `tok` pieces, a `fin` value at the end, usage {prompt, completion},
    no end marker after it."""
    events: list[tuple[str | None, Any]] = [
        (None, {"tok": p, "n": i}) for i, p in enumerate(a.pieces)
    ]
    events.append(
        (None, {"fin": a.finish, "usage": {"prompt": a.counts[0], "completion": a.counts[1]}})
    )
    return sse(events)


def cumulative_final(a: Answer) -> bytes:
    """Whole text so far on every payload; the last carries finish and usage; then [DONE]."""
    events: list[tuple[str | None, Any]] = []
    so_far = ""
    for p in a.pieces:
        so_far += p
        events.append((None, {"answer": {"text": so_far}, "finish": None}))
    events.append(
        (
            None,
            {
                "answer": {"text": so_far},
                "finish": a.finish,
                "stats": {"tokens_in": a.counts[0], "tokens_out": a.counts[1]},
            },
        )
    )
    events.append((None, "[DONE]"))
    return sse(events)


def thinking_events(a: Answer) -> bytes:
    """Event-typed SSE (Anthropic-like): thinking and text blocks, stop_reason in a delta
    event, input counts at the start, output counts at the end, a `message_stop` event."""
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "m",
                    "usage": {"input_tokens": a.counts[0], "output_tokens": 1},
                    "stop_reason": None,
                },
            },
        )
    ]
    for t in a.thinking:
        events.append(
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "thinking_delta", "thinking": t},
                },
            )
        )
    for p in a.pieces:
        events.append(
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "text_delta", "text": p},
                },
            )
        )
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": a.finish},
                "usage": {"output_tokens": a.counts[1]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return sse(events)


def candidates_json(a: Answer) -> bytes:
    """A non-stream body (Gemini-like): parts with thought markers, finishReason, usageMetadata
    with prompt/candidates/total counts."""
    parts: list[Any] = [{"text": t, "thought": True} for t in a.thinking]
    parts.append({"text": a.text})
    return json.dumps(
        {
            "candidates": [
                {"content": {"parts": parts, "role": "model"}, "finishReason": a.finish}
            ],
            "usageMetadata": {
                "promptTokenCount": a.counts[0],
                "candidatesTokenCount": a.counts[1],
                "totalTokenCount": sum(a.counts),
            },
        }
    ).encode()


def status_ndjson(a: Answer) -> bytes:
    """NDJSON: {"delta": ...} lines, then a summary line whose `status` ends it and whose
    counts are `consumed.{sent, received}`."""
    lines: list[Any] = [{"delta": p, "status": "generating"} for p in a.pieces]
    lines.append(
        {
            "delta": "",
            "status": a.finish,
            "consumed": {"sent": a.counts[0], "received": a.counts[1]},
        }
    )
    return ndjson(lines)


def responses_full(a: Answer) -> bytes:
    """The Responses API's full event sequence: item and content-part events that repeat the
    text whole, `sequence_number`s, usage with details; an `incomplete` answer also makes a tool
    call first (another structure than the complete one) and reasons when it has thinking."""
    base: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "status": "in_progress",
        "output": [],
        "usage": None,
        "incomplete_details": None,
    }
    events: list[Any] = [
        {"type": "response.created", "sequence_number": 0, "response": base},
        {"type": "response.in_progress", "sequence_number": 1, "response": base},
    ]
    out: list[Any] = []
    index = 0
    if a.thinking:
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {"id": "rs_1", "type": "reasoning", "summary": []},
            }
        )
        for t in a.thinking:
            events.append(
                {
                    "type": "response.reasoning_summary_text.delta",
                    "item_id": "rs_1",
                    "output_index": index,
                    "summary_index": 0,
                    "delta": t,
                }
            )
        index += 1
    if a.finish == "incomplete":
        item = {
            "id": "fc_1",
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": "call_1",
            "name": "get_weather",
        }
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        args = json.dumps({"city": "Paris"})
        for piece in (args[:5], args[5:]):
            events.append(
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": "fc_1",
                    "output_index": index,
                    "delta": piece,
                }
            )
        events.append(
            {
                "type": "response.function_call_arguments.done",
                "item_id": "fc_1",
                "output_index": index,
                "arguments": args,
            }
        )
        done = {**item, "status": "completed", "arguments": args}
        events.append({"type": "response.output_item.done", "output_index": index, "item": done})
        out.append(done)
        index += 1
    msg = {
        "id": "msg_1",
        "type": "message",
        "status": "in_progress",
        "content": [],
        "role": "assistant",
    }
    events.append({"type": "response.output_item.added", "output_index": index, "item": msg})
    events.append(
        {
            "type": "response.content_part.added",
            "item_id": "msg_1",
            "output_index": index,
            "content_index": 0,
            "part": {"type": "output_text", "text": ""},
        }
    )
    for p in a.pieces:
        events.append(
            {
                "type": "response.output_text.delta",
                "item_id": "msg_1",
                "output_index": index,
                "content_index": 0,
                "delta": p,
            }
        )
    events.append(
        {
            "type": "response.output_text.done",
            "item_id": "msg_1",
            "output_index": index,
            "content_index": 0,
            "text": a.text,
        }
    )
    whole = {**msg, "status": "completed", "content": [{"type": "output_text", "text": a.text}]}
    events.append({"type": "response.output_item.done", "output_index": index, "item": whole})
    out.append(whole)
    final = {
        **base,
        "status": a.finish,
        "output": out,
        "usage": {
            "input_tokens": a.counts[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": a.counts[1],
            "output_tokens_details": {"reasoning_tokens": len(a.thinking)},
            "total_tokens": sum(a.counts),
        },
    }
    if a.finish == "incomplete":
        final["incomplete_details"] = {"reason": "max_output_tokens"}
    events.append({"type": f"response.{a.finish}", "response": final})
    return sse([(None, e) for e in events])


def llamacpp_native(a: Answer) -> bytes:
    """llama.cpp's own /completion stream: `content` pieces with `stop: false`, then a last
    payload with settings, timings and counts, and `stop_type` (eos, limit, word)."""
    events: list[tuple[str | None, Any]] = [
        (None, {"content": p, "stop": False, "id_slot": 0, "index": 0}) for p in a.pieces
    ]
    events.append(
        (
            None,
            {
                "content": "",
                "stop": True,
                "model": "gemma-3-270m",
                "tokens_predicted": a.counts[1],
                "tokens_evaluated": a.counts[0],
                "generation_settings": {"n_predict": 64, "seed": 42, "top_k": 40, "n_probs": 0},
                "prompt": "<start_of_turn>user\nsay something nice<end_of_turn>",
                "stop_type": a.finish,
                "stopping_word": "",
                "tokens_cached": sum(a.counts),
                "timings": {
                    "prompt_n": a.counts[0],
                    "prompt_ms": 12.5,
                    "predicted_n": a.counts[1],
                    "predicted_ms": 40.0,
                },
            },
        )
    )
    return sse(events)


def cohere_v1_ndjson(a: Answer) -> bytes:
    """Cohere v1-like NDJSON: `event_type` lines, an `is_finished` flag, the whole text and the
    billed units repeated in the stream-end's `response`."""
    lines: list[Any] = [{"is_finished": False, "event_type": "stream-start", "generation_id": "g"}]
    lines += [{"is_finished": False, "event_type": "text-generation", "text": p} for p in a.pieces]
    lines.append(
        {
            "is_finished": True,
            "event_type": "stream-end",
            "finish_reason": a.finish,
            "response": {
                "text": a.text,
                "meta": {
                    "billed_units": {"input_tokens": a.counts[0], "output_tokens": a.counts[1]}
                },
            },
        }
    )
    return ndjson(lines)


def plain_text_events(a: Answer) -> bytes:
    """Replicate-like SSE: the text as plain `data:` lines under `event: output`, then a JSON
    `done` event with the counts."""
    events: list[tuple[str | None, Any]] = [("output", p) for p in a.pieces]
    events.append(
        ("done", {"metrics": {"input_token_count": a.counts[0], "output_token_count": a.counts[1]}})
    )
    return sse(events)


APIS: list[API] = [
    API(
        "responses-like event-typed SSE",
        responses_like,
        (("stop", "stop"), ("max_output_tokens", "max-tokens")),
        has_reasoning=True,
    ),
    API(
        "cohere-like hyphenated events",
        cohere_like,
        (("COMPLETE", "stop"), ("MAX_TOKENS", "max-tokens")),
    ),
    API(
        "tgi-like token.text + details", tgi_like, (("eos_token", "stop"), ("length", "max-tokens"))
    ),
    API(
        "dashscope-like cumulative, 'null' finish",
        dashscope_like,
        (("stop", "stop"), ("length", "max-tokens")),
    ),
    API("spark-like numeric status end", spark_like, (("", "stop"), ("", "stop"))),
    API("ernie-like is_end flag", ernie_like, (("normal", "stop"), ("length", "max-tokens"))),
    API(
        "nested NDJSON, meta.stop, tokens.{in,out}",
        nested_ndjson,
        (("eos", "stop"), ("max_new_tokens", "max-tokens")),
    ),
    API(
        "plain JSON, billing.{in_tokens,out_tokens}",
        plain_json,
        (("finished", "stop"), ("truncated", "max-tokens")),
        has_reasoning=True,
    ),
    API(
        "converse-like JSON, camelCase usage",
        converse_like,
        (("end_turn", "stop"), ("max_tokens", "max-tokens")),
    ),
    API(
        "generation_token_count NDJSON",
        generation_ndjson,
        (("stop", "stop"), ("length", "max-tokens")),
    ),
    API(
        "shout-like bare words, n_in/n_out",
        shout_like,
        (("complete", "stop"), ("cutoff", "max-tokens")),
        words=True,
    ),
    API(
        "odd names: tok/fin/usage.{prompt,completion}",
        odd_names_sse,
        (("natural", "stop"), ("budget_exhausted", "max-tokens")),
    ),
    API(
        "cumulative text, finish+usage on the last",
        cumulative_final,
        (("done", "stop"), ("MAX", "max-tokens")),
    ),
    API(
        "anthropic-like thinking events",
        thinking_events,
        (("end_turn", "stop"), ("pause_turn", "other")),
        has_reasoning=True,
    ),
    API(
        "gemini-like JSON with thought parts",
        candidates_json,
        (("STOP", "stop"), ("SAFETY", "error")),
        has_reasoning=True,
    ),
    API(
        "status NDJSON, consumed.{sent,received}",
        status_ndjson,
        (("succeeded", "stop"), ("incomplete", "max-tokens")),
    ),
    API(
        "responses, full events (+ a tool call when incomplete)",
        responses_full,
        (("completed", "stop"), ("incomplete", "max-tokens")),
        has_reasoning=True,
    ),
    API(
        "llama.cpp native /completion", llamacpp_native, (("eos", "stop"), ("limit", "max-tokens"))
    ),
    API(
        "cohere v1-like NDJSON",
        cohere_v1_ndjson,
        (("COMPLETE", "stop"), ("MAX_TOKENS", "max-tokens")),
    ),
    API(
        "plain-text data: lines, a JSON done event", plain_text_events, (("", "stop"), ("", "stop"))
    ),
]


# ---------------------------------------------------------------- bodies with tool calls


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    args: dict[str, Any]


def responses_calls(calls: list[Call], text: str = "") -> bytes:
    """Responses-like: a call announced by output_item.added, its arguments streamed in
    function_call_arguments.delta, then repeated whole by output_item.done and
    response.completed (read once)."""
    events: list[tuple[str | None, Any]] = [
        (None, {"type": "response.created", "response": {"status": "in_progress"}})
    ]
    if text:
        events.append(
            (None, {"type": "response.output_text.delta", "output_index": 0, "delta": text})
        )
    done_items = []
    for n, c in enumerate(calls, start=1 if text else 0):
        item = {
            "type": "function_call",
            "id": f"fc_{c.id}",
            "call_id": c.id,
            "name": c.name,
            "arguments": "",
        }
        events.append(
            (None, {"type": "response.output_item.added", "output_index": n, "item": item})
        )
        args = json.dumps(c.args)
        for piece in (args[: len(args) // 2], args[len(args) // 2 :]):
            events.append(
                (
                    None,
                    {
                        "type": "response.function_call_arguments.delta",
                        "output_index": n,
                        "item_id": f"fc_{c.id}",
                        "delta": piece,
                    },
                )
            )
        events.append(
            (
                None,
                {
                    "type": "response.function_call_arguments.done",
                    "output_index": n,
                    "arguments": args,
                },
            )
        )
        whole = {**item, "arguments": args}
        done_items.append(whole)
        events.append(
            (None, {"type": "response.output_item.done", "output_index": n, "item": whole})
        )
    events.append(
        (
            None,
            {
                "type": "response.completed",
                "response": {
                    "status": "completed",
                    "output": done_items,
                    "usage": {"input_tokens": 30, "output_tokens": 12},
                },
            },
        )
    )
    return sse(events)


def cohere_calls(calls: list[Call], text: str = "") -> bytes:
    """Cohere v2-like: tool-call-start with the call, tool-call-delta with argument pieces,
    numbered by the payload's index; finish TOOL_CALL."""
    events: list[tuple[str | None, Any]] = [(None, {"type": "message-start", "id": "m"})]
    if text:
        events.append(
            (None, {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": text}}})
        )
    for n, c in enumerate(calls):
        start = {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}
        events.append(
            (
                None,
                {
                    "type": "tool-call-start",
                    "index": n,
                    "delta": {"message": {"tool_calls": start}},
                },
            )
        )
        args = json.dumps(c.args)
        for piece in (args[:3], args[3:]):
            events.append(
                (
                    None,
                    {
                        "type": "tool-call-delta",
                        "index": n,
                        "delta": {"message": {"tool_calls": {"function": {"arguments": piece}}}},
                    },
                )
            )
        events.append((None, {"type": "tool-call-end", "index": n}))
    events.append(
        (
            None,
            {
                "type": "message-end",
                "delta": {
                    "finish_reason": "TOOL_CALL",
                    "usage": {"tokens": {"input_tokens": 40, "output_tokens": 15}},
                },
            },
        )
    )
    return sse(events)


def whole_calls_json(calls: list[Call], text: str = "") -> bytes:
    """A non-stream body: actions [{tool: {name, params}}] next to a reply."""
    return json.dumps(
        {
            "reply": text,
            "actions": [
                {"call_id": c.id, "tool": {"name": c.name, "params": c.args}} for c in calls
            ],
            "end": "tool_use",
            "usage": {"in": 8, "out": 4},
        }
    ).encode()
