"""Hostile and careless inputs to typed answers, images, DataFrames and the cost cap: each is one
``LlmError`` line (or the answer a user expects), never a bare traceback, never a key shown."""

from __future__ import annotations

import base64
import dataclasses
import io
import math
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pydantic
import pytest
from PIL import Image

import notebook_llm
from notebook_llm import Engine, ErrorCode, LlmError
from notebook_llm.adapters.mock import MockServer
from notebook_llm.api.cost_cap import Budget
from notebook_llm.core.images import describe, figure_png, image_block, thumbnail_data_url
from notebook_llm.core.protocol import ImageBlock
from notebook_llm.core.response_schema import as_schema
from notebook_llm.engine import pricing
from notebook_llm.engine.pricing import set_price

map_ = notebook_llm.map


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[MockServer]:
    monkeypatch.setattr(pricing, "_session", {})  # prices set by a test end with it
    with MockServer() as server:
        yield server


@pytest.fixture
def engine(srv: MockServer) -> Engine:
    eng = Engine(config_file=False, env_file=False, retries=0)
    eng.add_provider("m", adapter="openai", base_url=srv.url + "/v1", model="echo")
    return eng


def one_line(err: LlmError) -> None:
    assert "\n" not in err.message
    assert "Traceback" not in str(err)


# ------------------------------------------------------------------------------ answers


OBJ = as_schema({"type": "object", "properties": {"a": {"type": "number"}}})


@pytest.mark.parametrize(
    "answer",
    [
        "[" * 100_000 + "]" * 100_000,  # nested past the JSON decoder's recursion limit
        '{"a": ' + "1" * 5_000 + "}",  # an integer past Python's digit limit
        '{"a": NaN}',  # not JSON
        '{"a": Infinity}',
    ],
)
def test_a_hostile_answer_is_a_schema_mismatch(answer: str) -> None:
    with pytest.raises(LlmError) as info:
        OBJ.validate(answer)
    assert info.value.code == ErrorCode.SCHEMA_MISMATCH
    assert info.value.details["raw"] == answer
    one_line(info.value)


@pytest.mark.parametrize(
    "answer",
    [
        '```json\n{"a": 1}\n```',
        '```{"a": 1}```',
        '```json {"a": 1} ```',
        'Here is the JSON:\n\n```json\n{"a": 1}\n```\n\nLet me know if you need more.',
    ],
)
def test_one_fenced_json_block_is_the_answer(answer: str) -> None:
    assert OBJ.validate(answer) == {"a": 1}


@pytest.mark.parametrize(
    "answer",
    [
        '{"a": 1}\nDone.',  # bare JSON then prose: not taken apart
        '```json\n{"a": 1}\n```\nor\n```json\n{"a": 2}\n```',  # two blocks: which one?
        '```json\n{"a": 1}',  # never closed
    ],
)
def test_what_is_not_one_json_answer_is_a_mismatch(answer: str) -> None:
    with pytest.raises(LlmError) as info:
        OBJ.validate(answer)
    assert info.value.code == ErrorCode.SCHEMA_MISMATCH


class Positive(pydantic.BaseModel):
    x: int

    @pydantic.field_validator("x")
    @classmethod
    def check(cls, v: int) -> int:
        if v < 0:
            raise RuntimeError("negative")  # not a ValueError: pydantic passes it through
        return v


def test_a_validator_that_raises_something_else_is_a_mismatch() -> None:
    schema = as_schema(Positive)
    assert schema.validate('{"x": 1}') == Positive(x=1)
    with pytest.raises(LlmError) as info:
        schema.validate('{"x": -1}')
    assert info.value.code == ErrorCode.SCHEMA_MISMATCH
    assert "RuntimeError: negative" in info.value.message


# ------------------------------------------------------------------------------ schemas


def deep_schema(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "array", "items": node}
    return node


class Callback(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    f: Any
    g: io.BytesIO


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "strin"},
        {"type": "object", "properties": {"a": {"type": 5}}},
        {"type": "integer", "minimum": "3"},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
        {"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}},
        deep_schema(3_000),
        Callback,
    ],
    ids=["type", "type-number", "minimum", "dangling-ref", "remote-ref", "deep", "model"],
)
def test_a_bad_schema_is_refused_before_anything_is_sent(schema: Any) -> None:
    with pytest.raises(LlmError) as info:
        as_schema(schema)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    one_line(info.value)


