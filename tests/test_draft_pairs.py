"""Drafts that generalise: draft from one body, replay a different body of the same API.

(a) made-up APIs of varied shape (``tests/draft_bodies.py``): each writes two bodies with another
    text, another finish value (the second one never shown to the drafter) and other counts;
    the draft from each maps the other's text, finish kind, token counts and reasoning;
(b) the real recorded families (``tests/fixtures/wire``): a draft from each 200 body maps every
    other body of its family to the same text, finish and usage as the built-in adapter;
(c) several bodies: the evidence merges, and the report says what the second body changed.

Every pair is its own parametrized case, named after what it tries.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from draft_bodies import API, APIS, Answer, Call, cohere_calls, responses_calls, whole_calls_json

from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.conformance import load_fixture, replay_fixture
from notebook_llm.conformance.draft import draft_adapter
from notebook_llm.conformance.draft.framing import parse_body
from notebook_llm.conformance.fixtures import CONTENT_TYPES, Fixture
from notebook_llm.core.completion import Completion

ROOT = Path(__file__).resolve().parent.parent
WIRE = ROOT / "tests" / "fixtures" / "wire"

A = Answer(("The ", "quick ", "brown ", "fox ", "jumps over it."), "", (11, 5), ("Foxes jump. ",))
B = Answer(
    ("Paris ", "is the ", "capital ", "of France, ", "a city of lights."),
    "",
    (20, 9),
    ("Capitals are ", "easy."),
)


def _answers(api: API) -> tuple[Answer, Answer]:
    (f1, _), (f2, _) = api.finishes
    thinking = api.has_reasoning
    a = replace(A, finish=f1, thinking=A.thinking if thinking else ())
    b = replace(B, finish=f2, thinking=B.thinking if thinking else ())
    return a, b


def _fixture(raw: bytes, name: str) -> Fixture:
    framing = parse_body(raw).framing
    return Fixture(Path(name), raw, framing, 200, CONTENT_TYPES[framing])


def _expected_text(api: API, answer: Answer) -> str:
    if api.words:
        return "".join(w.upper() + " " for w in answer.text.split())
    return answer.text


def _cases() -> list[Any]:
    out = []
    for api in APIS:
        a, b = _answers(api)
        kinds = dict(api.finishes)
        out.append(
            pytest.param(
                api,
                a,
                b,
                kinds[b.finish],
                id=f"{api.name}: {a.finish or 'no finish'} -> {b.finish or 'no finish'}",
            )
        )
        out.append(
            pytest.param(
                api,
                b,
                a,
                kinds[a.finish],
                id=f"{api.name}: {b.finish or 'no finish'} -> {a.finish or 'no finish'}",
            )
        )
    return out


def _check(api: API, got: Completion, want: Answer, kind: str, summary: str) -> None:
    assert got.text == _expected_text(api, want), summary
    assert got.finish is not None, summary
    assert got.finish.kind == kind, summary
    if kind == "other":  # a value outside the vocabulary: kept, never an error
        assert got.finish.raw == want.finish
    if kind == "error":  # a content filter: an error named by the value, the answer kept
        assert got.finish.failure is not None
        assert got.finish.failure.code == want.finish.upper()
    assert got.usage is not None, summary
    assert (got.usage.input_tokens, got.usage.output_tokens) == want.counts, summary
    assert got.reasoning == "".join(want.thinking), summary


@pytest.mark.parametrize(("api", "first", "second", "kind"), _cases())
def test_a_a_draft_from_one_body_maps_another_body_of_a_made_up_api(
    api: API, first: Answer, second: Answer, kind: str
) -> None:
    draft = draft_adapter(api.make(first), "madeup")
    first_kind = dict(api.finishes)[first.finish]
    # the kit passes the draft on its own body (one that ends in a content filter is an error,
    # one that ends with a value outside the vocabulary a warning)
    assert draft.ok or first_kind in ("error", "other"), draft.summary()
    assert draft.check is not None
    assert draft.check.ok or first_kind == "error", draft.summary()
    adapter = LuaAdapter.from_source(draft.source, name="madeup")
    result = replay_fixture(adapter, _fixture(api.make(second), "second"))
    assert result.ok or kind == "error", draft.summary() + "\n" + "\n".join(result.problems)
    _check(api, result.completion, second, kind, draft.summary())
    print(
        f"\n{api.name}: drafted from a body ending {first.finish!r}, replayed one ending "
        f"{second.finish!r}: text, finish {kind}, usage {second.counts} right"
    )


# ---------------------------------------------------------------- (b) the real families


def _ok_bodies(family: str) -> list[Path]:
    return [
        p
        for p in sorted((WIRE / family).iterdir())
        if not p.name.startswith("error") and p.suffix in (".sse", ".ndjson", ".json")
    ]


def _outcome(adapter: LuaAdapter, fixture: Fixture) -> tuple[str, str | None, Any]:
    c = replay_fixture(adapter, fixture).completion
    usage = tuple(sorted(c.usage.to_dict().items())) if c.usage else None
    return c.text, c.finish.kind if c.finish else None, usage


#: Bodies of a family that are another API: Ollama's /api/generate puts the text in
#: `response`, /api/chat in `message.content` (the built-in reads both because it was written to).
OTHER_API = {"generate_stream_thinking.ndjson"}


#: Vertex AI's streamed arguments address each piece by a JSONPath (`partialArgs`): a draft
#: finds the calls but not their arguments (the built-in was written to rebuild them).
PARTIAL_ARGS = {"vertex_stream_function_call_partial_args.sse"}


def _builtin(family: str) -> LuaAdapter:
    return LuaAdapter.from_file(ROOT / "adapters" / f"{family}.lua")


def _shows(family: str, body: Path) -> tuple[bool, bool]:
    """Whether the built-in finds text, and tool calls, in ``body``."""
    c = replay_fixture(_builtin(family), load_fixture(body)).completion
    return bool(c.text), bool(c.tool_calls)


def _family_pairs() -> list[Any]:
    """Every (draft from, replay) pair of a family's 200 bodies that the first can teach: a
    non-stream body drafts no stream hook, and a body with no text (tool calls only) cannot
    say where another body's text is (its own calls are checked in test_draft.py)."""
    out = []
    for family in sorted(p.name for p in WIRE.iterdir() if p.is_dir()):
        bodies = [b for b in _ok_bodies(family) if b.name not in OTHER_API]
        shows = {b: _shows(family, b) for b in bodies}
        for source in bodies:
            for other in bodies:
                if other == source or (source.suffix == ".json" and other.suffix != ".json"):
                    continue
                if shows[other][0] and not shows[source][0]:
                    continue
                calls = (
                    shows[source][1]
                    and shows[other][1]
                    and not {source.name, other.name} & PARTIAL_ARGS
                )
                label = f"{family}: {source.name} -> {other.name}" + (
                    " (+ tool calls)" if calls else ""
                )
                out.append(pytest.param(family, source, other, calls, id=label))
    return out


