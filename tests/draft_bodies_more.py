"""More made-up APIs for the drafter's pair tests (a second, adversarial set).

Each one differs from ``draft_bodies.APIS`` on purpose, in a way a held-back body could:
finish fields under other names (``stop``, ``done_reason``, ``end_reason``, ``outcome``,
``meta.finish``), a finish value first seen in the second body, counts as strings or under
``meta.billed_units``, usage in every payload (a running count) or only in the last one, end
events that differ between bodies (``run.completed`` / ``run.incomplete`` / ``run.failed``),
SSE whose kind is named only by ``event:`` lines, cumulative NDJSON, text in arrays of parts,
several choices, tool calls under other names, keep-alive payloads and comments, empty deltas,
unicode and escapes, and a second body much longer than the first with fields the first never
had. Written from documented shapes of public APIs where one is named; no recorded body of
theirs is copied.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from draft_bodies import Answer, Call, ndjson, sse

__all__ = ["MORE", "MORE_CALLS", "More", "answers"]

Maker = Callable[[Answer], bytes]


@dataclass(frozen=True)
class More:
    """A made-up API: its maker, and the (finish value, kind) of its two bodies."""

    name: str
    make: Maker
    #: (finish of the first body, kind), (finish of the second body, kind)
    finishes: tuple[tuple[str, str], tuple[str, str]]
    #: the second body is much longer than the first (300 pieces)
    long_second: bool = False
    #: the text carries unicode and escapes
    unicode: bool = False
    #: the API reports token counts (else the draft must report none)
    usage: bool = True


def _pieces_long() -> tuple[str, ...]:
    return (*(f"word{i} is here, " for i in range(300)), "the end.")


UNICODE = (
    "Naïve café — ",
    "東京は大きい。",
    ' "quoted" \\ back',
    "slash\ttab\nnew line ",
    "fox 🦊 done.",
)


def answers(api: More) -> tuple[Answer, Answer]:
    """The two answers an API's pair is written from."""
    (f1, _), (f2, _) = api.finishes
    first = ("Short ", "first ", "answer ", "here.")
    second: tuple[str, ...] = ("Another ", "and ", "longer ", "second ", "answer ", "now.")
    if api.unicode:
        first = UNICODE
    if api.long_second:
        second = _pieces_long()
    return Answer(first, f1, (13, 4)), Answer(second, f2, (27, len(second) + 3))


# ---------------------------------------------------------------- the APIs


def claude_v2_bedrock(a: Answer) -> bytes:
    """Bedrock's Claude v2 text completion stream: `completion` pieces, `stop_reason` null
    until the end, a `stop` that is the stop *sequence* (a string, not a finish), and the
    counts only in the last payload's `amazon-bedrock-invocationMetrics`."""
    events: list[tuple[str | None, Any]] = [
        (None, {"completion": p, "stop_reason": None, "stop": None}) for p in a.pieces
    ]
    events.append(
        (
            None,
            {
                "completion": "",
                "stop_reason": a.finish,
                "stop": "\n\nHuman:" if a.finish == "stop_sequence" else None,
                "amazon-bedrock-invocationMetrics": {
                    "inputTokenCount": a.counts[0],
                    "outputTokenCount": a.counts[1],
                    "invocationLatency": 812,
                    "firstByteLatency": 301,
                },
            },
        )
    )
    return sse(events)


def stop_named_ndjson(a: Answer) -> bytes:
    """NDJSON: `{"out": {"t": ...}, "stop": null}`, the last line `stop` set and the counts as
    *strings* under `usage.{input, output}`."""
    lines: list[Any] = [{"out": {"t": p}, "stop": None} for p in a.pieces]
    lines.append(
        {
            "out": {"t": ""},
            "stop": a.finish,
            "usage": {"input": str(a.counts[0]), "output": str(a.counts[1])},
        }
    )
    return ndjson(lines)