@dataclasses.dataclass
class Item:
    name: str
    tags: list[str] = dataclasses.field(default_factory=list)
    note: str | None = None


@dataclasses.dataclass
class Order:
    items: list[Item]


def test_recursive_schemas_and_nested_dataclasses_still_work() -> None:
    tree = {
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
    }
    assert as_schema(tree).validate('{"kids": [{"kids": []}]}') == {"kids": [{"kids": []}]}

    got = as_schema(Order).validate('{"items": [{"name": "a"}]}')
    assert got == Order([Item("a")])


# ------------------------------------------------------------------------------ images


def png(size: tuple[int, int] = (8, 8)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size).save(buf, "PNG")
    return buf.getvalue()


SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


@pytest.mark.parametrize(
    "url",
    [
        "data:image/svg+xml;base64," + base64.b64encode(SVG).decode(),
        "data:text/html;base64," + base64.b64encode(SVG).decode(),
        "data:image/png;base64,not base64 at all!",
    ],
)
def test_a_data_url_must_hold_an_image(url: str) -> None:
    with pytest.raises(LlmError) as info:
        image_block(url)
    assert info.value.code == ErrorCode.INVALID_OPTIONS


def test_a_data_url_says_what_it_really_is() -> None:
    data = png()
    block = image_block("data:image/jpeg;base64," + base64.b64encode(data).decode())
    assert block.media_type == "image/png"


def test_an_image_url_is_shown_without_credentials_or_query() -> None:
    block = image_block("https://user:hunter2@example.com/cat.png?sig=abc123&key=SECRET99")
    shown = describe(block)
    assert "hunter2" not in shown
    assert "abc123" not in shown
    assert "SECRET99" not in shown
    assert "example.com/cat.png" in shown
    assert image_block("HTTPS://example.com/cat.png").url == "HTTPS://example.com/cat.png"


def test_a_huge_image_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from notebook_llm.core import images

    monkeypatch.setattr(images, "MAX_IMAGE_BYTES", 1000)
    with pytest.raises(LlmError) as info:
        image_block(png((300, 300)) + b"\0" * 2000)
    assert info.value.code == ErrorCode.INPUT_TOO_LARGE
    one_line(info.value)


