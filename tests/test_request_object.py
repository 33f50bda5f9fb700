"""One request object: :class:`notebook_llm.Request` is the one written list of the request
options, and every entry point (``Engine.stream``, ``complete``, ``map``, ``Chat``) carries it to
the adapter (and the tool loop too). A new field that is not plumbed through fails here (the table below must name it,
and each entry point must deliver it)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any, get_type_hints

import pytest
from conftest import ScriptedAdapter

import notebook_llm
from notebook_llm import (
    BlockEnd,
    BlockStart,
    Chat,
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
    Request,
    StopSignal,
    TextBlock,
    TextDelta,
    Timeouts,
    ToolSchema,
    estimate_cost,
    run_tools,
)
from notebook_llm.api.batch import MapOptions
from notebook_llm.api.tool_calling.loop import ToolLoopOptions
from notebook_llm.engine import request as request_module
from notebook_llm.engine.request import OPTION_NAMES, RequestOptions, TurnOptions


def answer(text: str) -> list[Event]:
    return [
        BlockStart(0, "text"),
        TextDelta(0, text),
        BlockEnd(0, TextBlock(text)),
        Finish(FinishReason("stop")),
    ]


class Recording(LlmAdapter):
    """Answers ``text`` and records every request; ``fail`` raises a retryable error instead."""

    name = "recording"

    def __init__(self, text: str = "{}", fail: bool = False) -> None:
        self.text = text
        self.fail = fail
        self.calls: list[GenerateOptions] = []

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        self.calls.append(options)
        if self.fail:
            raise LlmError("slow down", ErrorCode.RATE_LIMIT, status=429, retry_after=0.0)
        for event in answer(self.text):
            yield event


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


ADD = ToolSchema("add", "Add two numbers.", {"type": "object", "properties": {}})
STRICT = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
URL = "https://example.com/cat.png"


def _last_text(calls: list[GenerateOptions]) -> str:
    return calls[0].messages[-1].text


#: For every option: the options to give, how the adapter must answer, and what it must see.
#: ``tools`` is given to a Chat as a function (its tools are functions), to the others as a
#: schema; ``prompt`` is a map's prompt and a chat's text; ``messages`` a map's message-list
#: prompt and a chat's history.
SAMPLES: dict[
    str, tuple[dict[str, Any], dict[str, Any], Callable[[list[GenerateOptions]], Any]]
] = {
    "prompt": ({"prompt": "p1"}, {}, lambda c: _last_text(c) == "p1"),
    "messages": (
        {"messages": [Message.user("m1")]},
        {},
        lambda c: [m.text for m in c[0].messages] == ["m1"],
    ),
    "system": ({"system": "sys"}, {}, lambda c: c[0].system == "sys"),
    "tools": ({"tools": [ADD]}, {}, lambda c: [t.name for t in c[0].tools or []] == ["add"]),
    "temperature": ({"temperature": 0.3}, {}, lambda c: c[0].temperature == 0.3),
    "max_tokens": ({"max_tokens": 7}, {}, lambda c: c[0].max_tokens == 7),
    "stop_sequences": ({"stop_sequences": ["END"]}, {}, lambda c: c[0].stop_sequences == ["END"]),
    "reasoning_effort": (
        {"reasoning_effort": "high"},
        {},
        lambda c: c[0].reasoning_effort == "high",
    ),
    "extra_body": ({"extra_body": {"seed": 7}}, {}, lambda c: c[0].extra_body == {"seed": 7}),
    "schema": (
        {"schema": {"type": "object"}},
        {},
        lambda c: (
            c[0].response_format is not None
            and c[0].response_format["schema"] == {"type": "object"}
        ),
    ),
    "images": (
        {"images": URL},
        {},
        lambda c: any(isinstance(b, ImageBlock) for b in c[0].messages[-1].content),
    ),
    "timeouts": (
        {"timeouts": Timeouts(deadline=99.0, idle=98.0)},
        {},
        lambda c: c[0].timeouts == Timeouts(deadline=99.0, idle=98.0),
    ),
    # The engine makes 1 + 2 tries by default: two tries mean retries=1 reached the retry loop.
    "retries": ({"retries": 1}, {"fail": True}, lambda c: len(c) == 2),
    # An answer that does not validate is sent back once more: two requests.
    "schema_retries": ({"schema": STRICT, "schema_retries": 1}, {}, lambda c: len(c) == 2),
    # A signal set before the request: nothing is sent.
    "stop_signal": ({"stop_signal": "set"}, {}, lambda c: c == []),
    "stream": ({"stream": False}, {}, lambda c: c[0].stream is False),
}

#: Options an entry point does not take from its caller, and why.
NOT_THROUGH = {
    ("stream", "schema_retries"): "a stream is one generation; complete and Chat retry",
    ("chat", "stop_signal"): "a turn's stop signal is the view's (its Stop button)",
    ("run_tools", "schema_retries"): "each step of the tool loop is one stream",
}

ENTRY_POINTS = ("stream", "complete", "map", "chat", "run_tools")


def _run(entry: str, engine: Engine, options: dict[str, Any]) -> None:
    """Send one request through ``entry`` with ``options`` (errors are the adapter's doing)."""
    options = dict(options)
    if options.get("stop_signal") == "set":
        options["stop_signal"] = stop = StopSignal()
        stop.set("stopped before it began")
    if "prompt" not in options and "messages" not in options:
        options["prompt"] = "hi"
    if entry == "stream":

        async def consume() -> None:
            async for _ in engine.stream("rec", **options):
                pass

        asyncio.run(consume())
    elif entry == "complete":
        with pytest.raises(LlmError) if _fails(options) else _nothing():
            engine.complete_sync("rec", **options)
    elif entry == "run_tools":  # its tools are functions: their schemas reach the adapter
        options["tools"] = [add]
        with pytest.raises(LlmError) if _fails(options) else _nothing():
            asyncio.run(run_tools(engine, "rec", **options))
    elif entry == "map":
        prompt = options.pop("prompt", None)
        messages = options.pop("messages", None)
        notebook_llm.map(
            [prompt if prompt is not None else messages],
            engine=engine,
            provider="rec",
            progress=False,
            **options,
        )
    else:  # the chat's history is its messages (see the test)
        text = options.pop("prompt")
        if "tools" in options:
            options["tools"] = [add]
        Chat("rec", engine=engine, live=False).send(text, display=False, **options)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _fails(options: dict[str, Any]) -> bool:
    return "stop_signal" in options or options.get("retries") == 1 or "schema_retries" in options


@pytest.fixture
def engine() -> Engine:
    return Engine(config_file=False, retry_base=0.0, retry_cap=0.0)


CASES = [
    (entry, name)
    for entry in ENTRY_POINTS
    for name in OPTION_NAMES
    if (entry, name) not in NOT_THROUGH
]


def test_the_table_names_every_option() -> None:
    assert set(SAMPLES) == set(OPTION_NAMES)
    assert tuple(f.name for f in dataclasses.fields(Request))[2:] == OPTION_NAMES


@pytest.mark.parametrize(("entry", "name"), CASES)
def test_every_option_reaches_the_adapter(entry: str, name: str, engine: Engine) -> None:
    options, behaviour, seen = SAMPLES[name]
    adapter = Recording(**behaviour)
    engine.register_adapter(["rec"], adapter)
    if entry == "chat" and name == "messages":
        chat = Chat("rec", engine=engine, live=False)
        chat.messages = [Message.user("m1"), Message.assistant("a1")]
        chat.send("m2", display=False)
        assert [m.text for m in adapter.calls[0].messages] == ["m1", "a1", "m2"]
        return
    _run(entry, engine, options)
    assert seen(adapter.calls), (entry, name, adapter.calls)


# ------------------------------------------------------------------ the object itself


def test_a_request_is_frozen_and_not_hashable() -> None:
    history = [Message.user("a")]
    request = Request("mock", "echo", messages=history, temperature=0.2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.temperature = 0.5  # type: ignore[misc]
    history.append(Message.user("b"))  # the caller's list is not the request's
    assert [m.text for m in request.messages or ()] == ["a"]
    # It holds dicts, images and a stop signal, which have no stable hash: deliberately none.
    with pytest.raises(TypeError, match="unhashable"):
        hash(request)
    assert request == Request("mock", "echo", messages=[Message.user("a")], temperature=0.2)
    shown = repr(request)  # only what is set
    assert shown.startswith("Request(provider='mock', model='echo', messages=(")
    assert shown.endswith("temperature=0.2)")
    assert "system" not in shown
    assert request.replace(temperature=0.9).temperature == 0.9
    assert request.temperature == 0.2


def test_the_typed_keyword_lists_are_the_fields_of_request() -> None:
    fields = get_type_hints(Request, vars(request_module))
    fields.pop("provider")
    fields.pop("model")
    assert get_type_hints(RequestOptions, vars(request_module)) == fields
    assert set(TurnOptions.__optional_keys__) == set(fields) - {"tools"}
    for extended in (MapOptions, ToolLoopOptions):
        assert set(TurnOptions.__optional_keys__) <= extended.__optional_keys__
    for entry in (Engine.stream, Engine.complete, Engine.complete_sync):
        parameters = list(inspect.signature(entry).parameters.values())
        assert [p.name for p in parameters] == ["self", "provider", "model", "options"]
        assert parameters[-1].annotation == "Unpack[RequestOptions]"


async def test_stream_of_a_request_is_the_keyword_form(engine: Engine) -> None:
    adapter = ScriptedAdapter(answer("same"))
    engine.register_adapter(["s"], adapter)
    options: dict[str, Any] = {"prompt": "q", "system": "s", "temperature": 0.1, "max_tokens": 5}
    by_keywords = [e async for e in engine.stream("s", "m", **options)]
    by_request = [e async for e in engine.stream(Request("s", "m", **options))]
    assert by_request == by_keywords
    assert adapter.calls[0] == adapter.calls[1]
    # A request with keywords over it is the request with those fields replaced.
    _ = [e async for e in engine.stream(Request("s", "m", **options), temperature=0.7)]
    assert adapter.calls[2] == dataclasses.replace(adapter.calls[0], temperature=0.7)
    done = await engine.complete(Request("s", "m", **options))
    assert done.text == "same"


def test_a_chat_turn_may_name_another_provider_and_model(engine: Engine) -> None:
    first, second = Recording("one"), Recording("two")
    engine.register_adapter(["a"], first)
    engine.register_adapter(["b"], second)
    chat = Chat("a", engine=engine, live=False, system="sys")
    assert chat.send("x", display=False, provider="b", model="m").text == "two"
    assert (second.calls[0].model, second.calls[0].system) == ("m", "sys")
    assert chat.provider == "a"  # a turn's override is not the chat's default
    chat.system = "new"
    assert chat.request.system == "new"


# ------------------------------------------------------------------ one error, everywhere

BAD = [
    ({"temperature": 5.0}, "temperature must be within 0..2, not 5.0"),
    ({"max_tokens": 0}, "max_tokens must be positive, not 0"),
    ({"schema_retries": 9}, "schema_retries must be from 0 to 5, not 9"),
    ({"timeouts": 30}, "timeouts= takes a Timeouts(deadline=..., idle=...) or None, not int 30"),
]


def _entry_points(engine: Engine) -> dict[str, Callable[[dict[str, Any]], Any]]:
    return {
        "Request": lambda kw: Request("rec", prompt="x", **kw),
        "stream": lambda kw: engine.stream("rec", prompt="x", **kw),
        "complete": lambda kw: engine.complete_sync("rec", prompt="x", **kw),
        "map": lambda kw: notebook_llm.map(["x", "y", "z"], engine=engine, provider="rec", **kw),
        "Chat": lambda kw: Chat("rec", engine=engine, live=False, **kw),
        "Chat.send": lambda kw: Chat("rec", engine=engine, live=False).send(
            "x", display=False, **kw
        ),
        "run_tools": lambda kw: asyncio.run(
            run_tools(engine, "rec", prompt="x", tools=[add], **kw)
        ),
        "estimate_cost": lambda kw: estimate_cost(["x"], engine=engine, provider="rec", **kw),
    }


@pytest.mark.parametrize(("bad", "message"), BAD)
def test_a_bad_value_fails_once_with_the_same_line_from_every_entry_point(
    engine: Engine, bad: dict[str, Any], message: str
) -> None:
    adapter = Recording()
    engine.register_adapter(["rec"], adapter)
    for where, call in _entry_points(engine).items():
        with pytest.raises(LlmError) as info:
            call(bad)
        assert info.value.code == ErrorCode.INVALID_OPTIONS, where
        assert info.value.message == message, where
    assert adapter.calls == []  # refused before anything was sent


def test_an_unknown_keyword_is_one_line_with_a_suggestion(engine: Engine) -> None:
    engine.register_adapter(["rec"], Recording())
    calls = {
        **{k: v for k, v in _entry_points(engine).items() if k != "Request"},
        "Request.of": lambda kw: Request.of("rec", **kw),
        "Request.replace": lambda kw: Request("rec").replace(**kw),
    }
    for where, call in calls.items():
        with pytest.raises(TypeError) as info:
            call({"temprature": 0.5})
        text = str(info.value)
        assert "temprature (did you mean temperature" in text, where  # map: "or template?"
        assert "\n" not in text, where


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("temperature", 0.3),
        ("max_tokens", 12),
        ("reasoning_effort", "low"),
        ("system", "Be brief."),
    ],
)
def test_a_chat_default_set_as_an_attribute_reaches_the_request(name: str, value: Any) -> None:
    chat = Chat(provider="mock", model="echo", live=False)
    setattr(chat, name, value)
    assert getattr(chat, name) == value
    assert getattr(chat.request, name) == value
    assert getattr(chat.turn("hi").request, name) == value


def test_a_bad_chat_default_set_as_an_attribute_is_refused_at_once() -> None:
    chat = Chat(provider="mock", model="echo", live=False)
    with pytest.raises(LlmError, match=r"temperature must be within 0\.\.2, not 5"):
        chat.temperature = 5
    assert chat.temperature is None