def done_reason_ndjson(a: Answer) -> bytes:
    """Ollama-like NDJSON under other names: `reply.body` pieces, `finished: false`, then a last
    line with `done_reason` and `prompt_eval_count` / `eval_count` at the top."""
    lines: list[Any] = [
        {"model": "m1", "created_at": f"2025-01-01T00:00:0{i % 10}Z", "reply": {"body": p}}
        | {"finished": False}
        for i, p in enumerate(a.pieces)
    ]
    lines.append(
        {
            "model": "m1",
            "created_at": "2025-01-01T00:00:09Z",
            "reply": {"body": ""},
            "finished": True,
            "done_reason": a.finish,
            "total_duration": 123456789,
            "load_duration": 1234,
            "prompt_eval_count": a.counts[0],
            "prompt_eval_duration": 9999,
            "eval_count": a.counts[1],
            "eval_duration": 88888,
        }
    )
    return ndjson(lines)


def event_lines_only(a: Answer) -> bytes:
    """SSE whose kind is named only by `event:` lines (the data has no type): `event: token`
    pieces, `: keep-alive` comments and `event: ping` payloads between them, then `event: end`
    with `end_reason` and `meta.billed_units.{input_tokens, output_tokens}`."""
    out = [": stream opened\n\n"]
    for i, p in enumerate(a.pieces):
        out.append("event: token\ndata: " + json.dumps({"text": p}) + "\n\n")
        if i % 2 == 0:
            out.append(": keep-alive\n\n")
            out.append("event: ping\ndata: {}\n\n")
    out.append(
        "event: end\ndata: "
        + json.dumps(
            {
                "end_reason": a.finish,
                "meta": {
                    "api_version": {"version": "2"},
                    "billed_units": {"input_tokens": a.counts[0], "output_tokens": a.counts[1]},
                },
            }
        )
        + "\n\n"
    )
    return "".join(out).encode()


def run_events(a: Answer) -> bytes:
    """Event-typed SSE (`type` on every payload) whose end event says how it ended:
    `run.completed`, `run.incomplete` or `run.failed`; no finish field at all; usage in the end
    event's `run.usage.{prompt, completion}`."""
    status = {"length": "incomplete", "failed": "failed"}.get(a.finish, "completed")
    events: list[tuple[str | None, Any]] = [
        (None, {"type": "run.created", "run": {"id": "run_1", "status": "queued"}}),
        (None, {"type": "run.in_progress", "run": {"id": "run_1", "status": "in_progress"}}),
    ]
    events += [(None, {"type": "run.output.delta", "delta": {"value": p}}) for p in a.pieces]
    events.append(
        (
            None,
            {
                "type": f"run.{status}",
                "run": {
                    "id": "run_1",
                    "status": status,
                    "usage": {"prompt": a.counts[0], "completion": a.counts[1]},
                },
            },
        )
    )
    return sse(events)


def cumulative_status_ndjson(a: Answer) -> bytes:
    """NDJSON of whole texts so far with `status: "running"`, the last with the finish in
    `status` (MAX_TOKENS, SAFETY...) and `usage.{prompt_token_count, generation_token_count}`."""
    lines: list[Any] = []
    so_far = ""
    for p in a.pieces:
        so_far += p
        lines.append({"output": {"text": so_far}, "status": "running"})
    lines.append(
        {
            "output": {"text": so_far},
            "status": a.finish,
            "usage": {"prompt_token_count": a.counts[0], "generation_token_count": a.counts[1]},
        }
    )
    return ndjson(lines)


def parts_choices(a: Answer) -> bytes:
    """OpenAI-like SSE with two choices, each in its own payload (`choices[0].index` 0 or 1),
    the delta's content an array of parts `[{type: "text", text}]`; finish per choice; usage
    {prompt_tokens...} in a last payload with empty choices; `[DONE]`."""
    events: list[tuple[str | None, Any]] = []
    for p in a.pieces:
        for idx, text in ((0, p), (1, p.upper())):
            events.append(
                (
                    None,
                    {
                        "id": "c1",
                        "choices": [
                            {
                                "index": idx,
                                "delta": {"content": [{"type": "text", "text": text}]},
                                "finish_reason": None,
                            }
                        ],
                    },
                )
            )
    for idx in (0, 1):
        events.append(
            (
                None,
                {
                    "id": "c1",
                    "choices": [{"index": idx, "delta": {}, "finish_reason": a.finish}],
                },
            )
        )
    events.append(
        (
            None,
            {
                "id": "c1",
                "choices": [],
                "usage": {"prompt_tokens": a.counts[0], "completion_tokens": a.counts[1]},
            },
        )
    )
    events.append((None, "[DONE]"))
    return sse(events)


