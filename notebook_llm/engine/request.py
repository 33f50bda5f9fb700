"""A caller's request: :class:`Request`, checked once, and turned into the ``GenerateOptions``
an adapter receives.

One job: everything about a request that needs no route, key or network. :class:`Request` is the
ONE written list of the request options; ``Engine.stream``/``complete``, ``map``/``amap``,
``Chat`` and the tool loop all build one (``Request.of``) and pass it down, instead of spreading
the keywords again at every layer. The caller's mistakes that need nothing else (``max_tokens``
or ``temperature`` out of range, a bad ``schema_retries``, a schema no validator could use, a
``timeouts=`` that is not a :class:`~notebook_llm.core.timeouts.Timeouts`, a keyword that is no
option) fail when the request is built, in one line that says what to fix, before any route,
key or adapter is looked at. What needs the messages as a whole (nothing to send, a lone
surrogate, images without a user message) is checked by :func:`check_request` when the request
runs, so a request may be built first and given its prompt later (``map``).

The :class:`~notebook_llm.engine.engine.Engine` finds the route, the provider settings and the
key, then calls :func:`check_request` and :func:`build_options` in that order.
"""

from __future__ import annotations

import dataclasses
import difflib
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from ..adapters.base import LlmAdapter
from ..core.cancel import StopSignal
from ..core.errors import ErrorCode, LlmError
from ..core.protocol import GenerateOptions, Message, ToolSchema
from ..core.timeouts import Timeouts
from .providers import ProviderConfig

if TYPE_CHECKING:
    import httpx

__all__ = [
    "MAX_SCHEMA_RETRIES",
    "Request",
    "RequestOptions",
    "TurnOptions",
    "build_options",
    "check_request",
    "refuse_unknown_keywords",
    "request_of",
    "schema_retries_of",
]

#: Each schema retry sends the wrong answer back and pays for another one: a few are enough.
MAX_SCHEMA_RETRIES = 5


