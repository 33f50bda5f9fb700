"""The user's picks and the questions: choosing between candidates the bodies leave open.

``--pick FIELD=PATH`` (or a click in the notebook's widget) overrides a choice; two candidates
too close to call are a :class:`~.inference.Question` with sample values, never a silent choice
of the weaker one; two unnamed counts taken in order are one too. A pick that names nothing in
the bodies is one ``LlmError`` listing what is there.
"""

from __future__ import annotations

from ...core.errors import ErrorCode, LlmError
from .finish import FinishField
from .inference import Option, Question
from .lua_text import Path, sample, show_path
from .text import Candidate, same_text
from .usage import Role, UsageFound, UsagePath

__all__ = [
    "CLOSE",
    "PICK_FIELDS",
    "apply_usage_picks",
    "choose",
    "decide_finish",
    "normalise_picks",
    "usage_questions",
]

#: What ``--pick FIELD=PATH`` may choose (``input``/``output`` are ``prompt``/``completion``).
PICK_FIELDS = ("text", "reasoning", "finish", "prompt", "completion", "total")
_PICK_ALIASES = {"input": "prompt", "output": "completion"}
#: A runner-up scoring at least this share of the best is too close to call.
CLOSE = 0.75


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


def choose(
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
    options = [Option(c.show(), sample(c.text, 60), c.score) for c in [best, *close[:3]]]
    return best, Question(field_name, options)


def usage_questions(usage: UsageFound, picks: dict[str, str]) -> list[Question]:
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


def apply_usage_picks(usage: UsageFound, picks: dict[str, str], all_ints: set[Path]) -> None:
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


def decide_finish(fields: list[FinishField], pick: str | None) -> list[FinishField]:
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
