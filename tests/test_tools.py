"""Tools: schemas from functions, argument checking, and the tool-calling loop."""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, TypedDict

import pytest
from waiting import GUARD

from notebook_llm import (
    BlockEnd,
    BlockStart,
    Completion,
    Engine,
    ErrorCode,
    Event,
    Finish,
    FinishReason,
    GenerateOptions,
    ImageBlock,
    LlmAdapter,
    LlmError,
    Message,
    StopSignal,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    ToolSchema,
    Usage,
    validate_stream,
)
from notebook_llm.api.tool_calling import (
    DECLINED,
    Tool,
    as_tool,
    check_arguments,
    format_result,
    parse_docstring,
    run_tools,
    schema_for_type,
    stream_tools,
    tool,
)
from notebook_llm.api.tool_calling.events import LoopEvent, StepStart, ToolOutcome, ToolRun

# ---------------------------------------------------------------------------------- helpers


def params(fn: Any) -> dict[str, Any]:
    return as_tool(fn).schema.parameters


def prop(fn: Any, name: str) -> dict[str, Any]:
    result: dict[str, Any] = params(fn)["properties"][name]
    return result


class Color(Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Point:
    """A point in the plane.

    Attributes:
        x: Horizontal.
        y: Vertical.
    """

    x: float
    y: float = 0.0


class Movie(TypedDict, total=False):
    title: str
    year: int


class Required(TypedDict):
    name: str


# ---------------------------------------------------------------------------------- schemas


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (list, {"type": "array"}),
        (tuple[str, ...], {"type": "array", "items": {"type": "string"}}),
        (set[str], {"type": "array", "items": {"type": "string"}}),
        (dict, {"type": "object"}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (dict[str, Any], {"type": "object"}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (int | None, {"type": ["integer", "null"]}),
        (Color | None, {"anyOf": [{"type": "string", "enum": ["red", "blue"]}, {"type": "null"}]}),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (Color, {"type": "string", "enum": ["red", "blue"]}),
        (Annotated[int, "how many"], {"type": "integer", "description": "how many"}),
        (Any, {}),
    ],
)
def test_schema_for_hint(hint: Any, expected: dict[str, Any]) -> None:
    assert schema_for_type(hint) == expected


def test_optional_typing_form() -> None:
    from typing import Optional

    assert schema_for_type(Optional[str]) == {"type": ["string", "null"]}  # noqa: UP045


def test_fixed_tuple() -> None:
    assert schema_for_type(tuple[int, str]) == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "minItems": 2,
        "maxItems": 2,
    }


def test_dataclass_schema() -> None:
    assert schema_for_type(Point) == {
        "type": "object",
        "description": "A point in the plane.",
        "properties": {
            "x": {"type": "number", "description": "Horizontal."},
            "y": {"type": "number", "description": "Vertical."},
        },
        "required": ["x"],
        "additionalProperties": False,
    }


def test_typeddict_schema() -> None:
    movie = schema_for_type(Movie)
    assert movie["properties"] == {"title": {"type": "string"}, "year": {"type": "integer"}}
    assert "required" not in movie  # total=False
    assert "description" not in movie  # not dict's docstring
    assert schema_for_type(Required)["required"] == ["name"]


def test_unsupported_hint_raises_at_definition() -> None:
    def f(when: threading.Thread) -> None: ...

    with pytest.raises(TypeError, match="unsupported type hint"):
        as_tool(f)


def test_function_schema_required_defaults_and_varargs() -> None:
    def f(a: int, b: str = "x", c: bool | None = None, *rest: int, **extra: Any) -> None:
        """Summary line.

        More detail.
        """

    t = as_tool(f)
    assert t.name == "f"
    assert t.description == "Summary line.\n\nMore detail."
    p = t.schema.parameters
    assert p["required"] == ["a"]
    assert p["properties"]["b"] == {"type": "string", "default": "x"}
    assert p["properties"]["c"] == {"type": ["boolean", "null"], "default": None}
    assert set(p["properties"]) == {"a", "b", "c"}
    assert "additionalProperties" not in p  # **extra accepts more


