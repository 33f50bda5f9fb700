"""Inference: where recorded bodies keep the answer, read from their structure, merged over bodies.

Each body is *observed* on its own (:func:`observe`): its values indexed by path
(:mod:`.paths`), the kind each payload names (:func:`~.text.payload_kinds`), the text and
reasoning candidates (:mod:`.text`), tool calls and argument fragments (:mod:`.tools`), token
counts (:mod:`.usage`), the finish field and the end marker (:mod:`.finish`). Then the
observations of every body are *merged* (:func:`decide`): a candidate found in more bodies, with
more text, wins; finish values and usage fields are the union of what each body showed; end
markers that differ between bodies (``response.completed`` in one, ``response.incomplete`` in the
other) become one end with alternatives. The user's picks (``--pick text=PATH``) override a
choice; two candidates too close to call are a :class:`Question` (the notebook shows them with
sample values, the CLI says how to pick), never a silent choice of the weaker one.

Every decided mapping is a :class:`Mapping`: what it maps, where, what it rests on and how sure
it is (``sure``: structure and names agree; ``likely``: one of them; ``guess``: neither, said as
a TODO). What could not be inferred is a TODO in :attr:`Inference.todos`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ...adapters.lua.finish_vocabulary import finish_meaning
from ...core.errors import ErrorCode, LlmError
from ...core.redaction import shorten
from .finish import EndSpec, FinishField, end_family, find_end, find_finish
from .framing import Body
from .lua_text import Path, show_path
from .names import norm
from .paths import BodyIndex, PathTable, index_body
from .text import (
    Candidate,
    PayloadKinds,
    empty_text,
    payload_kinds,
    prose_score,
    same_text,
    text_candidates,
)
from .tools import Fragment, ToolSpec, argument_like, find_fragments, find_tools
from .usage import Role, UsageFound, UsagePath, find_usage

__all__ = [
    "PICK_FIELDS",
    "Candidate",
    "EndSpec",
    "FinishField",
    "Fragment",
    "Inference",
    "Mapping",
    "Observation",
    "Question",
    "ToolSpec",
    "decide",
    "infer",
    "norm",
    "observe",
]

Confidence = Literal["sure", "likely", "guess"]

#: What ``--pick FIELD=PATH`` may choose (``input``/``output`` are ``prompt``/``completion``).
PICK_FIELDS = ("text", "reasoning", "finish", "prompt", "completion", "total")
_PICK_ALIASES = {"input": "prompt", "output": "completion"}
#: A runner-up scoring at least this share of the best is too close to call.
CLOSE = 0.75


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


@dataclass
class Mapping:
    """One decided mapping: what it rests on, and how sure it is."""

    what: str
    where: str
    basis: str
    confidence: Confidence

    def show(self) -> str:
        return f"{self.where} ({self.confidence}: {self.basis})"


@dataclass
class Option:
    """One answer to a :class:`Question`: the path as ``--pick`` takes it, and a sample."""

    pick: str
    sample: str
    score: float


@dataclass
class Question:
    """Two or more candidates for one field, too close to call from the bodies alone."""

    field: str
    options: list[Option]
    #: The option the draft took (the best scored; the first).
    chosen: int = 0

    def how(self) -> str:
        alts = " or ".join(f"--pick {self.field}={o.pick}" for o in self.options)
        return f"{self.field}: {len(self.options)} close candidates; choose with {alts}"


@dataclass
class Inference:
    """Everything the draft is written from (see the module doc)."""

    bodies: list[Body]
    labels: list[str]
    kind_key: str | None = None
    text: Candidate | None = None
    text_candidates: list[Candidate] = field(default_factory=list)
    reasoning: Candidate | None = None
    reasoning_candidates: list[Candidate] = field(default_factory=list)
    usage: UsageFound = field(default_factory=UsageFound)
    finish: list[FinishField] = field(default_factory=list)
    end: EndSpec = field(default_factory=lambda: EndSpec("eof"))
    tools: list[ToolSpec] = field(default_factory=list)
    fragments: list[Fragment] = field(default_factory=list)
    other_payloads: list[str] = field(default_factory=list)
    error_seen: bool = False
    mappings: dict[str, Mapping] = field(default_factory=dict)
    questions: list[Question] = field(default_factory=list)
    #: What each body after the first changed, one line each.
    changes: list[str] = field(default_factory=list)
    todos: list[str] = field(default_factory=list)
    #: Limits met while reading (a body read in part).
    notes: list[str] = field(default_factory=list)

    @property
    def body(self) -> Body:
        """The first body (the one the draft's header names)."""
        return self.bodies[0]

    @property
    def stream(self) -> bool:
        return self.body.framing != "json"

    @property
    def finish_values(self) -> dict[str, str | None]:
        """Final finish values seen -> their meaning (``None``: outside the vocabulary)."""
        out: dict[str, str | None] = {}
        for f in self.finish:
            for v in f.values:
                out.setdefault(v, finish_meaning(v))
        return out


# ---------------------------------------------------------------- one body


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
    raw = _raw_text(body, others)
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


def _raw_text(body: Body, others: list[str]) -> Candidate | None:
    """The payloads that are not JSON, when they read like the answer (a stream that sends its
    text as plain ``data:`` lines and its events as JSON): the whole payload is the text."""
    if body.framing != "sse" or len(others) < 2:
        return None
    text = "".join(others)
    score = prose_score(text) * 2.0
    if score < 10:
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


# ---------------------------------------------------------------- merging bodies


def _merge_candidates(lists: list[list[Candidate]]) -> list[Candidate]:
    """Candidates of every body by (path, condition): scores summed, the first body's text."""
    merged: dict[object, Candidate] = {}
    for cands in lists:
        for c in cands:
            have = merged.get(c.key)
            if have is None:
                merged[c.key] = Candidate(**{**c.__dict__})
            else:
                have.score += c.score
                have.bodies += 1
                have.payloads = max(have.payloads, c.payloads)
                have.cumulative = have.cumulative or c.cumulative
                have.revised = have.revised or c.revised
    out = list(merged.values())
    out.sort(key=lambda c: (-c.bodies, -c.score, -c.payloads, c.show()))
    # a candidate in fewer bodies only loses to one in more when it is not far ahead
    out.sort(key=lambda c: -c.score * (0.5 + 0.5 * c.bodies / max(len(lists), 1)))
    return _dedupe(out)


def _dedupe(cands: list[Candidate]) -> list[Candidate]:
    """The same answer twice (pieces, and the whole text at the end): the one sent in more
    payloads first, the other kept after every distinct candidate (never a close call)."""
    kept: list[Candidate] = []
    dupes: list[Candidate] = []
    for c in cands:
        # the best few are compared (a twin that matters is among them): never every pair
        twin = next((k for k in kept[:16] if same_text(k.text, c.text)), None)
        if twin is None:
            kept.append(c)
        elif c.payloads > twin.payloads and c.bodies >= twin.bodies:
            kept[kept.index(twin)] = c
            dupes.append(twin)
        else:
            dupes.append(c)
    return kept + dupes


def _merge_finish(lists: list[list[FinishField]]) -> list[FinishField]:
    merged: dict[Path, FinishField] = {}
    for fields in lists:
        for f in fields:
            have = merged.get(f.path)
            if have is None:
                merged[f.path] = FinishField(
                    f.path,
                    f.confidence,
                    f.basis,
                    list(f.values),
                    list(f.progress),
                    f.score,
                    f.at_end,
                )
                continue
            have.values += [v for v in f.values if v not in have.values]
            have.progress += [v for v in f.progress if v not in have.progress]
            have.score += f.score
            have.at_end = have.at_end or f.at_end
            if f.confidence == "sure":
                have.confidence = "sure"
    out = sorted(
        merged.values(), key=lambda f: (-f.score, -f.at_end, len(f.path), show_path(f.path))
    )
    for f in out:  # a value final in one body and progress in another is not a finish
        f.values = [v for v in f.values if v not in f.progress]
    return [f for f in out if f.values]


def _merge_usage(found: list[UsageFound]) -> UsageFound:
    """Every body's usage fields; per role, only the surest kind of evidence is kept."""
    order = ("sure", "likely", "guess")
    out = UsageFound()
    for u in found:
        for paths in u.roles.values():
            for p in paths:
                out.add(p)
    for role, paths in out.roles.items():
        best = min(order.index(p.confidence) for p in paths)
        out.roles[role] = [p for p in paths if order.index(p.confidence) == best]
    return out


def _merge_end(obs: list[Observation]) -> tuple[EndSpec, list[str]]:
    """One end for every body: the first body's, with the other kinds of end event the other
    bodies showed as alternatives (``response.incomplete`` next to ``response.completed``)."""
    first = obs[0].end
    spec = EndSpec(first.kind, first.path, first.value, first.note, first.family, list(first.also))
    notes: list[str] = []
    for o in obs[1:]:
        e = o.end
        if spec.kind == "kind" and e.kind == "kind" and e.path == spec.path:
            for v in e.values:
                if v not in spec.values:
                    spec.also.append(v)
            if spec.family is None or not all(v.startswith(spec.family) for v in spec.values):
                families = {end_family(v) for v in spec.values}
                spec.family = families.pop() if len(families) == 1 else None
        elif (e.kind, e.value, e.path) != (spec.kind, spec.value, spec.path):
            notes.append(f"{o.label} ends differently ({e.note}); the first body's end is kept")
    if spec.kind == "kind":
        key = show_path(spec.path or ())
        spec.note = (
            f"only the last payload has {key} = "
            + " or ".join(repr(v) for v in spec.values)
            + (f" (and the other ends {spec.family}*)" if spec.family else "")
        )
    return spec, notes


# ---------------------------------------------------------------- deciding


def _pick_key(raw: str) -> str:
    key = raw.strip().lower()
    key = _PICK_ALIASES.get(key, key)
    if key not in PICK_FIELDS:
        raise LlmError(
            f"--pick {raw}=...: not a field to pick; use one of {', '.join(PICK_FIELDS)} "
            "(or input, output)",
            ErrorCode.INVALID_OPTIONS,
        )
    return key


def normalise_picks(picks: dict[str, str] | None) -> dict[str, str]:
    """``{field: PATH}`` with the field names checked and their aliases resolved."""
    return {_pick_key(k): v.strip() for k, v in (picks or {}).items()}


def _choose(
    cands: list[Candidate], field_name: str, pick: str | None
) -> tuple[Candidate | None, Question | None]:
    """The candidate to map (the pick, else the best) and a question when the best two are
    close; a pick that names no candidate is one ``LlmError`` listing them."""
    if pick is not None:
        if pick.lower() == "none":
            return None, None
        for c in cands:
            if pick in (c.show(), show_path(c.path)):
                return c, None
        shown = "; ".join(c.show() for c in cands[:8]) or "none"
        raise LlmError(
            f"--pick {field_name}={pick}: no such candidate in the bodies; the candidates are: "
            f"{shown}",
            ErrorCode.INVALID_OPTIONS,
        )
    if not cands:
        return None, None
    best = cands[0]
    close = [
        c
        for c in cands[1:]
        if c.score >= best.score * CLOSE
        and not same_text(c.text, best.text)
        and c.bodies >= best.bodies
    ]
    if not close:
        return best, None
    options = [Option(c.show(), shorten(c.text, 60), c.score) for c in [best, *close[:3]]]
    return best, Question(field_name, options)


def _usage_questions(usage: UsageFound, picks: dict[str, str]) -> list[Question]:
    guesses = [p for role in ("prompt", "completion") for p in usage.roles.get(role, [])]
    if len(guesses) != 2 or any(p.confidence != "guess" for p in guesses):
        return []
    a, b = guesses
    return [
        Question(
            "prompt",
            [
                Option(show_path(a.path), f"{a.value} (then output {show_path(b.path)})", 1.0),
                Option(show_path(b.path), f"{b.value} (then output {show_path(a.path)})", 1.0),
            ],
        )
    ]


def _apply_usage_picks(usage: UsageFound, picks: dict[str, str], all_ints: set[Path]) -> None:
    pairs: dict[Role, Role] = {"prompt": "completion", "completion": "prompt"}
    roles: tuple[Role, ...] = ("prompt", "completion", "total")
    for role in roles:
        pick = picks.get(role)
        if pick is None:
            continue
        if pick.lower() == "none":
            usage.roles.pop(role, None)
            continue
        path = next((p for p in all_ints if show_path(p) == pick), None)
        if path is None:
            shown = "; ".join(sorted(show_path(p) for p in all_ints)[:12]) or "none"
            raise LlmError(
                f"--pick {role}={pick}: no integer field there in the bodies; the integer "
                f"fields are: {shown}",
                ErrorCode.INVALID_OPTIONS,
            )
        previous = usage.roles.get(role, [])
        usage.roles[role] = [UsagePath(path, role, "sure", "picked by you")]
        other = pairs.get(role)
        if other and other not in picks and any(p.path == path for p in usage.roles.get(other, [])):
            # a guessed pair the other way round: the other count takes this one's place
            usage.roles[other] = [
                UsagePath(p.path, other, "sure", "the other of the pair you picked", p.value)
                for p in previous
                if p.path != path
            ]


def decide(obs: list[Observation], picks: dict[str, str] | None = None) -> Inference:
    """Merge the observations of every body into one :class:`Inference` (see the module doc)."""
    picks = normalise_picks(picks)
    inf = Inference([o.body for o in obs], [o.label for o in obs])
    kinds = {o.kinds.key for o in obs if o.kinds is not None}
    inf.kind_key = kinds.pop() if len(kinds) == 1 else None
    inf.tools = _merge_tools(obs)
    inf.fragments = _merge_fragments(obs)
    inf.text_candidates = _merge_candidates([o.texts for o in obs])
    inf.reasoning_candidates = _merge_candidates([o.reasonings for o in obs])
    inf.text, q_text = _choose(inf.text_candidates, "text", picks.get("text"))
    if inf.text is None and "text" not in picks:
        inf.text = next((o.empty_text for o in obs if o.empty_text is not None), None)
    inf.reasoning, q_reason = _choose(inf.reasoning_candidates, "reasoning", picks.get("reasoning"))
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
    inf.usage = _merge_usage([o.usage for o in obs])
    all_ints = {o.index.path(pid) for o in obs for pid in o.index.ints}
    _apply_usage_picks(inf.usage, picks, all_ints)
    inf.questions += _usage_questions(inf.usage, picks)
    inf.finish = _decide_finish(_merge_finish([o.finish for o in obs]), picks.get("finish"))
    inf.end, end_notes = _merge_end(obs)
    inf.other_payloads = list(dict.fromkeys(p for o in obs for p in o.other_payloads))
    inf.error_seen = any(o.error_seen for o in obs)
    inf.notes = end_notes + [
        f"{o.label}: read its first {o.index.values:,} values only (a very large body)"
        for o in obs
        if o.index.truncated
    ]
    if obs and obs[0].index.table.full:
        inf.notes.append("some fields were not told apart (more distinct paths than the limit)")
    _mappings(inf)
    for q in inf.questions:  # a close call is never "sure"
        m = inf.mappings.get("usage" if q.field in ("prompt", "completion") else q.field)
        if m is not None and m.confidence == "sure":
            m.confidence = "likely"
            m.basis += "; another candidate is close (see the question)"
    _todos(inf)
    return inf


def _decide_finish(fields: list[FinishField], pick: str | None) -> list[FinishField]:
    if pick is not None:
        if pick.lower() == "none":
            return []
        chosen = [f for f in fields if show_path(f.path) == pick]
        if not chosen:
            shown = "; ".join(show_path(f.path) for f in fields) or "none"
            raise LlmError(
                f"--pick finish={pick}: no finish field there; the finish fields are: {shown}",
                ErrorCode.INVALID_OPTIONS,
            )
        return chosen
    # the fields set on a body's last payload speak for the whole answer (several: a status and
    # its reason, read in that order); else the best one
    at_end = [f for f in fields if f.at_end and (f.confidence == "sure" or f is fields[0])]
    return at_end or fields[:1]


def _merge_tools(obs: list[Observation]) -> list[ToolSpec]:
    out: dict[Path, ToolSpec] = {}
    for o in obs:
        for t in o.tools:
            have = out.get(t.path)
            if have is None:
                out[t.path] = t
            else:
                have.calls += t.calls
                have.args = have.args or t.args
                have.id = have.id or t.id
                have.index = have.index or t.index
                have.index_root = have.index_root or t.index_root
    return list(out.values())


def _merge_fragments(obs: list[Observation]) -> list[Fragment]:
    out: dict[object, Fragment] = {}
    for o in obs:
        for f in o.fragments:
            out.setdefault((f.path, f.cond), f)
    return list(out.values())


# ---------------------------------------------------------------- what each mapping rests on


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
        shown = ", ".join(f"{c.show()} ({shorten(c.text, 24)!r})" for c in rivals[:2])
        basis += f"; picked over {len(rivals)} other candidate(s): {shown}"
    confidence: Confidence = "sure"
    if cand.guessed:
        basis, confidence = "empty or null here and named like text", "guess"
    elif cand.separator or cand.revised or (n > 1 and cand.bodies < n):
        confidence = "likely"
    return Mapping(what, cand.show(), basis, confidence)


def _mappings(inf: Inference) -> None:
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


def _todos(inf: Inference) -> None:
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


# ---------------------------------------------------------------- the entry point


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
        before = decide(obs[:i], picks)
        after = inf if i == len(obs) - 1 else decide(obs[: i + 1], picks)
        inf.changes.extend(_changes(obs[i].label, before, after))
    return inf


def _changes(label: str, before: Inference, after: Inference) -> list[str]:
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