def test_a_thumbnail_of_a_huge_picture_is_not_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    from notebook_llm.core import images

    monkeypatch.setattr(images, "THUMBNAIL_MAX_PIXELS", 100 * 100)
    block = image_block(png((200, 100)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert thumbnail_data_url(block) is None
        assert describe(block) == "image/png 200x100"
    assert thumbnail_data_url(image_block(png((50, 50)))) is not None


def test_a_picture_over_pil_bomb_warning_warns_nothing() -> None:
    # a 10,000 x 10,000 black PNG is small on disk; PIL warns about its pixel count
    block = ImageBlock(
        data=base64.b64encode(png((10_000, 10_000))).decode(), media_type="image/png"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert describe(block) == "image/png 10000x10000"
        assert thumbnail_data_url(block) is None


def test_a_figure_that_cannot_be_drawn_is_one_line() -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(0.001, 0.001))
    with pytest.raises(LlmError) as info:
        image_block(fig)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    one_line(info.value)
    assert figure_png(Figure()).startswith(b"\x89PNG")  # no axes is fine: a blank picture


# ------------------------------------------------------------------------------ DataFrames


REVIEWS = pd.DataFrame({"text": ["good", "bad"], "n": [1, 2]})


@pytest.mark.parametrize("template", ["{n.real.foo}", "{n[0]}", "{text[zz]}"])
def test_a_template_that_fails_on_a_value_is_one_line(
    engine: Engine, srv: MockServer, template: str
) -> None:
    with pytest.raises(LlmError) as info:
        map_(REVIEWS, template=template, engine=engine, provider="m", progress=False)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    one_line(info.value)
    assert srv.requests == []


@pytest.mark.parametrize("missing", [np.nan, None, pd.NA])
def test_an_empty_cell_in_a_templated_column_is_named_and_nothing_is_sent(
    engine: Engine, srv: MockServer, missing: Any
) -> None:
    df = pd.DataFrame({"text": ["good", missing], "other": [None, None]}, index=["a", "b"])
    with pytest.raises(LlmError) as info:
        map_(df, template="Review: {text}", engine=engine, provider="m", progress=False)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert "{text}" in info.value.message
    assert "'b'" in info.value.message  # the row's index label
    one_line(info.value)
    assert srv.requests == []


@pytest.mark.parametrize("dtype", [object, "string"])  # "string": its empty cell is pd.NA
def test_a_missing_value_in_a_series_is_named(engine: Engine, srv: MockServer, dtype: Any) -> None:
    with pytest.raises(LlmError) as info:
        map_(pd.Series(["a", None], dtype=dtype), engine=engine, provider="m", progress=False)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert ".dropna()" in info.value.message
    assert srv.requests == []


def test_integer_column_names_can_be_used(engine: Engine, srv: MockServer) -> None:
    df = pd.DataFrame({0: ["x"], 1: ["y"]})
    out = map_(df, template="{0}-{1}", engine=engine, provider="m", progress=False)
    assert out["answer"].tolist() == ["x-y"]


def test_a_schema_field_named_error_is_kept(engine: Engine) -> None:
    schema = {
        "type": "object",
        "properties": {"error": {"type": "string"}},
        "required": ["error"],
    }
    out = map_(
        REVIEWS, template="{text}", schema=schema, engine=engine, provider="m", progress=False
    )
    assert out["error"].tolist() == ["good", "bad"]  # the mock echoes the prompt in strings
    assert out["llm_error"].isna().all()


def test_duplicate_and_multi_indexes_and_zero_rows(engine: Engine) -> None:
    dup = pd.DataFrame({"text": ["x", "y"]}, index=[1, 1])
    out = map_(dup, template="{text}", engine=engine, provider="m", progress=False)
    assert out["answer"].tolist() == ["x", "y"]
    assert out.index.tolist() == [1, 1]
    multi = dup.set_index(pd.MultiIndex.from_tuples([("a", 1), ("a", 2)]))
    out = map_(multi, template="{text}", engine=engine, provider="m", progress=False)
    assert out.index.equals(multi.index)
    empty = map_(dup.iloc[:0], template="{text}", engine=engine, provider="m", progress=False)
    assert list(empty.columns) == ["answer", "error"]
    assert len(empty) == 0


# ------------------------------------------------------------------------------ cost caps


@pytest.mark.parametrize("cap", [math.nan, -1.0, "1", True])
def test_a_cap_that_is_not_a_cost_is_refused(engine: Engine, srv: MockServer, cap: Any) -> None:
    set_price("echo", 1.0, 2.0)
    with pytest.raises(LlmError) as info:
        map_(["a"], engine=engine, provider="m", max_cost=cap, progress=False)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert srv.requests == []


@pytest.mark.parametrize("cap", [math.nan, -1.0])
def test_a_budget_that_is_not_a_cost_is_refused(engine: Engine, cap: float) -> None:
    with pytest.raises(LlmError) as info:
        Budget(cap, engine)
    assert info.value.code == ErrorCode.INVALID_OPTIONS


def test_a_concurrent_batch_does_not_overshoot_the_cap_by_its_concurrency(
    engine: Engine, srv: MockServer
) -> None:
    # lorem answers ~2,000 tokens, far over the 256 the estimate assumes: each answer costs
    # about $0.02, so the estimate passes a $0.03 cap and the first answers show it was wrong
    set_price("lorem", 1.0, 10.0)
    prompts = [f"p{i}" for i in range(10)]
    out = map_(
        prompts,
        engine=engine,
        provider="m",
        model="lorem",
        concurrency=8,
        max_cost=0.03,
        progress=False,
    )
    done = [r for r in out if not isinstance(r, LlmError)]
    refused = [r for r in out if isinstance(r, LlmError)]
    assert all(r.code == ErrorCode.BUDGET_EXCEEDED for r in refused)
    # what concurrency=1 would send: the answers until the spent cost reaches the cap
    assert 1 <= len(srv.requests) <= 3
    assert len(done) == len(srv.requests)


class Tree(pydantic.BaseModel):
    v: int
    kids: list[Tree]


class Linked(pydantic.BaseModel):
    v: int
    next: Linked | None


@pytest.mark.parametrize(
    "schema",
    [
        Tree,
        Linked,
        {
            "type": "object",
            "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["kids"],
        },
    ],
    ids=["list-of-self", "optional-self", "ref-to-root"],
)
def test_the_mock_answers_a_recursive_schema_with_a_valid_instance(
    engine: Engine, schema: Any
) -> None:
    done = engine.complete_sync("m", prompt="hi", schema=schema)
    assert done.finish is not None
    assert done.finish.kind == "stop"
    assert done.parsed is not None


def test_a_recording_keeps_no_credentials_of_an_image_url(engine: Engine, tmp_path: Any) -> None:
    url = "https://user:hunter2pass@example.com/cat.png?key=SECRET-123456&sig=" + "x" * 300
    cassette = tmp_path / "rec.json"
    with engine.recording(cassette):
        engine.complete_sync("mock", "echo", prompt="see", images=url)
    text = cassette.read_text()
    assert "hunter2pass" not in text
    assert "SECRET-123456" not in text
    assert "example.com/cat.png" in text
    with engine.replaying(cassette, strict=True):
        again = engine.complete_sync("mock", "echo", prompt="see", images=url)
    assert again.text == "see"


@pytest.mark.parametrize("path", ["/dev/zero", "/tmp"])
def test_an_image_path_that_is_not_a_file_is_one_line(path: str) -> None:
    with pytest.raises(LlmError) as info:
        image_block(path)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert "not a file" in info.value.message


def test_a_capped_batch_stopped_while_waiting_sends_nothing_more(
    engine: Engine, srv: MockServer
) -> None:
    from notebook_llm.core.cancel import StopSignal

    # a full answer (4,096 tokens) is reserved at ~$0.04: under a $0.05 cap one request goes at
    # a time, so the other workers wait for their turn (the estimate, ~$0.015, passes the cap)
    set_price("lorem", 1.0, 10.0)
    stop = StopSignal()
    seen: list[int] = []

    def progress(done: int, total: int) -> None:
        seen.append(done)
        if done == 1:
            stop.set("stopped by the test")

    out = map_(
        [f"p{i}" for i in range(6)],
        engine=engine,
        provider="m",
        model="lorem",
        concurrency=4,
        max_cost=0.05,
        stop_signal=stop,
        progress=progress,
    )
    # the first request goes alone under this cap; it is answered, then the stop comes: the
    # workers waiting for their turn must not send
    assert len(srv.requests) == 1
    assert not isinstance(out[0], LlmError)
    assert all(isinstance(r, LlmError) and r.code == ErrorCode.ABORTED for r in out[1:])


def test_a_typed_row_cut_at_max_tokens_says_so(engine: Engine) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    df = pd.DataFrame({"text": ["a long review text with many words in it", "b"]})
    out = map_(
        df,
        template="{text}",
        schema=schema,
        max_tokens=3,
        engine=engine,
        provider="m",
        progress=False,
    )
    assert out["a"].isna().all()
    assert all(str(e).startswith("MAX_TOKENS") for e in out["error"])
    assert "max_tokens" in out["error"][0]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "items": {"type": "string"}, "minItems": 10**9},
        {"type": "string", "minLength": 10**9},
    ],
    ids=["items", "chars"],
)
def test_the_mock_does_not_build_a_billion_of_anything(engine: Engine, schema: Any) -> None:
    from notebook_llm.adapters.mock.schema_answers import instance

    assert len(instance(schema, "hi")) <= 10_000
    with pytest.raises(LlmError) as info:
        engine.complete_sync("m", prompt="hi", schema=schema)
    assert info.value.code == ErrorCode.SCHEMA_MISMATCH  # honest: the mock could not comply
    assert len(info.value.message) < 500  # the validator's quote of the value is cut


def test_a_long_wrong_answer_makes_a_short_message() -> None:
    answer = '{"a": "' + "x" * 1_000_000 + '"}'
    with pytest.raises(LlmError) as info:
        OBJ.validate(answer)
    assert len(info.value.message) < 500
    assert info.value.details["raw"] == answer


def test_duplicate_column_names_are_refused(engine: Engine, srv: MockServer) -> None:
    df = pd.DataFrame([["first", "second"]], columns=["text", "text"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pandas' "some columns will be omitted" must not show
        with pytest.raises(LlmError) as info:
            map_(df, template="{text}", engine=engine, provider="m", progress=False)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert "'text'" in info.value.message
    assert srv.requests == []


def test_a_cap_of_zero_sends_what_is_free(engine: Engine, srv: MockServer) -> None:
    set_price("echo", 0.0, 0.0)  # a local model: free
    out = map_(["a", "b", "c"], engine=engine, provider="m", max_cost=0, progress=False)
    assert [r.text for r in out] == ["a", "b", "c"]
    assert len(srv.requests) == 3