def test_unannotated_parameter_uses_default_type() -> None:
    def f(n=3, anything=None):  # type: ignore[no-untyped-def]
        return n

    assert prop(f, "n") == {"type": "integer", "default": 3}
    assert prop(f, "anything") == {"default": None}
    assert params(f)["additionalProperties"] is False


# ---------------------------------------------------------------------------------- docstrings


def test_google_docstring() -> None:
    def search(query: str, limit: int = 5) -> list[str]:
        """Search the index.

        Args:
            query (str): What to look for,
                in plain words.
            limit: At most this many.

        Returns:
            The hits.
        """
        return []

    t = as_tool(search)
    assert t.description == "Search the index."
    assert prop(search, "query")["description"] == "What to look for, in plain words."
    assert prop(search, "limit")["description"] == "At most this many."


def test_numpy_docstring() -> None:
    doc = """Scale values.

    Parameters
    ----------
    values : list of float
        The values
        to scale.
    factor, offset : float
        Both numbers.

    Returns
    -------
    list
        Scaled.
    """
    p = parse_docstring(doc)
    assert p.description == "Scale values."
    assert p.params == {
        "values": "The values to scale.",
        "factor": "Both numbers.",
        "offset": "Both numbers.",
    }


def test_sphinx_docstring() -> None:
    doc = """Fetch a page.

    :param url: The address.
    :param int timeout: Seconds
        to wait.
    :returns: the body
    """
    p = parse_docstring(doc)
    assert p.description == "Fetch a page."
    assert p.params == {"url": "The address.", "timeout": "Seconds to wait."}


def test_no_docstring() -> None:
    def f(a: int) -> int:
        return a

    assert as_tool(f).description == ""
    assert "description" not in prop(f, "a")


# ---------------------------------------------------------------------------------- decorator


def test_decorator_forms_and_still_callable() -> None:
    @tool
    def plain(a: int) -> int:
        """Double."""
        return 2 * a

    @tool(name="triple_it", description="Times three.")
    def other(a: int) -> int:
        """Ignored."""
        return 3 * a

    assert isinstance(plain, Tool)
    assert plain(4) == 8
    assert plain.name == "plain"
    assert plain.description == "Double."
    assert other.schema == ToolSchema("triple_it", "Times three.", other.parameters)
    assert other(2) == 6
    assert as_tool(plain) is plain
    renamed = as_tool(plain, name="twice")
    assert renamed.name == "twice"
    assert renamed.description == "Double."


def test_as_tool_callables() -> None:
    class Counter:
        """Count things."""

        def __call__(self, items: list[str]) -> int:
            return len(items)

    def power(base: int, exp: int) -> int:
        return int(base**exp)

    counter = as_tool(Counter())
    assert counter.name == "Counter"
    assert prop(Counter(), "items") == {"type": "array", "items": {"type": "string"}}
    square = as_tool(functools.partial(power, exp=2), name="square")
    assert square.schema.parameters["required"] == ["base"]
    assert asyncio.run(square.invoke('{"base": 7}')) == ("49", False)


def test_as_tool_rejects_schema_and_non_callables() -> None:
    with pytest.raises(LlmError) as info:
        as_tool(ToolSchema("x"))  # type: ignore[arg-type]
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    with pytest.raises(LlmError):
        as_tool(42)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- invoke


def describe(color: Color, where: Point, tags: set[str] | None = None) -> dict[str, Any]:
    """Describe a coloured point."""
    assert isinstance(color, Color)
    assert isinstance(where, Point)
    return {"color": color, "where": where, "tags": sorted(tags or [])}


async def test_invoke_coerces_enums_dataclasses_and_sets() -> None:
    text, is_error = await as_tool(describe).invoke(
        '{"color": "blue", "where": {"x": 1}, "tags": ["b", "a"]}'
    )
    assert not is_error
    assert json.loads(text) == {"color": "blue", "where": {"x": 1.0, "y": 0.0}, "tags": ["a", "b"]}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"color": ', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"where": {"x": 1}}', "missing required 'color'"),
        ('{"color": "green", "where": {"x": 1}}', '"green" is not one of "red", "blue"'),
        ('{"color": "red", "where": {"x": "1"}}', "$.where.x: expected number, got string"),
        ('{"color": "red", "where": {"x": 1}, "size": 3}', "unexpected property 'size'"),
        ('{"color": "red", "where": {"x": 1}, "tags": [1]}', "$.tags[0]"),
    ],
)
async def test_invoke_reports_bad_arguments(arguments: str, problem: str) -> None:
    text, is_error = await as_tool(describe).invoke(arguments)
    assert is_error
    assert problem in text