def running_billing(a: Answer) -> bytes:
    """SSE: every payload repeats `billing.{in_tokens, out_tokens}` (a running output count),
    the finish is `meta.finish` (absent, then set), empty deltas between pieces, unicode."""
    events: list[tuple[str | None, Any]] = []
    for i, p in enumerate(a.pieces):
        events.append(
            (
                None,
                {
                    "piece": p,
                    "meta": {"seq": i},
                    "billing": {"in_tokens": a.counts[0], "out_tokens": i + 1},
                },
            )
        )
        events.append((None, {"piece": "", "meta": {"seq": i}}))
    events.append(
        (
            None,
            {
                "piece": "",
                "meta": {"seq": len(a.pieces), "finish": a.finish},
                "billing": {"in_tokens": a.counts[0], "out_tokens": a.counts[1]},
            },
        )
    )
    return sse(events)


def outcome_json(a: Answer) -> bytes:
    """A non-stream body: `result.content` parts `[{type: "text", text}]`, an `outcome` next to
    it, counts as `tokens.{in, out}` at the top, and fields nobody reads."""
    return json.dumps(
        {
            "request": {"id": "rq-1", "received": 1700000000},
            "result": {
                "content": [{"type": "text", "text": a.text}],
                "outcome": a.finish,
            },
            "tokens": {"in": a.counts[0], "out": a.counts[1]},
            "latency_ms": 512,
        }
    ).encode()


def end_reason_json(a: Answer) -> bytes:
    """A non-stream body: `data.answer`, `data.end_reason`, usage `{prompt, completion}` as
    strings, and a `warnings` list."""
    return json.dumps(
        {
            "data": {"answer": a.text, "end_reason": a.finish},
            "usage": {"prompt": str(a.counts[0]), "completion": str(a.counts[1])},
            "warnings": [],
        }
    ).encode()


def token_final_events(a: Answer) -> bytes:
    """`type`-typed SSE: `token` payloads with a `value`, then a `final` payload that repeats
    the whole text under `output.text`, an `outcome`, and usage `{in, out}`."""
    events: list[tuple[str | None, Any]] = [
        (None, {"type": "start", "model": "m"}),
    ]
    events += [(None, {"type": "token", "value": p}) for p in a.pieces]
    events.append(
        (
            None,
            {
                "type": "final",
                "output": {"text": a.text},
                "outcome": a.finish,
                "usage": {"in": a.counts[0], "out": a.counts[1]},
            },
        )
    )
    return sse(events)


def sentinel_event_done(a: Answer) -> bytes:
    """SSE with `event: delta` pieces `{"d": ...}`, a `finish` event with the reason as
    `{"reason": ...}`, a `usage` event `{"input": .., "output": ..}` after it, and an
    `event: done` whose data is `[DONE]`."""
    out = [f"event: delta\ndata: {json.dumps({'d': p})}\n\n" for p in a.pieces]
    out.append(f"event: finish\ndata: {json.dumps({'reason': a.finish})}\n\n")
    out.append(
        "event: usage\ndata: " + json.dumps({"input": a.counts[0], "output": a.counts[1]}) + "\n\n"
    )
    out.append("event: done\ndata: [DONE]\n\n")
    return "".join(out).encode()


