"""Tools that misbehave: whatever a tool raises, returns or does, the model is told the tool's
own error, the loop goes on, and a real stop still stops."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from test_tools import scripted, text_turn, tool_turn
from waiting import GUARD

from notebook_llm import Engine, ErrorCode, Finish, LlmError, StopSignal, ToolResultBlock
from notebook_llm.api.tool_calling import Tool, run_tools, stream_tools
from notebook_llm.api.tool_calling.events import ToolOutcome
from notebook_llm.core.background_loop import run_sync


@pytest.fixture
def engine() -> Engine:
    return Engine(config_file=False, env_file=False)


async def first_result(engine: Engine, fn: Callable[..., Any], **kw: Any) -> ToolResultBlock:
    """The first tool result the model got, from the offline mock model that calls ``fn``."""
    completion = await asyncio.wait_for(
        run_tools(engine, "mock", "tools", prompt="1 2", tools=[fn], **kw), 30
    )
    block = completion.transcript[1].content[0]
    assert isinstance(block, ToolResultBlock)
    return block


# ------------------------------------------------------------------ what a tool raises


def empty_next(a: int, b: int) -> int:
    """A plain next() on an empty iterator."""
    return int(next(iter([])))


async def async_empty_next(a: int, b: int) -> int:
    """The same in a coroutine (Python turns it into a RuntimeError)."""
    return int(next(iter([])))


def raises_generator_exit(a: int, b: int) -> int:
    """GeneratorExit of its own."""
    raise GeneratorExit("closing")


async def async_raises_generator_exit(a: int, b: int) -> int:
    """GeneratorExit of its own, in a coroutine."""
    raise GeneratorExit("closing")


async def raises_cancelled(a: int, b: int) -> int:
    """A CancelledError the tool raises itself (a library's timeout leaking out, say)."""
    raise asyncio.CancelledError("my own")


def sync_raises_cancelled(a: int, b: int) -> int:
    """The same from a thread."""
    raise asyncio.CancelledError("my own")


def raises_stop_async(a: int, b: int) -> int:
    """StopAsyncIteration."""
    raise StopAsyncIteration


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for you")


def raises_unprintable(a: int, b: int) -> int:
    """An exception whose __str__ fails."""
    raise Unprintable


def returns_stop_iteration_coroutine(a: int, b: int) -> Any:
    """A sync function returning a coroutine that raises StopIteration."""

    async def inner() -> int:
        raise StopIteration

    return inner()


class BaseOwn(BaseException):
    """A BaseException subclass of the tool's own."""


def raises_base_own(a: int, b: int) -> int:
    """A custom BaseException."""
    raise BaseOwn("custom")


async def async_raises_base_own(a: int, b: int) -> int:
    """A custom BaseException, in a coroutine."""
    raise BaseOwn("custom")


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (empty_next, "StopIteration"),
        (async_empty_next, "RuntimeError: coroutine raised StopIteration"),
        (raises_generator_exit, "GeneratorExit: closing"),
        (async_raises_generator_exit, "GeneratorExit: closing"),
        (raises_cancelled, "CancelledError: my own"),
        (sync_raises_cancelled, "CancelledError: my own"),
        (raises_stop_async, "StopAsyncIteration"),
        (raises_unprintable, "Unprintable"),
        (returns_stop_iteration_coroutine, "RuntimeError: coroutine raised StopIteration"),
        (raises_base_own, "BaseOwn: custom"),
        (async_raises_base_own, "BaseOwn: custom"),
    ],
)
async def test_the_tools_own_exception_reaches_the_model(
    engine: Engine, fn: Callable[..., Any], expected: str
) -> None:
    block = await first_result(engine, fn)
    assert block.is_error
    assert block.text == expected
    text, is_error = await asyncio.wait_for(Tool(fn).invoke('{"a": 1, "b": 2}'), 30)
    assert (text, is_error) == (expected, True)