async def test_invoke_empty_arguments_mean_no_arguments() -> None:
    def now() -> str:
        return "noon"

    assert await as_tool(now).invoke("") == ("noon", False)


async def test_invoke_exception_becomes_error_text() -> None:
    def boom(x: int) -> int:
        raise ValueError(f"bad x {x}")

    assert await as_tool(boom).invoke('{"x": 3}') == ("ValueError: bad x 3", True)


async def test_async_and_sync_tools() -> None:
    threads: list[str] = []

    async def slow(x: int) -> int:
        await asyncio.sleep(0.01)
        threads.append(threading.current_thread().name)
        return x + 1

    def blocking(x: int) -> int:
        threads.append(threading.current_thread().name)
        return x * 2

    assert await as_tool(slow).invoke('{"x": 1}') == ("2", False)
    assert await as_tool(blocking).invoke('{"x": 2.0}') == ("4", False)  # integral float ok
    me = threading.current_thread().name
    assert threads[0] == me
    assert threads[1] != me  # sync tools run in a worker thread


def test_format_result() -> None:
    class Model:
        def model_dump(self, mode: str = "python") -> dict[str, Any]:
            return {"mode": mode}

    assert format_result("as is") == "as is"
    assert format_result({"a": [1, 2]}) == '{"a": [1, 2]}'
    assert format_result(Point(1, 2)) == '{"x": 1, "y": 2}'
    assert format_result(Model()) == '{"mode": "json"}'
    assert format_result(None) == "null"
    assert format_result({"c": Color.RED, "s": (1,)}) == '{"c": "red", "s": [1]}'
    assert json.loads(format_result({"obj": object()}))["obj"].startswith("<object")


def test_validator_edge_cases() -> None:
    assert check_arguments(True, {"type": "integer"})
    assert not check_arguments(3.0, {"type": "integer"})
    assert not check_arguments(None, {"type": ["string", "null"]})
    assert check_arguments("x", {"anyOf": [{"type": "integer"}, {"type": "null"}]})
    assert not check_arguments([1, "a"], {"type": "array", "prefixItems": [{"type": "integer"}]})
    assert check_arguments(5, {"type": "integer", "maximum": 4})
    assert not check_arguments({"a": 1}, {"type": "object", "pattern": "ignored"})


# ---------------------------------------------------------------------------------- the loop


class TurnsAdapter(LlmAdapter):
    """Plays one scripted turn per request (the last turn repeats); records the requests."""

    name = "turns"

    def __init__(self, turns: Sequence[Sequence[Event]]) -> None:
        self.turns = [list(t) for t in turns]
        self.calls: list[GenerateOptions] = []

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        self.calls.append(options)
        for event in self.turns[min(len(self.calls), len(self.turns)) - 1]:
            yield event


def tool_turn(*calls: tuple[str, str, str]) -> list[Event]:
    events: list[Event] = []
    for i, (call_id, name, arguments) in enumerate(calls):
        events += [
            BlockStart(i, "tool-call"),
            ToolCallDelta(i, call_id, arguments, name),
            BlockEnd(i, ToolCallBlock(call_id, name, arguments)),
        ]
    return [*events, Usage(TokenUsage(10, 5)), Finish(FinishReason("tool-calls"))]


def text_turn(text: str) -> list[Event]:
    return [
        BlockStart(0, "text"),
        TextDelta(0, text),
        BlockEnd(0, TextBlock(text)),
        Usage(TokenUsage(20, 3)),
        Finish.stop(),
    ]


@pytest.fixture
def engine() -> Engine:
    return Engine(config_file=False, env_file=False)