def gemini_like_nulls(a: Answer) -> bytes:
    """A stream whose finish value is a string `finishReason` on the last payload only and
    whose text is in `candidates[0].content.parts[*].text`, with `usageMetadata` on every
    payload (the prompt count fixed, the output count running)."""
    events: list[tuple[str | None, Any]] = []
    for i, p in enumerate(a.pieces):
        last = i == len(a.pieces) - 1
        cand: dict[str, Any] = {"content": {"parts": [{"text": p}], "role": "model"}, "index": 0}
        if last:
            cand["finishReason"] = a.finish
        events.append(
            (
                None,
                {
                    "candidates": [cand],
                    "usageMetadata": {
                        "promptTokenCount": a.counts[0],
                        "candidatesTokenCount": a.counts[1] if last else i + 1,
                        "totalTokenCount": a.counts[0] + (a.counts[1] if last else i + 1),
                    },
                    "modelVersion": "g-1",
                },
            )
        )
    return sse(events)


def nested_status_body(a: Answer) -> bytes:
    """A non-stream body that nests the answer in `response.output[*].content[*].text` (typed
    parts), with `response.status` and `response.incomplete_details.reason`, usage under
    `response.usage.{input_tokens, output_tokens}` (a Responses-like whole body)."""
    status = "incomplete" if a.finish in ("max_output_tokens", "content_filter") else "completed"
    body: dict[str, Any] = {
        "id": "resp_9",
        "object": "response",
        "status": status,
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "status": status,
                "role": "assistant",
                "content": [{"type": "output_text", "text": a.text, "annotations": []}],
            }
        ],
        "usage": {
            "input_tokens": a.counts[0],
            "output_tokens": a.counts[1],
            "total_tokens": sum(a.counts),
        },
        "incomplete_details": {"reason": a.finish} if status == "incomplete" else None,
    }
    return json.dumps({"response": body}).encode()


MORE: list[More] = [
    More(
        "bedrock claude-v2: stop_reason, a `stop` sequence, invocationMetrics",
        claude_v2_bedrock,
        (("stop_sequence", "stop"), ("max_tokens", "max-tokens")),
    ),
    More(
        "NDJSON `stop` field, counts as strings",
        stop_named_ndjson,
        (("eos", "stop"), ("MAX_TOKENS", "max-tokens")),
    ),
    More(
        "ollama-like under other names: done_reason, prompt_eval_count / eval_count",
        done_reason_ndjson,
        (("stop", "stop"), ("length", "max-tokens")),
        long_second=True,
    ),
    More(
        "event: lines only, keep-alives, end_reason, meta.billed_units",
        event_lines_only,
        (("COMPLETE", "stop"), ("MAX_TOKENS", "max-tokens")),
        unicode=True,
    ),
    More(
        "run.* events: completed vs incomplete, no finish field",
        run_events,
        (("stop", "stop"), ("length", "max-tokens")),
    ),
    More(
        "run.* events: completed vs failed",
        run_events,
        (("stop", "stop"), ("failed", "error")),
    ),
    More(
        "cumulative NDJSON, status running -> MAX_TOKENS / SAFETY",
        cumulative_status_ndjson,
        (("STOP", "stop"), ("SAFETY", "error")),
    ),
    More(
        "two choices, content parts, usage after, [DONE]",
        parts_choices,
        (("stop", "stop"), ("length", "max-tokens")),
    ),
    More(
        "running billing.{in_tokens,out_tokens}, meta.finish, empty deltas",
        running_billing,
        (("end_turn", "stop"), ("truncated", "max-tokens")),
        unicode=True,
        long_second=True,
    ),
    More(
        "plain JSON: result.content parts, outcome, tokens.{in,out}",
        outcome_json,
        (("complete", "stop"), ("incomplete", "max-tokens")),
    ),
    More(
        "plain JSON: data.end_reason, usage as strings",
        end_reason_json,
        (("end_turn", "stop"), ("max_length", "max-tokens")),
        unicode=True,
    ),
    More(
        "token/final events, outcome, usage {in,out}",
        token_final_events,
        (("eos", "stop"), ("tool_use", "tool-calls")),
    ),
    More(
        "event: finish / usage / done [DONE] after the text",
        sentinel_event_done,
        (("end_turn", "stop"), ("content_filter", "error")),
    ),
    More(
        "gemini-like stream, running usageMetadata, finishReason only at the end",
        gemini_like_nulls,
        (("STOP", "stop"), ("MAX_TOKENS", "max-tokens")),
        long_second=True,
    ),
    More(
        "responses-like whole body: status + incomplete_details.reason",
        nested_status_body,
        (("completed", "stop"), ("max_output_tokens", "max-tokens")),
    ),
]