async def test_stop_iteration_among_other_calls_loses_nothing(engine: Engine) -> None:
    def ok(n: int) -> int:
        """Fine."""
        return n

    def boom(n: int) -> int:
        """StopIteration."""
        return int(next(iter([])))

    calls = [("c1", "ok", '{"n": 1}'), ("c2", "boom", '{"n": 2}'), ("c3", "ok", '{"n": 3}')]
    adapter = scripted(engine, tool_turn(*calls), text_turn("done"))
    completion = await asyncio.wait_for(
        run_tools(engine, "s", prompt="go", tools=[ok, boom], concurrency=3), 30
    )
    assert completion.text == "done"
    sent = adapter.calls[1].messages[-1].content
    assert [(b.text, b.is_error) for b in sent if isinstance(b, ToolResultBlock)] == [
        ("1", False),
        ("StopIteration", True),
        ("3", False),
    ]


async def test_confirm_that_raises_a_base_exception_is_that_calls_error(engine: Engine) -> None:
    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    def confirm(call: Any) -> bool:
        raise GeneratorExit("no")

    block = await first_result(engine, add, confirm=confirm)
    assert block.is_error
    assert block.text == "the confirmation failed: GeneratorExit: no"

    def confirm_next(call: Any) -> bool:
        return bool(next(iter([])))

    block = await first_result(engine, add, confirm=confirm_next)
    assert block.text == "the confirmation failed: StopIteration"


def test_a_tools_keyboard_interrupt_on_the_background_loop_is_its_error() -> None:
    """In a notebook the loop runs in a background thread, where no SIGINT ever lands: a
    KeyboardInterrupt there is the tool's own, even from a coroutine."""
    engine = Engine(config_file=False, env_file=False)

    async def interrupts(a: int, b: int) -> int:
        """Raises KeyboardInterrupt itself."""
        raise KeyboardInterrupt

    completion = run_sync(run_tools(engine, "mock", "tools", prompt="1 2", tools=[interrupts]))
    block = completion.transcript[1].content[0]
    assert isinstance(block, ToolResultBlock)
    assert (block.text, block.is_error) == ("KeyboardInterrupt", True)


def test_a_keyboard_interrupt_on_the_main_thread_still_stops() -> None:
    """Where a kernel interrupt can land (the main thread), a KeyboardInterrupt inside an
    async tool is taken as the interrupt it may be: it stops the run rather than becoming a
    tool result that lets the loop go on."""
    engine = Engine(config_file=False, env_file=False)
    ran: list[str] = []

    async def interrupted(a: int, b: int) -> int:
        """Stands for an async tool that SIGINT interrupts."""
        ran.append("x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(run_tools(engine, "mock", "tools", prompt="1 2", tools=[interrupted]))
    assert ran == ["x"]


async def test_a_real_cancellation_still_cancels(engine: Engine) -> None:
    started = asyncio.Event()

    async def slow(a: int, b: int) -> int:
        """Waits."""
        started.set()
        await asyncio.sleep(30)
        return 0

    task = asyncio.ensure_future(Tool(slow).invoke('{"a": 1, "b": 2}'))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, GUARD)


# ------------------------------------------------------------------ the model's arguments


@pytest.mark.parametrize("depth", [100_000, 5_000, 990])
async def test_deeply_nested_arguments_are_an_argument_error(engine: Engine, depth: int) -> None:
    def takes(a: Any, b: int) -> str:
        """Takes anything."""
        return "ran"

    nested = '{"a": ' + "[" * depth + "]" * depth + ', "b": 1}'
    deep_object = '{"a": ' + '{"x": ' * depth + "1" + "}" * depth + ', "b": 1}'
    for arguments in (nested, deep_object):
        text, is_error = await Tool(takes).invoke(arguments)
        assert is_error or text == "ran"
        if is_error:
            assert "nested too deeply" in text
    calls = [("c1", "takes", nested), ("c2", "takes", '{"a": 1, "b": 2}')]
    adapter = scripted(engine, tool_turn(*calls), text_turn("done"))
    completion = await asyncio.wait_for(run_tools(engine, "s", prompt="go", tools=[takes]), 30)
    assert completion.text == "done"
    sent = [b for b in adapter.calls[1].messages[-1].content if isinstance(b, ToolResultBlock)]
    if depth >= 5_000:
        assert sent[0].is_error
        assert "nested too deeply" in sent[0].text
    assert (sent[1].text, sent[1].is_error) == ("ran", False)