def scripted(engine: Engine, *turns: Sequence[Event]) -> TurnsAdapter:
    adapter = TurnsAdapter(turns)
    engine.register_adapter("s", adapter)
    return adapter


async def collect(engine: Engine, provider: str, **kw: Any) -> list[LoopEvent]:
    return [ev async for ev in stream_tools(engine, provider, **kw)]


def steps_of(events: Sequence[LoopEvent]) -> list[list[Event]]:
    """The protocol events of each step."""
    steps: list[list[Event]] = []
    for ev in events:
        if isinstance(ev, StepStart):
            steps.append([])
        elif not isinstance(ev, ToolRun | ToolOutcome):
            steps[-1].append(ev)
    return steps


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


async def test_loop_end_to_end_on_mock_tools_model(engine: Engine) -> None:
    transcript: list[Message] = []
    events = await collect(
        engine, "mock", model="tools", prompt="add 2 and 40", tools=[add], transcript=transcript
    )
    assert [m.role for m in transcript] == ["assistant", "user", "assistant"]
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "StepStart"
    first_finish = kinds.index("Finish")
    assert kinds[first_finish + 1 : first_finish + 4] == ["ToolRun", "ToolOutcome", "StepStart"]
    assert kinds[-1] == "Finish"
    steps = steps_of(events)
    assert len(steps) == 2
    for step in steps:
        validate_stream(step)  # each step obeys the five rules on its own
    result = next(e for e in events if isinstance(e, ToolOutcome))
    assert (result.content, result.status, result.is_error) == ("42", "ok", False)
    assert [e.step for e in events if isinstance(e, StepStart)] == [1, 2]

    completion = await run_tools(engine, "mock", "tools", prompt="add 2 and 40", tools=[add])
    assert "42" in completion.text
    assert completion.finish == FinishReason("stop")
    assert len(completion.steps) == 2
    assert [m.role for m in completion.transcript] == ["assistant", "user", "assistant"]
    assert completion.transcript[-1].text == completion.text
    call = completion.transcript[0].content[0]
    assert isinstance(call, ToolCallBlock)
    assert call.name == "add"
    # (the order of the numbers depends on the property order the adapter sends)
    assert sorted(json.loads(call.arguments).values()) == [2, 40]
    results = completion.transcript[1].content
    assert results == [ToolResultBlock.of(call.id, "42")]
    usages = [s.usage for s in completion.steps]
    assert all(u is not None for u in usages)
    assert completion.usage is not None
    assert completion.usage.input_tokens == sum(u.input_tokens for u in usages if u)
    assert completion.usage.output_tokens == sum(u.output_tokens for u in usages if u)


async def test_tool_that_raises_is_reported_and_loop_goes_on(engine: Engine) -> None:
    def fails(a: int, b: int) -> int:
        raise RuntimeError("the tool broke")

    completion = await run_tools(engine, "mock", "tools", prompt="1 2", tools=[fails])
    result_block = completion.transcript[1].content[0]
    assert isinstance(result_block, ToolResultBlock)
    assert result_block.is_error
    assert result_block.text == "RuntimeError: the tool broke"
    assert "RuntimeError: the tool broke" in completion.text


async def test_bad_arguments_go_back_to_the_model(engine: Engine) -> None:
    adapter = scripted(
        engine,
        tool_turn(("c1", "add", '{"a": 1, "b":'), ("c2", "add", '{"a": "x", "b": 2}')),
        text_turn("sorry"),
    )
    events = await collect(engine, "s", prompt="go", tools=[add])
    results = [e for e in events if isinstance(e, ToolOutcome)]
    assert [r.status for r in results] == ["error", "error"]
    assert [e.call_id for e in events if isinstance(e, ToolRun)] == ["c1", "c2"]
    sent = adapter.calls[1].messages[-1]
    assert sent.role == "user"
    blocks = [b for b in sent.content if isinstance(b, ToolResultBlock)]
    assert [b.tool_call_id for b in blocks] == ["c1", "c2"]
    assert all(b.is_error for b in blocks)
    assert "not valid JSON" in blocks[0].text
    assert "$.a: expected integer" in blocks[1].text
    assert adapter.calls[1].tools == [as_tool(add).schema]
    final = events[-1]
    assert isinstance(final, Finish)
    assert final.reason.kind == "stop"