_DRAFTS: dict[Path, str] = {}


def _drafted(source: Path) -> str:
    if source not in _DRAFTS:
        _DRAFTS[source] = draft_adapter(source, "family", check=False).source
    return _DRAFTS[source]


@pytest.mark.parametrize(("family", "source", "other", "calls"), _family_pairs())
def test_b_a_draft_from_one_recorded_body_maps_another_of_its_family_like_the_builtin(
    family: str, source: Path, other: Path, calls: bool
) -> None:
    drafted = LuaAdapter.from_source(_drafted(source), name="family")
    fx = load_fixture(other)
    mine, theirs = _outcome(drafted, fx), _outcome(_builtin(family), fx)
    assert mine == theirs
    if calls:
        got = replay_fixture(drafted, fx).completion.tool_calls
        want = replay_fixture(_builtin(family), fx).completion.tool_calls
        assert [(t.name, t.args) for t in got] == [(t.name, t.args) for t in want]


# ---------------------------------------------------------------- (c) tool calls

ONE_CALL = [Call("call_a1", "get_weather", {"city": "Paris", "unit": "C"})]
TWO_CALLS = [
    Call("call_b1", "lookup", {"q": "capital of France", "n": 3}),
    Call("call_b2", "get_time", {"tz": "Europe/Paris"}),
]
CALL_APIS = {
    "responses-like: added / arguments.delta / done / completed": (responses_calls, "tool-calls"),
    "cohere-like: tool-call-start / tool-call-delta by index": (cohere_calls, "tool-calls"),
    "non-stream JSON: actions[*].tool {name, params}": (whole_calls_json, "tool-calls"),
}


@pytest.mark.parametrize("api", list(CALL_APIS))
def test_c_a_draft_from_a_body_with_one_call_maps_two_calls_of_another(api: str) -> None:
    make, kind = CALL_APIS[api]
    draft = draft_adapter(make(ONE_CALL, "Let me look."), "calls")
    assert draft.ok, draft.summary()
    assert "tool calls" in draft.inference.mappings, draft.summary()
    adapter = LuaAdapter.from_source(draft.source, name="calls")
    got = replay_fixture(adapter, _fixture(make(TWO_CALLS), "second")).completion
    assert [(t.name, t.args) for t in got.tool_calls] == [(c.name, c.args) for c in TWO_CALLS], (
        draft.summary()
    )
    assert got.finish is not None
    assert got.finish.kind == kind


# ---------------------------------------------------------------- (d) a second, adversarial set

from draft_bodies_more import MORE, MORE_CALLS, More, answers  # noqa: E402