@dataclass(frozen=True)
class Request:
    """One generation's request: where it goes and every option it carries.

    ``Request("mock", "echo", prompt="hi", temperature=0.2)``; ``engine.stream(request)``,
    ``engine.complete(request)``; ``request.replace(prompt="again")`` for a changed copy. It is
    frozen (``messages``, ``tools`` and ``stop_sequences`` are kept as tuples) and deliberately
    not hashable: it holds the caller's ``extra_body`` dict, images and a stop signal, which
    have no stable hash. Two requests with the same values compare equal.
    """

    provider: str
    model: str | None = None
    #: A user turn sent after ``messages``.
    prompt: str | None = None
    messages: Sequence[Message] | None = None
    system: str | None = None
    #: The tools the model may call (their schemas; the tool loop runs the functions).
    tools: Sequence[ToolSchema] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    #: Strings the model stops before.
    stop_sequences: Sequence[str] | None = None
    reasoning_effort: str | None = None
    #: Body fields sent as they are, over the provider's own ``extra_body``.
    extra_body: dict[str, Any] | None = None
    #: What the answer must follow: a pydantic model, a dataclass or a JSON Schema dict, kept as
    #: the checked :class:`~notebook_llm.core.response_schema.ResponseSchema`.
    schema: Any = None
    #: A path, bytes, PIL image, matplotlib Figure or URL (or a list), sent with the prompt.
    images: Any = None
    #: This request's time limits (``None``: the engine's).
    timeouts: Timeouts | None = None
    #: Extra tries for a retryable error (``None``: the engine's count).
    retries: int | None = None
    #: How many times an answer that does not validate is sent back with why (``complete``).
    schema_retries: int = 0
    #: ``False``: ask for the answer as one whole body (``"stream": false``), not a stream.
    stream: bool = True
    #: Set it to end the running stream.
    stop_signal: StopSignal | None = None

    __hash__ = None  # type: ignore[assignment]  # see the class docstring

    def __post_init__(self) -> None:
        if not self.provider or not isinstance(self.provider, str):
            raise LlmError("no provider given", ErrorCode.INVALID_OPTIONS)
        fixed: dict[str, Any] = _checked_shapes(self)  # the list fields as tuples, too
        max_tokens, temperature = self.max_tokens, self.temperature
        if max_tokens is not None and max_tokens <= 0:
            raise LlmError(
                f"max_tokens must be positive, not {max_tokens}", ErrorCode.INVALID_OPTIONS
            )
        if temperature is not None and not 0 <= temperature <= 2:
            raise LlmError(
                f"temperature must be within 0..2, not {temperature}", ErrorCode.INVALID_OPTIONS
            )
        if self.timeouts is not None and not isinstance(self.timeouts, Timeouts):
            raise LlmError(
                "timeouts= takes a Timeouts(deadline=..., idle=...) or None, not "
                f"{type(self.timeouts).__name__} {self.timeouts!r}",
                ErrorCode.INVALID_OPTIONS,
            )
        fixed["schema_retries"] = schema_retries_of(self.schema_retries)
        if self.schema is not None:
            from ..core.response_schema import as_schema

            fixed["schema"] = as_schema(self.schema)  # a wrong schema fails before any I/O
        for name, value in fixed.items():
            object.__setattr__(self, name, value)  # frozen: the checked values, set once

    def __repr__(self) -> str:
        """The fields that are set: ``Request(provider='mock', model='echo', prompt='hi')``."""
        shown = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None and (f.name, value) not in (
                ("schema_retries", 0),
                ("stream", True),
            ):
                shown.append(f"{f.name}={value!r}")
        return f"Request({', '.join(shown)})"

    @classmethod
    def of(cls, provider: str | Request, model: str | None = None, **options: Any) -> Request:
        """A request from the keywords users type (``Request.of("mock", "echo", prompt=...)``);
        given a ``Request``, that request with ``model`` and ``options`` over it. A keyword that
        is no option is a one-line ``TypeError`` that names the close ones."""
        return request_of(provider, model, options, "Request.of")

    def replace(self, **changes: Any) -> Request:
        """A copy with ``changes`` (checked as a new request is)."""
        return request_of(self, None, changes, "Request.replace")