async def test_unknown_tool(engine: Engine) -> None:
    scripted(engine, tool_turn(("c1", "nope", "{}")), text_turn("ok"))
    completion = await run_tools(engine, "s", prompt="go", tools=[add])
    block = completion.transcript[1].content[0]
    assert isinstance(block, ToolResultBlock)
    assert block.is_error
    assert "unknown tool 'nope'" in block.text
    assert "add" in block.text


async def test_step_limit(engine: Engine) -> None:
    adapter = scripted(engine, tool_turn(("c1", "add", '{"a": 1, "b": 2}')))
    events = await collect(engine, "s", prompt="loop forever", tools=[add], max_steps=2)
    assert len(adapter.calls) == 2
    assert [e.step for e in events if isinstance(e, StepStart)] == [1, 2, 3]
    last = events[-1]
    assert isinstance(last, Finish)
    assert last.reason.kind == "error"
    assert last.reason.failure is not None
    assert last.reason.failure.code == ErrorCode.TOOL_STEP_LIMIT
    assert events[-2] == StepStart(3)  # the closing step holds only the finish
    for step in steps_of(events):
        validate_stream(step)

    with pytest.raises(LlmError) as info:
        await run_tools(engine, "s", prompt="loop forever", tools=[add], max_steps=2)
    assert info.value.code == ErrorCode.TOOL_STEP_LIMIT
    partial = info.value.details["completion"]
    assert isinstance(partial, Completion)
    assert len(partial.steps) == 2
    assert [m.role for m in partial.transcript] == ["assistant", "user"] * 2
    assert partial.usage == TokenUsage(20, 10)


async def test_generation_error_ends_loop_and_raises(engine: Engine) -> None:
    failure = LlmError("no access", ErrorCode.AUTH)
    adapter = scripted(
        engine, tool_turn(("c1", "add", '{"a": 1, "b": 2}')), [Finish.error(failure)]
    )
    events = await collect(engine, "s", prompt="go", tools=[add])
    assert isinstance(events[-1], Finish)
    assert events[-1].reason.kind == "error"
    adapter.calls.clear()
    with pytest.raises(LlmError) as info:
        await run_tools(engine, "s", prompt="go", tools=[add])
    assert info.value.code == ErrorCode.AUTH
    assert len(info.value.details["completion"].transcript) == 2


async def test_confirmation(engine: Engine) -> None:
    ran: list[int] = []

    def record(a: int, b: int) -> int:
        ran.append(a)
        return a + b

    adapter = scripted(
        engine,
        tool_turn(("c1", "record", '{"a": 1, "b": 2}'), ("c2", "record", '{"a": 3, "b": 4}')),
        text_turn("done"),
    )
    asked: list[str] = []

    async def confirm(call: ToolCallBlock) -> bool:
        asked.append(call.id)
        return call.id == "c2"

    events = await collect(engine, "s", prompt="go", tools=[record], confirm=confirm)
    assert asked == ["c1", "c2"]
    assert ran == [3]
    results = {e.call_id: e for e in events if isinstance(e, ToolOutcome)}
    assert results["c1"].status == "skipped"
    assert results["c1"].content == DECLINED
    assert results["c2"].status == "ok"
    assert [e.call_id for e in events if isinstance(e, ToolRun)] == ["c2"]

    adapter.calls.clear()
    completion = await run_tools(
        engine, "s", prompt="go", tools=[record], confirm=lambda call: False
    )
    blocks = completion.transcript[1].content
    assert [b.text for b in blocks if isinstance(b, ToolResultBlock)] == [DECLINED, DECLINED]

    with pytest.raises(LlmError) as info:
        await run_tools(engine, "s", prompt="go", tools=[record], confirm=True)
    assert info.value.code == ErrorCode.INVALID_OPTIONS


