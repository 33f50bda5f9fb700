"""What each mapping rests on, what the draft leaves to do, and what a body changed.

:func:`describe_mappings` fills :attr:`~.inference.Inference.mappings` (where, the evidence, and
how sure); :func:`list_todos` what the bodies could not tell; :func:`changes` compares the
reading of the bodies before and after one more, a line per mapping it changed.
"""

from __future__ import annotations

from ...adapters.lua.finish_vocabulary import finish_meaning
from .inference import Confidence, Inference, Mapping
from .lua_text import sample, show_path
from .text import Candidate

__all__ = ["changes", "describe_mappings", "list_todos"]


def _text_mapping(what: str, cand: Candidate, others: list[Candidate], n: int) -> Mapping:
    spaces = sum(ch.isspace() for ch in cand.text) / max(len(cand.text), 1)
    basis = (
        f"{len(cand.text)} chars over {cand.payloads} payload(s), {spaces:.0%} spaces, read like "
        "prose"
    )
    if cand.cumulative:
        basis += "; each payload carries the whole text so far (turned into deltas)"
    if n > 1:
        basis += f"; found in {cand.bodies} of {n} bodies"
    rivals = [c for c in others if c is not cand]
    if rivals:
        shown = ", ".join(f"{c.show()} ({sample(c.text, 24)!r})" for c in rivals[:2])
        basis += f"; picked over {len(rivals)} other candidate(s): {shown}"
    confidence: Confidence = "sure"
    if cand.guessed:
        basis, confidence = "empty or null here and named like text", "guess"
    elif cand.separator or cand.revised or (n > 1 and cand.bodies < n):
        confidence = "likely"
    return Mapping(what, cand.show(), basis, confidence)


def describe_mappings(inf: Inference) -> None:
    n = len(inf.bodies)
    m = inf.mappings
    if inf.text is not None:
        m["text"] = _text_mapping("text", inf.text, inf.text_candidates, n)
    if inf.reasoning is not None:
        m["reasoning"] = _text_mapping("reasoning", inf.reasoning, inf.reasoning_candidates, n)
    roles = inf.usage.mapped()
    if roles:
        paths = [inf.usage.roles[r][0] for r in roles]
        levels: tuple[Confidence, ...] = ("sure", "likely", "guess")
        worst = max(levels.index(p.confidence) for p in paths)
        basis = "; ".join(dict.fromkeys(p.basis for p in paths))
        if {"prompt", "completion", "total"} <= set(roles):
            basis += "; output = total - input when the total is larger (reasoning left out)"
        m["usage"] = Mapping("usage", inf.usage.show(), basis, levels[worst])
    if inf.finish:
        f = inf.finish[0]
        values = ", ".join(f"{v!r} -> {finish_meaning(v) or 'other'}" for v in inf.finish_values)
        m["finish"] = Mapping(
            "finish",
            ", ".join(show_path(x.path) for x in inf.finish),
            f"{f.basis}; values {values}; any other value is read by its meaning",
            f.confidence,
        )
    end = inf.end
    m["end"] = Mapping(
        "end",
        end.kind,
        end.note,
        "guess" if end.kind in ("eof", "key") and inf.stream else "sure",
    )
    if inf.tools or inf.fragments:
        where = ", ".join(t.show() for t in inf.tools)
        if inf.fragments:
            where += (
                (", " if where else "") + "fragments " + ", ".join(f.show() for f in inf.fragments)
            )
        m["tool calls"] = Mapping(
            "tool calls",
            where,
            f"{sum(t.calls for t in inf.tools)} call object(s) with a name and arguments",
            "sure",
        )


def list_todos(inf: Inference) -> None:
    todo = inf.todos.append
    todo("endpoint: the body does not say which URL it came from; set the API's path")
    if not inf.usage.roles:
        todo(
            "usage: no token counts found (no integers set once per answer); map them if the "
            "API sends any"
        )
    elif "prompt" not in inf.usage.roles or (
        "completion" not in inf.usage.roles and "total" not in inf.usage.roles
    ):
        todo(f"usage: only {inf.usage.show()} found; map the other count if the API sends it")
    for role in ("prompt", "completion"):
        for p in inf.usage.roles.get(role, []):
            if p.confidence == "guess":
                todo(
                    f"usage: {show_path(p.path)} -> {role} is a guess ({p.basis}); "
                    f"--pick {role}=PATH to say otherwise"
                )
    if not inf.finish:
        todo("finish: no finish field in the bodies; every answer is reported as a stop")
    for f in inf.finish:
        for v in f.values:
            if finish_meaning(v) is None:
                todo(
                    f"finish: {v!r} has no meaning in the finish vocabulary; it is passed on "
                    "and reported as finish 'other' (map it to stop, length, tool_calls, "
                    "content_filter or error if you know what it means)"
                )
    if inf.end.kind == "eof" and inf.stream and not inf.finish:
        todo(
            "end: nothing marks the last payload, so the draft takes the end of the body as the "
            "end (each payload says finish stop) and a connection cut early reads as complete; "
            "if the API has an end marker, return done = true on it instead"
        )
    if inf.text is not None and inf.text.revised:
        todo(
            f"text: {show_path(inf.text.path)} looks like the whole text so far, but some "
            "payloads rewrite it instead of extending it; the stream only appends, so the draft "
            "joins the values: check what the API means (the last value may be the answer)"
        )
    if inf.text is not None and inf.text.separator:
        todo(
            "text: the payloads are bare words with no space anywhere, so the draft adds a "
            "space after each; check that the API means words"
        )
    if inf.text is not None and inf.text.guessed:
        todo(
            f"text: this body has no answer text; {show_path(inf.text.path)} is empty or null "
            "here and named like text, so the draft reads it: check on a body with text"
        )
    if not inf.tools and not inf.fragments:
        todo(
            "tool calls: none in the bodies; the draft expects them (if the API has them) as "
            "objects with a name and arguments, looked for anywhere meanwhile (a guess): map "
            "their place with draft.calls (the comment above out.tool_calls shows how)"
        )
    for q in inf.questions:
        todo(q.how())
    if inf.body.framing == "sse" and inf.body.event_lines and inf.kind_key is None:
        todo(
            "event: lines: the hook sees only each event's data, and these payloads do "
            "not repeat the event name; check no two events need telling apart"
        )


def changes(label: str, before: Inference, after: Inference) -> list[str]:
    """What adding body ``label`` changed, one line per mapping (or one saying nothing did)."""
    out = []
    for what in ("text", "reasoning", "usage", "finish", "end", "tool calls"):
        a, b = before.mappings.get(what), after.mappings.get(what)
        if a is None and b is None:
            continue
        if a is None and b is not None:
            out.append(f"{label}: {what}: found {b.where}")
        elif b is None and a is not None:
            out.append(f"{label}: {what}: {a.where} dropped")
        elif a is not None and b is not None and a.where != b.where:
            out.append(f"{label}: {what}: {a.where} -> {b.where}")
    new_values = [v for v in after.finish_values if v not in before.finish_values]
    if new_values:
        shown = ", ".join(f"{v!r} ({finish_meaning(v) or 'other'})" for v in new_values)
        out.append(f"{label}: finish: new value(s) {shown}")
    return out or [f"{label}: confirmed every mapping (nothing changed)"]