# ---------------------------------------------------------------- modelled on public APIs


def yandex_like(a: Answer) -> bytes:
    """YandexGPT-like NDJSON: `result.alternatives[0]` holds the whole text so far under
    `message.text` and a `status` ALTERNATIVE_STATUS_PARTIAL until the last line
    (..._FINAL, ..._TRUNCATED_FINAL, ..._CONTENT_FILTER); usage counts are strings."""
    lines: list[Any] = []
    so_far = ""
    for i, p in enumerate(a.pieces):
        so_far += p
        last = i == len(a.pieces) - 1
        lines.append(
            {
                "result": {
                    "alternatives": [
                        {
                            "message": {"role": "assistant", "text": so_far},
                            "status": a.finish if last else "ALTERNATIVE_STATUS_PARTIAL",
                        }
                    ],
                    "usage": {
                        "inputTextTokens": str(a.counts[0]),
                        "completionTokens": str(a.counts[1] if last else i + 1),
                        "totalTokens": str(a.counts[0] + (a.counts[1] if last else i + 1)),
                    },
                    "modelVersion": "23.10.2024",
                }
            }
        )
    return ndjson(lines)


def titan_like(a: Answer) -> bytes:
    """Amazon Titan text-like SSE: `outputText` pieces, `completionReason` null until the end
    (FINISH, LENGTH, CONTENT_FILTERED), `inputTextTokenCount` on the first payload only and a
    running `totalOutputTextTokenCount` (a *total* that is the output count)."""
    events: list[tuple[str | None, Any]] = []
    for i, p in enumerate(a.pieces):
        last = i == len(a.pieces) - 1
        payload: dict[str, Any] = {
            "outputText": p,
            "index": 0,
            "totalOutputTextTokenCount": a.counts[1] if last else i + 1,
            "completionReason": a.finish if last else None,
        }
        if i == 0:
            payload["inputTextTokenCount"] = a.counts[0]
        events.append((None, payload))
    return sse(events)


def watsonx_like(a: Answer) -> bytes:
    """watsonx.ai-like SSE (`event: message`, `id:` lines): `results[*]` (one element) with
    `generated_text` pieces, a running `generated_token_count`, `input_token_count` and a
    `stop_reason` that is `not_finished` until the end."""
    out = []
    for i, p in enumerate(a.pieces):
        last = i == len(a.pieces) - 1
        payload = {
            "model_id": "ibm/granite-13b",
            "created_at": "2025-01-01T00:00:00.000Z",
            "results": [
                {
                    "generated_text": p,
                    "generated_token_count": a.counts[1] if last else i + 1,
                    "input_token_count": a.counts[0],
                    "stop_reason": a.finish if last else "not_finished",
                }
            ],
        }
        out.append(f"id: {i + 1}\nevent: message\ndata: {json.dumps(payload)}\n\n")
    out.append("id: 99\nevent: close\ndata: {}\n\n")
    return "".join(out).encode()


def cloudflare_like(a: Answer) -> bytes:
    """Workers AI-like SSE: `response` pieces with a random padding field `p`, no finish field
    at all, usage in a last payload, then `[DONE]`."""
    pad = ["q8Zx", "LmN0pQ", "aa", "Zz9Yx8Ww", "k"]
    events: list[tuple[str | None, Any]] = [
        (None, {"response": p, "p": pad[i % len(pad)]}) for i, p in enumerate(a.pieces)
    ]
    events.append(
        (
            None,
            {
                "response": "",
                "usage": {
                    "prompt_tokens": a.counts[0],
                    "completion_tokens": a.counts[1],
                    "total_tokens": sum(a.counts),
                },
            },
        )
    )
    events.append((None, "[DONE]"))
    return sse(events)