async def test_concurrency_limit_and_model_order(engine: Engine) -> None:
    in_flight = 0
    peak = 0

    async def wait(ms: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(ms / 1000)
        in_flight -= 1
        return ms

    delays = [60, 10, 40, 10, 30, 20]
    calls = [(f"c{i}", "wait", json.dumps({"ms": ms})) for i, ms in enumerate(delays)]
    adapter = scripted(engine, tool_turn(*calls), text_turn("done"))
    events = await collect(engine, "s", prompt="go", tools=[wait], concurrency=2)
    assert peak == 2
    assert [e.call_id for e in events if isinstance(e, ToolRun)] == [c[0] for c in calls]
    finished = [e.call_id for e in events if isinstance(e, ToolOutcome)]
    assert sorted(finished) == sorted(c[0] for c in calls)
    assert finished != [c[0] for c in calls]  # results are reported as they finish...
    sent = adapter.calls[1].messages[-1].content
    assert [b.tool_call_id for b in sent if isinstance(b, ToolResultBlock)] == [
        c[0] for c in calls
    ]  # ...and sent back in the model's order
    assert [b.text for b in sent if isinstance(b, ToolResultBlock)] == [str(d) for d in delays]

    peak = 0
    adapter.calls.clear()
    await collect(engine, "s", prompt="go", tools=[wait], concurrency=6)
    assert peak == 6


async def test_stop_while_tools_run(engine: Engine) -> None:
    stop = StopSignal()
    started = asyncio.Event()

    async def hang() -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    scripted(engine, tool_turn(("c1", "hang", "{}")), text_turn("unreachable"))

    async def press_stop() -> None:
        await started.wait()
        stop.set()

    presser = asyncio.ensure_future(press_stop())
    events = await asyncio.wait_for(
        collect(engine, "s", prompt="go", tools=[hang], stop_signal=stop), GUARD
    )
    await presser
    result = next(e for e in events if isinstance(e, ToolOutcome))
    assert result.is_error
    last = events[-1]
    assert isinstance(last, Finish)
    assert last.reason.kind == "aborted"


async def test_loop_options(engine: Engine) -> None:
    adapter = scripted(engine, text_turn("hi"))
    history = [Message.user("earlier"), Message.assistant("reply")]
    completion = await run_tools(
        engine, "s", messages=history, prompt="now", tools=[add], system="be brief", max_tokens=9
    )
    assert completion.text == "hi"
    assert [m.role for m in completion.transcript] == ["assistant"]  # just the answer
    options = adapter.calls[0]
    assert [m.text for m in options.messages] == ["earlier", "reply", "now"]
    assert options.system == "be brief"
    assert options.max_tokens == 9
    with pytest.raises(LlmError, match="two tools"):
        await run_tools(engine, "s", prompt="x", tools=[add, add])
    with pytest.raises(LlmError, match="max_steps"):
        await run_tools(engine, "s", prompt="x", tools=[add], max_steps=0)


async def test_calls_cut_off_by_max_tokens_are_never_run() -> None:
    from notebook_llm import Engine
    from notebook_llm.api.tool_calling import stream_tools

    ran: list[str] = []

    def lookup(city: str, country: str, note: str) -> str:
        """Look something up."""
        ran.append(city)
        return "done"

    engine = Engine(config_file=False, env_file=False)
    events = [
        ev
        async for ev in stream_tools(
            engine,
            "mock",
            "tools",
            prompt="Paris in France, with a long note",
            tools=[lookup],
            max_tokens=6,
        )
    ]
    assert ran == []
    assert [type(e).__name__ for e in events].count("StepStart") == 1  # no second step
    assert not [e for e in events if type(e).__name__ in ("ToolRun", "ToolOutcome")]
    finish = [e for e in events if type(e).__name__ == "Finish"][-1]
    assert finish.reason.kind == "max-tokens"


async def test_images_stay_with_the_prompt_at_every_step(engine: Engine) -> None:
    # The tool results are a user message too: the images must not move onto them at step 2.
    adapter = scripted(engine, tool_turn(("c1", "add", '{"a": 1, "b": 2}')), text_turn("3"))
    await run_tools(engine, "s", prompt="look", images="https://example.com/cat.png", tools=[add])
    for options in adapter.calls:
        with_images = [
            n
            for n, message in enumerate(options.messages)
            if any(isinstance(b, ImageBlock) for b in message.content)
        ]
        assert with_images == [0]
