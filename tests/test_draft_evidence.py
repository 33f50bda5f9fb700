"""A draft's evidence: several bodies merged, close candidates asked about, picks obeyed, and
a report that says what each mapping rests on.

(a) several bodies: what the second body changed is reported, and the draft holds for both;
(b) close candidates: never a silent choice: a question with samples, ``--pick`` to choose;
(c) the CLI: several bodies and ``--pick``; bad picks are one line.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from draft_bodies import Answer, ndjson, responses_like

from notebook_llm.__main__ import main
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.conformance import replay_fixture
from notebook_llm.conformance.draft import draft_adapter
from notebook_llm.conformance.draft.framing import parse_body
from notebook_llm.conformance.fixtures import CONTENT_TYPES, Fixture
from notebook_llm.core.errors import ErrorCode, LlmError

DONE = Answer(("The ", "quick ", "brown ", "fox."), "stop", (11, 5))
CUT = Answer(("Paris ", "is the ", "capital"), "max_output_tokens", (20, 9))


def _fixture(raw: bytes) -> Fixture:
    framing = parse_body(raw).framing
    return Fixture(Path("b"), raw, framing, 200, CONTENT_TYPES[framing])


# ---------------------------------------------------------------- (a) several bodies


def test_a_two_bodies_merge_their_end_events_and_the_report_says_what_changed() -> None:
    first, second = responses_like(DONE), responses_like(CUT)
    draft = draft_adapter([first, second], "two")
    assert draft.ok, draft.summary()
    assert [c.ok for c in draft.checks] == [True, True]
    end = draft.inference.end
    assert end.values == ["response.completed", "response.incomplete"]
    changes = "\n".join(draft.inference.changes)
    assert "body 2" in changes
    assert "'max_output_tokens' (length)" in changes or "'incomplete' (length)" in changes
    assert "changed" in draft.summary()
    # a third end of the same family, seen by neither body, still ends the answer
    failed = responses_like(replace(DONE, finish="failed"))
    got = replay_fixture(LuaAdapter.from_source(draft.source), _fixture(failed)).completion
    assert got.finish is not None
    assert got.finish.kind == "error"
    assert got.text == DONE.text


def test_a_usage_only_the_second_body_shows_is_found_and_reported() -> None:
    def body(words: list[str], usage: dict[str, int] | None) -> bytes:
        lines: list[object] = [{"piece": w} for w in words]
        last: dict[str, object] = {"done": True}
        if usage:
            last["tally"] = usage
        lines.append(last)
        return ndjson(lines)

    plain = body(["Hello ", "there."], None)
    counted = body(["Good ", "bye."], {"prompt_tokens": 4, "completion_tokens": 2})
    alone = draft_adapter(plain, "one")
    assert "usage" not in alone.inference.mappings
    both = draft_adapter([plain, counted], "both")
    assert both.ok, both.summary()
    assert "usage" in both.inference.mappings
    assert any("usage: found" in c for c in both.inference.changes), both.inference.changes
    got = replay_fixture(LuaAdapter.from_source(both.source), _fixture(counted)).completion
    assert got.usage is not None
    assert (got.usage.input_tokens, got.usage.output_tokens) == (4, 2)


def test_a_a_first_body_with_no_text_is_completed_by_the_second() -> None:
    calls_only = ndjson([{"call": {"name": "f", "args": {"x": 1}}}, {"done": True}])
    text = ndjson([{"piece": "Hello "}, {"piece": "there."}, {"done": True}])
    with pytest.raises(LlmError):
        draft_adapter(ndjson([{"done": True}, {"done": True}]), "nothing")
    draft = draft_adapter([calls_only, text], "both")
    assert any("text: found piece" in c for c in draft.inference.changes), draft.inference.changes
    got = replay_fixture(LuaAdapter.from_source(draft.source), _fixture(text)).completion
    assert got.text == "Hello there."


def test_a_a_body_that_confirms_everything_says_so() -> None:
    draft = draft_adapter([responses_like(DONE), responses_like(DONE)], "same")
    assert draft.inference.changes == ["body 2: confirmed every mapping (nothing changed)"]


def test_a_a_stream_and_a_non_stream_body_are_not_mixed() -> None:
    whole = json.dumps({"text": "hello there", "stop": "end"}).encode()
    with pytest.raises(LlmError) as info:
        draft_adapter([responses_like(DONE), whole], "mixed")
    assert "mix" in info.value.message
    assert info.value.code == ErrorCode.INVALID_OPTIONS


def test_a_every_mapping_says_what_it_rests_on_and_how_sure() -> None:
    draft = draft_adapter(responses_like(DONE), "said")
    for what in ("text", "usage", "finish", "end"):
        mapping = draft.inference.mappings[what]
        assert mapping.confidence in ("sure", "likely", "guess")
        assert mapping.basis
        assert f"{what} ({mapping.confidence})" in draft.source  # the comment above the line
    summary = draft.summary()
    assert "sure:" in summary


# ---------------------------------------------------------------- (b) close candidates

TWINS = ndjson(
    [
        {"en": "Hello there, my good friend. ", "fr": "Bonjour a toi, mon cher ami. "},
        {"en": "How are you today? ", "fr": "Comment vas-tu aujourd'hui ? "},
        {"done": True},
    ]
)


def test_b_two_close_candidates_are_a_question_never_a_silent_choice() -> None:
    draft = draft_adapter(TWINS, "twins")
    assert [q.field for q in draft.questions] == ["text"]
    options = {o.pick: o.sample for o in draft.questions[0].options}
    assert set(options) == {"en", "fr"}
    assert options["fr"].startswith("Bonjour")
    assert any("--pick text=" in t for t in draft.todos)
    summary = draft.summary()
    assert "--pick text=en" in summary
    assert "--pick text=fr" in summary
    assert draft.inference.mappings["text"].confidence == "likely"


def test_b_a_pick_chooses_the_other_candidate_and_ends_the_question() -> None:
    draft = draft_adapter(TWINS, "twins", picks={"text": "fr"})
    assert draft.questions == []
    assert draft.check is not None
    assert draft.check.completion.text.startswith("Bonjour")


@pytest.mark.parametrize(
    ("picks", "words"),
    [
        ({"text": "nowhere.at.all"}, "no such candidate"),
        ({"colour": "en"}, "not a field to pick"),
        ({"input": "en"}, "no integer field"),
        ({"finish": "en"}, "no finish field"),
    ],
)
def test_b_a_pick_that_names_nothing_is_one_line(picks: dict[str, str], words: str) -> None:
    with pytest.raises(LlmError) as info:
        draft_adapter(TWINS, "twins", picks=picks)
    assert words in info.value.message
    assert "\n" not in info.value.message


def test_b_unnamed_counts_are_a_guess_that_can_be_turned_round() -> None:
    lines = [{"t": "One two "}, {"t": "three four."}, {"end": True, "a": 7, "b": 3}]
    draft = draft_adapter(ndjson(lines), "guess")
    usage = draft.inference.usage.roles
    assert [p.confidence for p in usage["prompt"]] == ["guess"]
    assert [q.field for q in draft.questions] == ["prompt"]
    assert draft.check is not None
    assert draft.check.completion.usage is not None
    assert draft.check.completion.usage.input_tokens == 7
    turned = draft_adapter(ndjson(lines), "guess", picks={"input": "b"})
    assert turned.check is not None
    assert turned.check.completion.usage is not None
    got = turned.check.completion.usage
    assert (got.input_tokens, got.output_tokens) == (3, 7)
    assert turned.questions == []


# ---------------------------------------------------------------- (c) the CLI


def test_c_cli_drafts_from_several_bodies_with_a_pick(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a.sse", tmp_path / "b.sse"
    a.write_bytes(responses_like(DONE))
    b.write_bytes(responses_like(CUT))
    out = tmp_path / "mine.lua"
    rc = main(["draft-adapter", str(a), str(b), "--name", "mine", "--output", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert "b.sse:" in printed  # what the second body changed
    assert out.read_text().startswith("--[[")
    twins = tmp_path / "twins.ndjson"
    twins.write_bytes(TWINS)
    rc = main(
        ["draft-adapter", str(twins), "--name", "t", "--output", str(out), "--pick", "text=fr"]
    )
    assert rc == 0, capsys.readouterr().out
    assert '"fr"' in out.read_text()
    rc = main(["draft-adapter", str(twins), "--name", "t", "--output", str(out), "--pick", "text"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith("error: --pick 'text': write FIELD=PATH")
    assert err.count("\n") == 1


# ---------------------------------------------------------------- (d) the notebook


@pytest.fixture
def magics(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from IPython.core.interactiveshell import InteractiveShell

    from notebook_llm.engine.engine import Engine
    from notebook_llm.notebook.magics.adapter_magics import AdapterMagics

    sh = InteractiveShell.instance()
    engine = Engine(config_file=False, env_file=False)
    m = AdapterMagics(sh, engine=engine)
    sh.register_magics(m)
    cells: list[str] = []
    monkeypatch.setattr(sh, "set_next_input", lambda text, replace=False: cells.append(text))
    m.cells = cells  # type: ignore[attr-defined]
    yield m
    m.close()


def test_d_the_magic_drafts_into_a_file_and_adds_no_cell_so_run_all_is_stable(
    magics: object, tmp_path: Path
) -> None:
    from IPython.utils.capture import capture_output

    a, b = tmp_path / "a.sse", tmp_path / "b.sse"
    a.write_bytes(responses_like(DONE))
    b.write_bytes(responses_like(CUT))
    out = tmp_path / "drafted.lua"
    line = f"draft mine {a} {b} --output {out}"
    sh = magics.shell  # type: ignore[attr-defined]
    with capture_output() as cap:
        sh.run_line_magic("adapter", line)
    first = out.read_text()
    with capture_output():
        sh.run_line_magic("adapter", line)  # Run All again
    assert out.read_text() == first
    assert magics.cells == []  # type: ignore[attr-defined]
    shown = "\n".join(o.data.get("text/plain", "") for o in cap.outputs)
    assert "loaded adapter mine" in shown
    assert "b.sse:" in shown  # what the second body changed
    adapter = magics.engine.adapter("mine")  # type: ignore[attr-defined]
    got = replay_fixture(adapter, _fixture(responses_like(CUT))).completion
    assert got.finish is not None
    assert got.finish.kind == "max-tokens"


def test_d_close_candidates_get_a_widget_whose_choice_redrafts_and_reloads(
    magics: object, tmp_path: Path
) -> None:
    from IPython.utils.capture import capture_output

    body = tmp_path / "twins.ndjson"
    body.write_bytes(TWINS)
    out = tmp_path / "twins.lua"
    sh = magics.shell  # type: ignore[attr-defined]
    with capture_output():
        sh.run_line_magic("adapter", f"draft twins {body} --output {out}")
    choices = magics.last_choices  # type: ignore[attr-defined]
    assert choices is not None
    radio = choices.buttons["text"]
    labels = [label for label, _ in radio.options]
    assert any("Bonjour" in label for label in labels)
    assert any("Hello there" in label for label in labels)
    other = "en" if radio.value == "fr" else "fr"
    before = replay_fixture(magics.engine.adapter("twins"), _fixture(TWINS)).completion.text  # type: ignore[attr-defined]
    radio.value = other  # what a click does
    assert f'"{other}"' in out.read_text()
    assert f"--pick text={other}" in choices.status.value
    adapter = magics.engine.adapter("twins")  # type: ignore[attr-defined]
    got = replay_fixture(adapter, _fixture(TWINS)).completion
    assert got.text != before
    assert got.text.startswith("Bonjour" if other == "fr" else "Hello")


def test_d_a_bad_pick_in_the_magic_is_a_usage_error(magics: object, tmp_path: Path) -> None:
    from IPython.core.error import UsageError

    body = tmp_path / "twins.ndjson"
    body.write_bytes(TWINS)
    with pytest.raises(UsageError) as info:
        magics.shell.run_line_magic("adapter", f"draft twins {body} --pick text")  # type: ignore[attr-defined]
    assert "FIELD=PATH" in str(info.value)


def test_d_the_notebooks_draft_into_files_so_run_all_adds_no_cell() -> None:
    import json as json_

    root = Path(__file__).resolve().parent.parent / "notebooks"
    drafts = [
        line
        for nb in sorted(root.glob("*.ipynb"))
        for cell in json_.loads(nb.read_text())["cells"]
        if cell["cell_type"] == "code"
        for line in "".join(cell["source"]).splitlines()
        if line.startswith("%adapter draft")
    ]
    assert drafts, "writing_an_adapter.ipynb drafts an adapter"
    assert all("--output" in line for line in drafts), drafts