def _checked_shapes(request: Request) -> dict[str, Any]:
    """A field of the wrong type, refused in one line that says what it takes (it failed
    later, inside the engine or the adapter, with a bare ``TypeError`` or ``AttributeError``).
    Returns the list fields as tuples; one ``stop_sequences`` string is that one sequence (not
    one per character)."""
    fixed: dict[str, Any] = {}
    for name in ("model", "prompt", "system", "reasoning_effort"):
        value = getattr(request, name)
        if value is not None and not isinstance(value, str):
            raise _bad_shape(f"{name}=", "a str", value)
    if not isinstance(request.stream, bool):
        raise _bad_shape("stream=", "True or False", request.stream)
    for name in ("temperature", "max_tokens"):
        value = getattr(request, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
            raise _bad_shape(f"{name}=", "a number", value)
    if request.extra_body is not None and not isinstance(request.extra_body, Mapping):
        raise _bad_shape("extra_body=", "a dict of body fields", request.extra_body)
    if isinstance(request.stop_sequences, str):
        fixed["stop_sequences"] = (request.stop_sequences,)
    elif request.stop_sequences is not None:
        fixed["stop_sequences"] = _items(request.stop_sequences, "stop_sequences", str, "str")
    if isinstance(request.messages, str):
        raise _bad_shape("messages=", "a list of Message (one text is prompt=)", request.messages)
    if request.messages is not None:
        fixed["messages"] = _items(request.messages, "messages", Message, "Message")
    if request.tools is not None:
        what = "ToolSchema (Python functions: run_tools, or Chat(tools=...))"
        fixed["tools"] = _items(request.tools, "tools", ToolSchema, what)
    return fixed


def _items(value: Any, name: str, kind: type, what: str) -> tuple[Any, ...]:
    """``value`` as a tuple of ``kind``, else a one-line ``INVALID_OPTIONS``."""
    if isinstance(value, kind) or not isinstance(value, Iterable):
        raise _bad_shape(f"{name}=", f"a list of {what}", value)
    items = tuple(value)
    for n, item in enumerate(items):
        if not isinstance(item, kind):
            raise _bad_shape(f"item {n} of {name}=", f"a {what}", item)
    return items


def _bad_shape(label: str, takes: str, value: Any) -> LlmError:
    """``prompt= takes a str, not int 123`` (the value itself only when it is a short scalar)."""
    shown = type(value).__name__
    if isinstance(value, int | float | str) and len(repr(value)) <= 40:
        shown += f" {value!r}"
    return LlmError(f"{label} takes {takes}, not {shown}", ErrorCode.INVALID_OPTIONS)


#: Every option of a :class:`Request` after ``provider`` and ``model``, in order.
OPTION_NAMES = tuple(f.name for f in dataclasses.fields(Request))[2:]


class TurnOptions(TypedDict, total=False):
    """The keywords of a request after the provider and model, but ``tools``: what ``Chat``
    and the tool loop take beside their own ``tools=`` (Python functions there, not schemas)."""

    prompt: str | None
    messages: Sequence[Message] | None
    system: str | None
    temperature: float | None
    max_tokens: int | None
    stop_sequences: Sequence[str] | None
    reasoning_effort: str | None
    extra_body: dict[str, Any] | None
    schema: Any
    images: Any
    timeouts: Timeouts | None
    retries: int | None
    schema_retries: int
    stream: bool
    stop_signal: StopSignal | None


class RequestOptions(TurnOptions, total=False):
    """The keywords of ``Engine.stream``/``complete`` after the provider and model: the fields
    of :class:`Request`, for type checkers and editors (a test keeps the two lists the same)."""

    tools: Sequence[ToolSchema] | None


def request_of(
    provider: str | Request, model: str | None, options: Mapping[str, Any], where: str
) -> Request:
    """The request of an entry point called ``where`` (``stream``, ``map``...): a ``Request``
    it was given (with ``model`` and ``options`` over it) or one made of the keywords."""
    if isinstance(provider, Request):  # its provider may be replaced too
        refuse_unknown_keywords(options, where, ("provider", "model", *OPTION_NAMES))
        if model is not None:
            options = {**options, "model": model}
        return dataclasses.replace(provider, **options) if options else provider
    refuse_unknown_keywords(options, where)
    return Request(provider, model, **options)


def refuse_unknown_keywords(
    options: Mapping[str, Any], where: str, known: Sequence[str] = ("model", *OPTION_NAMES)
) -> None:
    """A keyword that is no option of a request: one line that names the close ones (a
    ``TypeError``, as Python's own for a function's unknown keyword)."""
    unknown = [name for name in options if name not in known]
    if not unknown:
        return
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=2)
        parts.append(f"{name} (did you mean {' or '.join(close)}?)" if close else name)
    raise TypeError(
        f"{where}() got unexpected keyword argument{'s' if len(unknown) > 1 else ''}: "
        f"{', '.join(parts)}; the request options are {', '.join(known)}"
    )


