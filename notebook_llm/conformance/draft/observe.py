"""One body observed: everything it shows, before the bodies of a draft are merged.

:func:`observe` indexes the body's values by path (:mod:`.paths`), finds the kind each payload
names (:func:`~.text.payload_kinds`), the text and reasoning candidates (:mod:`.text`, and the
payloads that are plain text next to JSON ones), tool calls and argument fragments
(:mod:`.tools`), token counts (:mod:`.usage`), the finish fields and the end marker
(:mod:`.finish`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .finish import EndSpec, FinishField, find_end, find_finish
from .framing import Body
from .paths import BodyIndex, PathTable, index_body
from .text import Candidate, PayloadKinds, empty_text, payload_kinds, prose_score, text_candidates
from .tools import Fragment, ToolSpec, argument_like, find_fragments, find_tools
from .usage import UsageFound, find_usage

__all__ = ["Observation", "observe"]


@dataclass
class Observation:
    """What one body shows (see the module doc)."""

    body: Body
    label: str
    index: BodyIndex
    kinds: PayloadKinds | None
    texts: list[Candidate]
    reasonings: list[Candidate]
    tools: list[ToolSpec]
    fragments: list[Fragment]
    usage: UsageFound
    finish: list[FinishField]
    end: EndSpec
    empty_text: Candidate | None = None
    other_payloads: list[str] = field(default_factory=list)
    error_seen: bool = False


def observe(body: Body, table: PathTable, label: str) -> Observation:
    """Read one body (see the module doc)."""
    index = index_body(table, body.json_payloads)
    stream = body.framing != "json"
    kinds = payload_kinds(index) if stream else None
    tools = find_tools(index, kinds)
    excluded: set[int] = set()
    for t in tools:
        if t.args is not None:
            pid = table.find((*t.path, *t.args))
            if pid is not None:
                excluded.add(pid)
    cands = text_candidates(index, kinds, excluded)
    fragments = find_fragments(index, kinds, tools)
    plain = [c for c in cands if not argument_like(c)]
    texts = [c for c in plain if not c.reasoning_like]
    reasonings = [c for c in plain if c.reasoning_like]
    others = [p.text for p in body.payloads if not p.is_json and p.text != "[DONE]"]
    raw = _raw_text(body, others, force=not texts)
    if raw is not None and (not texts or raw.score > texts[0].score):
        texts = [raw, *texts]
    content_at = _content_at(index, texts[:1] + reasonings[:1], tools, fragments)
    if texts and texts[0].raw:
        plain_text = set(others)
        content_at |= {i for i, p in enumerate(body.payloads) if p.text in plain_text}
    final_from = max(content_at) if content_at else 0
    text_pids = {table.find(c.path) for c in texts[:1] + reasonings[:1] if not c.raw}
    finish = find_finish(index, kinds, content_at, {p for p in text_pids if p is not None}, stream)
    obs = Observation(
        body,
        label,
        index,
        kinds,
        texts,
        reasonings,
        tools,
        fragments,
        find_usage(index, final_from, stream),
        finish,
        find_end(body, index, kinds, finish),
    )
    obs.other_payloads = others
    if not obs.texts:
        obs.empty_text = empty_text(index, excluded)
    obs.error_seen = any(
        isinstance(v, dict) and v.get("error") not in (None, False) for _, v in body.json_payloads
    )
    return obs


def _raw_text(body: Body, others: list[str], force: bool) -> Candidate | None:
    """The payloads that are not JSON, when they read like the answer (a stream that sends its
    text as plain ``data:`` lines and its events as JSON): the whole payload is the text.
    ``force``: no JSON field holds text, so even one short payload is taken."""
    if body.framing != "sse" or not others:
        return None
    text = "".join(others)
    score = prose_score(text) * 2.0
    enough = len(others) >= 2 and score >= 10
    if not (enough or (force and text.strip())):
        return None
    return Candidate((), None, False, text, score, len(others), raw=True)


def _content_at(
    index: BodyIndex, cands: list[Candidate], tools: list[ToolSpec], fragments: list[Fragment]
) -> set[int]:
    out: set[int] = set()
    for cand in cands:
        pid = index.table.find(cand.path)
        if pid is not None:
            out.update(p for p, v, _ in index.strings.get(pid, []) if v)
    for t in tools:
        pid = index.table.find(t.path)
        if pid is not None:
            out.update(p for p, _ in index.dicts.get(pid, []))
    for f in fragments:
        pid = index.table.find(f.path)
        if pid is not None:
            out.update(p for p, v, _ in index.strings.get(pid, []) if v)
    return out
