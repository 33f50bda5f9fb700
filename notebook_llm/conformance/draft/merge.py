"""Several bodies merged into one reading: candidates scored over the bodies, the union of the
finish values and usage fields each showed, one end with the alternatives each body ended with.

A candidate found in more bodies, with more text, wins; the same answer twice (pieces, and the
whole text at the end) is one candidate, the one sent in more payloads; per usage role only the
surest evidence is kept; a finish value final in one body and a progress value in another is no
finish; end events that differ (``response.completed``, ``response.incomplete``) become one end
with alternatives.
"""

from __future__ import annotations

from .finish import EndSpec, FinishField, end_family
from .lua_text import Path, show_path
from .observe import Observation
from .text import Candidate, same_text
from .tools import Fragment, ToolSpec
from .usage import UsageFound

__all__ = [
    "merge_candidates",
    "merge_end",
    "merge_finish",
    "merge_fragments",
    "merge_tools",
    "merge_usage",
]


def merge_candidates(lists: list[list[Candidate]]) -> list[Candidate]:
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
                have.undecided = have.undecided and c.undecided
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


def merge_finish(lists: list[list[FinishField]]) -> list[FinishField]:
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


def merge_usage(found: list[UsageFound]) -> UsageFound:
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


def merge_end(obs: list[Observation]) -> tuple[EndSpec, list[str]]:
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


def merge_tools(obs: list[Observation]) -> list[ToolSpec]:
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


def merge_fragments(obs: list[Observation]) -> list[Fragment]:
    out: dict[object, Fragment] = {}
    for o in obs:
        for f in o.fragments:
            out.setdefault((f.path, f.cond), f)
    return list(out.values())