def _more_cases() -> list[Any]:
    out = []
    for api in MORE:
        a, b = answers(api)
        for first, second in ((a, b), (b, a)):
            tried = [
                f"finish {first.finish or 'none'!r} -> {second.finish or 'none'!r}",
                "a 300-piece second body" if second is b and api.long_second else "",
                "unicode and escapes" if api.unicode else "",
                "no usage" if not api.usage else "",
            ]
            label = f"{api.name}: " + ", ".join(t for t in tried if t)
            out.append(pytest.param(api, first, second, id=label))
    return out


@pytest.mark.parametrize(("api", "first", "second"), _more_cases())
def test_d_a_draft_maps_another_body_of_a_second_set_of_made_up_apis(
    api: More, first: Answer, second: Answer
) -> None:
    kinds = dict(api.finishes)
    draft = draft_adapter(api.make(first), "madeup")
    assert draft.ok or kinds[first.finish] in ("error", "other"), draft.summary()
    adapter = LuaAdapter.from_source(draft.source, name="madeup")
    result = replay_fixture(adapter, _fixture(api.make(second), "second"))
    got, kind = result.completion, kinds[second.finish]
    assert result.ok or kind == "error", draft.summary() + "\n" + "\n".join(result.problems)
    assert got.text == second.text, draft.summary()
    assert got.finish is not None, draft.summary()
    assert got.finish.kind == kind, draft.summary()
    if kind == "other":
        assert got.finish.raw == second.finish
    if api.usage:
        assert got.usage is not None, draft.summary()
        assert (got.usage.input_tokens, got.usage.output_tokens) == second.counts, draft.summary()
    else:
        assert got.usage is None, draft.summary()


@pytest.mark.parametrize("api", list(MORE_CALLS))
def test_d_calls_under_other_names_map_with_their_ids(api: str) -> None:
    make = MORE_CALLS[api]
    draft = draft_adapter(make(ONE_CALL, "Let me look."), "calls")
    assert draft.ok, draft.summary()
    adapter = LuaAdapter.from_source(draft.source, name="calls")
    got = replay_fixture(adapter, _fixture(make(TWO_CALLS), "second")).completion
    want = [(c.id, c.name, c.args) for c in TWO_CALLS]
    assert [(t.id, t.name, t.args) for t in got.tool_calls] == want, draft.summary()
    assert got.finish is not None
    assert got.finish.kind == "tool-calls"


# ---------------------------------------------------------------- (e) a first body that is short

SHORT = {"one word": ("Hello!",), "two pieces": ("Hi", " there."), "one sentence": ("Sure.",)}

#: A first body that cannot tell: one bare word is not known to need a space after it. These
#: pairs are held to everything else (the words in order, the finish, the usage); only the spaces
#: between words are not promised.
UNDECIDABLE = {
    ("shout-like bare words, n_in/n_out", "one word"),
    ("shout-like bare words, n_in/n_out", "one sentence"),
}


def _short_cases() -> list[Any]:
    out = []
    for api in [*APIS, *MORE]:
        for what, pieces in SHORT.items():
            out.append(pytest.param(api, pieces, id=f"{api.name}: drafted from {what}"))
    return out


@pytest.mark.parametrize(("api", "pieces"), _short_cases())
def test_e_a_draft_from_a_short_body_maps_a_longer_one(
    api: API | More, pieces: tuple[str, ...], tmp_path: Path
) -> None:
    """A first body of one or two pieces (a greeting): whether its text is pieces or the whole
    text so far, and which string is the text, must still come out right on a longer body. The
    first body is given as a file named by its framing (a one-line NDJSON file is a stream)."""
    (f1, _), (f2, kind) = api.finishes
    second = Answer(("Another ", "and ", "longer ", "second ", "answer ", "now."), f2, (27, 9))
    raw_second = api.make(second)
    framing = parse_body(raw_second).framing
    first = tmp_path / f"first.{ {'sse': 'sse', 'ndjson': 'ndjson', 'json': 'json'}[framing] }"
    first.write_bytes(api.make(Answer(pieces, f1, (5, 2))))
    draft = draft_adapter(first, "short", check=False)
    got = replay_fixture(
        LuaAdapter.from_source(draft.source, name="short"), _fixture(raw_second, "second")
    ).completion
    want = second.text
    if getattr(api, "words", False):
        want = "".join(w.upper() + " " for w in want.split())
    if (api.name, next(k for k, v in SHORT.items() if v == pieces)) in UNDECIDABLE:
        # the words, in order, with whatever separator the one-word body suggested
        assert got.text.replace(" ", "") == want.replace(" ", ""), draft.summary()
    else:
        assert got.text == want, draft.summary()
    assert got.finish is not None, draft.summary()
    assert got.finish.kind == kind, draft.summary()
    if getattr(api, "usage", True):
        assert got.usage is not None, draft.summary()
        assert (got.usage.input_tokens, got.usage.output_tokens) == (27, 9), draft.summary()