def schema_retries_of(value: Any) -> int:
    """``schema_retries`` checked: a whole number from 0 to :data:`MAX_SCHEMA_RETRIES`."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise LlmError(
            f"schema_retries must be a whole number from 0 to {MAX_SCHEMA_RETRIES}, "
            f"not {type(value).__name__} {value!r}",
            ErrorCode.INVALID_OPTIONS,
        )
    if not 0 <= value <= MAX_SCHEMA_RETRIES:
        raise LlmError(
            f"schema_retries must be from 0 to {MAX_SCHEMA_RETRIES}, not {value}",
            ErrorCode.INVALID_OPTIONS,
        )
    return value


def check_request(request: Request) -> list[Message]:
    """The messages to send (``messages`` then ``prompt`` as a user turn, with ``images`` as
    image blocks after the prompt's text), after the checks that need the messages whole."""
    msgs = list(request.messages or [])
    if request.prompt is not None:
        msgs.append(Message.user(request.prompt))
    if not msgs:
        raise LlmError("nothing to send: give prompt= or messages=", ErrorCode.INVALID_OPTIONS)
    if request.images is not None:
        msgs = attach_images(msgs, request.images)
    check_unicode(request.system, msgs)
    return msgs


def attach_images(messages: list[Message], images: Any) -> list[Message]:
    """``messages`` with the blocks of ``images`` (see :mod:`notebook_llm.core.images`) added to the
    last user message (a new copy of it: the caller's history is not changed)."""
    from ..core.images import image_blocks

    blocks = image_blocks(images)
    if not blocks:
        return messages
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            out = list(messages)
            out[i] = Message("user", [*messages[i].content, *blocks])
            return out
    raise LlmError("images= needs a user message to go with", ErrorCode.INVALID_OPTIONS)


def build_options(
    config: ProviderConfig,
    messages: list[Message],
    request: Request,
    *,
    api_key: str | None,
    make_transport: Callable[[], httpx.AsyncBaseTransport] | None,
    timeouts: Timeouts | None,
) -> GenerateOptions:
    """The adapter's options: the request's values over the provider's settings."""
    return GenerateOptions(
        provider=request.provider,
        model=request.model or config.model,
        messages=messages,
        system=request.system,
        tools=list(request.tools) if request.tools else None,
        temperature=request.temperature,
        max_tokens=request.max_tokens,
        stop_sequences=list(request.stop_sequences) if request.stop_sequences else None,
        reasoning_effort=request.reasoning_effort,
        max_tokens_field=config.max_tokens_field,
        response_format=request.schema.response_format() if request.schema is not None else None,
        extra_body={**config.extra_body, **(request.extra_body or {})},
        base_url=config.base_url,
        headers=dict(config.headers),
        api_key=api_key,
        make_transport=make_transport,
        timeouts=timeouts,
        stream=request.stream,
    )


async def check_reasoning(adapter: LlmAdapter, options: GenerateOptions) -> None:
    """A reasoning effort the adapter says the model does not offer is refused before I/O; a
    model the adapter does not describe is left to the provider."""
    if options.reasoning_effort is None:
        return
    info = await adapter.resolve_model(options.provider, options.model)
    if info is None:
        return  # the adapter does not describe this model: let the provider decide
    efforts = info.reasoning_efforts
    if not efforts or options.reasoning_effort not in efforts:
        offered = f"it offers {', '.join(efforts)}" if efforts else "it has no reasoning efforts"
        raise LlmError(
            f"model {options.model!r} of provider {options.provider!r} does not support "
            f"reasoning effort {options.reasoning_effort!r}: {offered}",
            ErrorCode.UNSUPPORTED_REASONING_EFFORT,
            provider=options.provider,
        )


def check_unicode(system: str | None, messages: Sequence[Message]) -> None:
    """Text that cannot be sent as UTF-8 (a lone surrogate) is the caller's input, not the
    adapter's fault: say where it is before any adapter sees it."""
    texts = [("the system prompt", system or "")]
    for n, message in enumerate(messages, 1):
        for block in message.content:
            text = getattr(block, "text", None)
            if isinstance(text, str):
                texts.append((f"message {n} ({message.role})", text))
    for where, text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise LlmError(
                f"{where} holds text that is not valid Unicode (a lone surrogate "
                f"{text[exc.start]!r} at position {exc.start}): clean it first, e.g. with "
                ".encode('utf-8', 'replace').decode()",
                ErrorCode.INVALID_OPTIONS,
            ) from None