async def test_arguments_a_schema_cannot_check_are_an_argument_error() -> None:
    def f(n: int) -> int:
        """Uses a hand-written schema with a bad bound."""
        return n

    broken = Tool(
        f,
        parameters={"type": "object", "properties": {"n": {"type": "integer", "minimum": "x"}}},
    )
    text, is_error = await broken.invoke('{"n": 3}')
    assert is_error
    # the one validator checks the schema first and names what is wrong with it
    assert text.startswith("invalid arguments for tool 'f': $: the schema cannot be used")
    assert "properties/n/minimum" in text


@pytest.mark.parametrize(
    "arguments",
    ['"just a string"', "[1, 2]", "null", "1e999999", '{"a": NaN, "b": 1}', "\x00", "{" * 10],
)
async def test_odd_argument_texts_are_argument_errors(arguments: str) -> None:
    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    text, is_error = await Tool(add).invoke(arguments)
    assert is_error
    assert "tool 'add'" in text


@dataclass
class Strict:
    x: int

    def __post_init__(self) -> None:
        raise LookupError("strict says no")


def takes_strict(s: Strict) -> str:
    """Takes a Strict."""
    return "ran"


async def test_a_constructor_that_raises_on_the_arguments_is_an_argument_error() -> None:
    text, is_error = await Tool(takes_strict).invoke('{"s": {"x": 1}}')
    assert is_error
    assert "strict says no" in text


# ------------------------------------------------------------------ what a tool returns


def circular(a: int, b: int) -> Any:
    """A list that holds itself."""
    x: list[Any] = []
    x.append(x)
    return x


def deep_result(a: int, b: int) -> Any:
    """A result nested 100,000 deep."""
    x: list[Any] = []
    for _ in range(100_000):
        x = [x]
    return x


class BadStr:
    def __str__(self) -> str:
        raise RuntimeError("no str")


def bad_str(a: int, b: int) -> Any:
    """An object whose str() fails."""
    return {"v": BadStr()}


class ExitingStr:
    def __str__(self) -> str:
        raise SystemExit("bye from str")


def exiting_str(a: int, b: int) -> Any:
    """An object whose str() calls sys.exit."""
    return [ExitingStr()]


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (circular, "could not be turned into text: ValueError: Circular reference detected"),
        (deep_result, "is nested too deeply to be turned into text"),
        (bad_str, "could not be turned into text: RuntimeError: no str"),
        (exiting_str, "could not be turned into text: SystemExit: bye from str"),
    ],
)
async def test_a_result_that_cannot_be_text_is_the_tools_error(
    engine: Engine, fn: Callable[..., Any], expected: str
) -> None:
    block = await first_result(engine, fn)
    assert block.is_error
    assert expected in block.text
    assert f"the result of tool {fn.__name__!r}" in block.text
    text, is_error = await Tool(fn).invoke('{"a": 1, "b": 2}')
    assert is_error
    assert expected in text


# ------------------------------------------------------------------ tools that hang


async def test_hanging_sync_tools_do_not_starve_later_tool_calls(engine: Engine) -> None:
    """Stopped sync tools that never return keep their threads; later calls still run."""
    release = threading.Event()
    loop = asyncio.get_running_loop()
    six_started = asyncio.Event()  # (a loop's default executor has at least 6 workers)
    count = iter(range(1, 1000))
    lock = threading.Lock()

    def hang(n: int) -> int:
        """Blocks until the test ends."""
        with lock:
            if next(count) == 6:
                loop.call_soon_threadsafe(six_started.set)
        release.wait(60)
        return n

    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    calls = [(f"c{i}", "hang", f'{{"n": {i}}}') for i in range(40)]
    scripted(engine, tool_turn(*calls), text_turn("unreachable"))
    stop = StopSignal()

    async def press_stop() -> None:
        await six_started.wait()
        stop.set()

    try:
        presser = asyncio.ensure_future(press_stop())
        events = [
            e
            async for e in stream_tools(
                engine, "s", prompt="go", tools=[hang], concurrency=40, stop_signal=stop
            )
        ]
        await presser
        last = events[-1]
        assert isinstance(last, Finish)
        assert last.reason.kind == "aborted"
        block = await asyncio.wait_for(first_result(engine, add), GUARD)
        assert (block.text, block.is_error) == ("3", False)
    finally:
        release.set()