def kobold_like(a: Answer) -> bytes:
    """KoboldCpp-like SSE: `event: message` with `{token, finish_reason}`, the reason null until
    a last payload with an empty token; no token counts."""
    events: list[tuple[str | None, Any]] = [
        ("message", {"token": p, "finish_reason": None}) for p in a.pieces
    ]
    events.append(("message", {"token": "", "finish_reason": a.finish}))
    return sse(events)


def perplexity_like(a: Answer) -> bytes:
    """Perplexity-like SSE: each payload has the piece in `choices[0].delta.content` and the
    whole text so far in `choices[0].message.content`, usage on every payload (a running
    output count), `citations`, the finish only at the end."""
    events: list[tuple[str | None, Any]] = []
    so_far = ""
    for i, p in enumerate(a.pieces):
        so_far += p
        last = i == len(a.pieces) - 1
        events.append(
            (
                None,
                {
                    "id": "pp-1",
                    "model": "sonar",
                    "citations": ["https://example.org/a", "https://example.org/b"],
                    "usage": {
                        "prompt_tokens": a.counts[0],
                        "completion_tokens": a.counts[1] if last else i + 1,
                        "total_tokens": a.counts[0] + (a.counts[1] if last else i + 1),
                        "search_context_size": "low",
                    },
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": a.finish if last else None,
                            "message": {"role": "assistant", "content": so_far},
                            "delta": {"role": "assistant", "content": p},
                        }
                    ],
                },
            )
        )
    return sse(events)


def anthropic_legacy(a: Answer) -> bytes:
    """Anthropic's legacy text completions SSE: `event: completion` payloads typed
    `completion` with a `completion` piece, `event: ping` between them, `stop_reason` null
    until the last; no token counts."""
    events: list[tuple[str | None, Any]] = []
    for i, p in enumerate(a.pieces):
        last = i == len(a.pieces) - 1
        events.append(
            (
                "completion",
                {
                    "type": "completion",
                    "completion": p,
                    "stop_reason": a.finish if last else None,
                    "model": "claude-2.1",
                    "stop": "\n\nHuman:" if last and a.finish == "stop_sequence" else None,
                    "log_id": "l1",
                },
            )
        )
        if i == 1:
            events.append(("ping", {"type": "ping"}))
    return sse(events)


def openai_legacy(a: Answer) -> bytes:
    """OpenAI's legacy /completions stream: `choices[0].text`, `logprobs: null`,
    `finish_reason` at the end, usage in a payload with empty choices, `[DONE]`."""
    events: list[tuple[str | None, Any]] = [
        (
            None,
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "created": 1700000000,
                "choices": [{"text": p, "index": 0, "logprobs": None, "finish_reason": None}],
                "model": "gpt-3.5-turbo-instruct",
            },
        )
        for p in a.pieces
    ]
    events.append(
        (
            None,
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "choices": [{"text": "", "index": 0, "logprobs": None, "finish_reason": a.finish}],
            },
        )
    )
    events.append(
        (
            None,
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "choices": [],
                "usage": {
                    "prompt_tokens": a.counts[0],
                    "completion_tokens": a.counts[1],
                    "total_tokens": sum(a.counts),
                },
            },
        )
    )
    events.append((None, "[DONE]"))
    return sse(events)


def sensenova_like(a: Answer) -> bytes:
    """SenseNova-like SSE: `data.choices[0].delta` is the piece itself (a string),
    `finish_reason` "" while streaming, a constant `status: {code: 0, message: "ok"}`, and
    usage in every payload under `data.usage`."""
    events: list[tuple[str | None, Any]] = []
    for i, p in enumerate(a.pieces):
        last = i == len(a.pieces) - 1
        events.append(
            (
                None,
                {
                    "data": {
                        "id": "sn-1",
                        "choices": [{"delta": p, "finish_reason": a.finish if last else ""}],
                        "usage": {
                            "prompt_tokens": a.counts[0],
                            "completion_tokens": a.counts[1] if last else i + 1,
                            "total_tokens": a.counts[0] + (a.counts[1] if last else i + 1),
                        },
                    },
                    "status": {"code": 0, "message": "ok"},
                },
            )
        )
    events.append((None, "[DONE]"))
    return sse(events)


