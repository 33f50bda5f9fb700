"""Inference: where recorded bodies keep the answer, read from their structure, merged over bodies.

Each body is *observed* on its own (:mod:`.observe`); the observations of every body are
*merged* (:mod:`.merge`); the user's picks override a choice and close calls become questions
(:mod:`.choices`); each decided mapping says what it rests on and how sure it is, and what could
not be inferred is a TODO (:mod:`.basis`). :func:`infer` runs them and, with several bodies,
says what each body after the first changed.
"""

from __future__ import annotations

from ...core.errors import ErrorCode, LlmError
from .basis import changes, describe_mappings, list_todos
from .choices import (
    PICK_FIELDS,
    apply_usage_picks,
    choose,
    decide_finish,
    normalise_picks,
    usage_questions,
)
from .finish import EndSpec, FinishField
from .framing import Body
from .inference import Inference, Mapping, Option, Question
from .merge import (
    merge_candidates,
    merge_end,
    merge_finish,
    merge_fragments,
    merge_tools,
    merge_usage,
)
from .names import norm
from .observe import Observation, observe
from .paths import PathTable
from .text import Candidate
from .tools import Fragment, ToolSpec

__all__ = [
    "PICK_FIELDS",
    "Candidate",
    "EndSpec",
    "FinishField",
    "Fragment",
    "Inference",
    "Mapping",
    "Observation",
    "Option",
    "Question",
    "ToolSpec",
    "decide",
    "infer",
    "norm",
    "observe",
]


def decide(obs: list[Observation], picks: dict[str, str] | None = None) -> Inference:
    """Merge the observations of every body into one :class:`Inference` (see the module doc)."""
    picks = normalise_picks(picks)
    inf = Inference([o.body for o in obs], [o.label for o in obs])
    kinds = {o.kinds.key for o in obs if o.kinds is not None}
    inf.kind_key = kinds.pop() if len(kinds) == 1 else None
    inf.tools = merge_tools(obs)
    inf.fragments = merge_fragments(obs)
    inf.text_candidates = merge_candidates([o.texts for o in obs])
    inf.reasoning_candidates = merge_candidates([o.reasonings for o in obs])
    inf.text, q_text = choose(inf.text_candidates, "text", picks.get("text"))
    if inf.text is None and "text" not in picks:
        inf.text = next((o.empty_text for o in obs if o.empty_text is not None), None)
    inf.reasoning, q_reason = choose(inf.reasoning_candidates, "reasoning", picks.get("reasoning"))
    inf.questions = [q for q in (q_text, q_reason) if q is not None]
    if (
        (inf.text is None or inf.text.guessed)
        and inf.reasoning is None
        and not inf.tools
        and "text" not in picks
    ):
        raise LlmError(
            f"found no answer text, reasoning or tool call in {inf.body.describe()}: is it "
            "an error body or an empty answer? Draft from a successful response that has text",
            ErrorCode.MALFORMED_RESPONSE,
        )
    inf.usage = merge_usage([o.usage for o in obs])
    all_ints = {o.index.path(pid) for o in obs for pid in o.index.ints}
    apply_usage_picks(inf.usage, picks, all_ints)
    inf.questions += usage_questions(inf.usage, picks)
    inf.finish = decide_finish(merge_finish([o.finish for o in obs]), picks.get("finish"))
    inf.end, end_notes = merge_end(obs)
    inf.other_payloads = list(dict.fromkeys(p for o in obs for p in o.other_payloads))
    inf.error_seen = any(o.error_seen for o in obs)
    inf.notes = end_notes + [
        f"{o.label}: read its first {o.index.values:,} values only (a very large body)"
        for o in obs
        if o.index.truncated
    ]
    if obs and obs[0].index.table.full:
        inf.notes.append("some fields were not told apart (more distinct paths than the limit)")
    describe_mappings(inf)
    for q in inf.questions:  # a close call is never "sure"
        m = inf.mappings.get("usage" if q.field in ("prompt", "completion") else q.field)
        if m is not None and m.confidence == "sure":
            m.confidence = "likely"
            m.basis += "; another candidate is close (see the question)"
    list_todos(inf)
    return inf


def infer(
    bodies: Body | list[Body],
    labels: list[str] | None = None,
    picks: dict[str, str] | None = None,
) -> Inference:
    """Read ``bodies`` (one or more bodies of one API) and decide every mapping (see the module
    doc); with several, :attr:`Inference.changes` says what each body after the first changed.
    Raises ``LlmError`` when they hold no answer."""
    items = bodies if isinstance(bodies, list) else [bodies]
    names = labels or [f"body {i + 1}" for i in range(len(items))]
    table = PathTable()
    obs = [observe(b, table, label) for b, label in zip(items, names, strict=True)]
    inf = decide(obs, picks)
    for i in range(1, len(obs)):
        try:
            before = decide(obs[:i], picks)
        except LlmError:  # the bodies before held no answer (or not what a pick names)
            before = Inference(inf.bodies[:i], inf.labels[:i])
        after = inf if i == len(obs) - 1 else decide(obs[: i + 1], picks)
        inf.changes.extend(changes(obs[i].label, before, after))
    return inf