async def test_a_tool_that_swallows_its_cancellation_does_not_hold_the_stop(
    engine: Engine,
) -> None:
    started = asyncio.Event()
    leave = asyncio.Event()

    async def stubborn() -> str:
        """Ignores cancellation until the test ends."""
        started.set()
        while not leave.is_set():
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue
        return "late"

    scripted(engine, tool_turn(("c1", "stubborn", "{}")), text_turn("unreachable"))
    stop = StopSignal()

    async def press_stop() -> None:
        await started.wait()
        stop.set()

    presser = asyncio.ensure_future(press_stop())
    try:
        run = asyncio.ensure_future(
            _collect(engine, "s", prompt="go", tools=[stubborn], stop_signal=stop)
        )
        # a hang guard (wait_for would wait for the cancel)
        done, _ = await asyncio.wait({run}, timeout=GUARD)
        assert run in done, "the loop did not end after Stop"
        events = run.result()
        await presser
        outcome = next(e for e in events if isinstance(e, ToolOutcome))
        assert outcome.is_error
        last = events[-1]
        assert isinstance(last, Finish)
        assert last.reason.kind == "aborted"
    finally:
        leave.set()


async def _collect(engine: Engine, provider: str, **kw: Any) -> list[Any]:
    return [e async for e in stream_tools(engine, provider, **kw)]


async def test_tool_timeout_abandons_a_hanging_call_and_the_loop_goes_on(engine: Engine) -> None:
    release = threading.Event()
    ahang_ended = asyncio.Event()

    def hang(n: int) -> int:
        """Blocks."""
        release.wait(GUARD)
        return n

    async def ahang(n: int) -> int:
        """Awaits until the test ends, swallowing cancellation."""
        try:
            while not release.is_set():
                try:
                    await asyncio.sleep(0.05)
                except asyncio.CancelledError:
                    continue
            return n
        finally:
            ahang_ended.set()

    def quick(n: int) -> int:
        """Returns."""
        return n

    calls = [("c1", "hang", '{"n": 1}'), ("c2", "ahang", '{"n": 2}'), ("c3", "quick", '{"n": 3}')]
    adapter = scripted(engine, tool_turn(*calls), text_turn("done"))
    try:
        completion = await asyncio.wait_for(
            run_tools(
                engine,
                "s",
                prompt="go",
                tools=[hang, ahang, quick],
                concurrency=3,
                # the hanging tools wait for the test; 'quick' gets room on a busy machine
                tool_timeout=3,
            ),
            GUARD,
        )
    finally:
        release.set()
        await asyncio.wait_for(ahang_ended.wait(), GUARD)  # the abandoned coroutine ends
    assert completion.text == "done"
    sent = [b for b in adapter.calls[1].messages[-1].content if isinstance(b, ToolResultBlock)]
    assert sent[0].is_error
    assert "did not finish within 3 s (tool_timeout=3)" in sent[0].text
    assert sent[1].is_error
    assert "'ahang' did not finish" in sent[1].text
    assert (sent[2].text, sent[2].is_error) == ("3", False)


@pytest.mark.parametrize("bad", [0, -1, float("nan")])
async def test_tool_timeout_must_be_positive(engine: Engine, bad: float) -> None:
    with pytest.raises(LlmError) as info:
        await run_tools(engine, "mock", "tools", prompt="1 2", tools=[quick_add], tool_timeout=bad)
    assert info.value.code == ErrorCode.INVALID_OPTIONS


def quick_add(a: int, b: int) -> int:
    """Adds."""
    return a + b


async def test_tools_see_the_callers_context_variables(engine: Engine) -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("from the caller")

    def reads(a: int, b: int) -> str:
        """Reads a context variable."""
        return var.get()

    block = await first_result(engine, reads)
    assert block.text == "from the caller"