MORE += [
    More(
        "yandex-like cumulative alternatives, ALTERNATIVE_STATUS_*, string counts",
        yandex_like,
        (
            ("ALTERNATIVE_STATUS_FINAL", "stop"),
            ("ALTERNATIVE_STATUS_TRUNCATED_FINAL", "max-tokens"),
        ),
    ),
    More(
        "yandex-like: FINAL -> CONTENT_FILTER",
        yandex_like,
        (("ALTERNATIVE_STATUS_FINAL", "stop"), ("ALTERNATIVE_STATUS_CONTENT_FILTER", "error")),
    ),
    More(
        "titan-like: completionReason, totalOutputTextTokenCount",
        titan_like,
        (("FINISH", "stop"), ("LENGTH", "max-tokens")),
    ),
    More(
        "watsonx-like: results[*], stop_reason not_finished until the end",
        watsonx_like,
        (("eos_token", "stop"), ("max_tokens", "max-tokens")),
        long_second=True,
    ),
    More(
        "cloudflare-like: response + padding, no finish field, usage last",
        cloudflare_like,
        (("", "stop"), ("", "stop")),
        unicode=True,
    ),
    More(
        "kobold-like: token + finish_reason, no usage",
        kobold_like,
        (("stop", "stop"), ("length", "max-tokens")),
        usage=False,
    ),
    More(
        "perplexity-like: delta and cumulative message, running usage",
        perplexity_like,
        (("stop", "stop"), ("length", "max-tokens")),
    ),
    More(
        "anthropic legacy completions: stop_sequence / max_tokens, no usage",
        anthropic_legacy,
        (("stop_sequence", "stop"), ("max_tokens", "max-tokens")),
        usage=False,
    ),
    More(
        "openai legacy completions: choices[0].text",
        openai_legacy,
        (("stop", "stop"), ("length", "max-tokens")),
    ),
    More(
        "sensenova-like: delta is the string, finish_reason ''",
        sensenova_like,
        (("stop", "stop"), ("length", "max-tokens")),
    ),
]


# ---------------------------------------------------------------- bodies with tool calls


def calls_named_fn(calls: list[Call], text: str = "") -> bytes:
    """SSE: `delta.calls[*]` with `{idx, call_id, fn, args}`: the first piece names the call,
    later ones carry `args` pieces only (by `idx`); finish `tool_use` in `stop`."""
    events: list[tuple[str | None, Any]] = []
    if text:
        events.append((None, {"delta": {"text": text}, "stop": None}))
    for n, c in enumerate(calls):
        args = json.dumps(c.args)
        events.append(
            (
                None,
                {
                    "delta": {"calls": [{"idx": n, "call_id": c.id, "fn": c.name, "args": ""}]},
                    "stop": None,
                },
            )
        )
        for piece in (args[:4], args[4:]):
            events.append((None, {"delta": {"calls": [{"idx": n, "args": piece}]}, "stop": None}))
    events.append((None, {"delta": {}, "stop": "tool_use", "usage": {"in": 9, "out": 7}}))
    return sse(events)


def whole_calls_ndjson(calls: list[Call], text: str = "") -> bytes:
    """NDJSON: text lines, then one line per call, whole: `{"tool_call": {"id", "function":
    {"name", "arguments": {...}}}}`, then a done line with `done_reason`."""
    lines: list[Any] = [{"message": {"content": text}}] if text else []
    for c in calls:
        lines.append(
            {
                "message": {
                    "content": "",
                    "tool_call": {"id": c.id, "function": {"name": c.name, "arguments": c.args}},
                }
            }
        )
    lines.append({"message": {"content": ""}, "done": True, "done_reason": "tool_calls"})
    return ndjson(lines)


MORE_CALLS = {
    "delta.calls[*] {idx, call_id, fn, args} streamed": calls_named_fn,
    "NDJSON message.tool_call whole, done_reason": whole_calls_ndjson,
}
