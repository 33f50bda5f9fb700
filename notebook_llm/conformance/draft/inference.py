"""What a draft is written from: the decided mappings, the questions and the :class:`Inference`.

Plain data, shared by the steps that fill it (:mod:`.choices`, :mod:`.basis`, :mod:`.infer`) and
the writer. Every decided mapping is a :class:`Mapping`: what it maps, where, what it rests on
and how sure it is (``sure``: structure and names agree; ``likely``: one of them; ``guess``:
neither, said as a TODO).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ...adapters.lua.finish_vocabulary import finish_meaning
from .finish import EndSpec, FinishField
from .framing import Body
from .text import Candidate
from .tools import Fragment, ToolSpec
from .usage import UsageFound

__all__ = ["Confidence", "Inference", "Mapping", "Option", "Question"]

Confidence = Literal["sure", "likely", "guess"]


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
