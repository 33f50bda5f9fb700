"""A caller's request, checked and turned into the ``GenerateOptions`` an adapter receives.

One job: everything about a request that needs no route, key or network. The caller's mistakes
(nothing to send, a lone surrogate in the text, ``max_tokens`` or ``temperature`` out of range, a
reasoning effort the model does not offer) raise ``LlmError(INVALID_OPTIONS | ...)`` here, with
one line that says what to fix, before any adapter sees them. The
:class:`~notebook_llm.engine.engine.Engine` finds the route, the provider settings and the key, then
calls :func:`check_request` and :func:`build_options` in that order (so a bad option is reported
before a missing key, as it always was).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..adapters.base import LlmAdapter
from ..core.errors import ErrorCode, LlmError
from ..core.protocol import GenerateOptions, Message, ToolSchema
from .providers import ProviderConfig

if TYPE_CHECKING:
    import httpx

    from ..core.timeouts import Timeouts

#: The request options of :meth:`Engine.stream` after the route and model (what ``complete``
#: takes out of its keyword arguments).
OPTION_NAMES = (
    "prompt",
    "messages",
    "system",
    "tools",
    "temperature",
    "max_tokens",
    "stop_sequences",
    "reasoning_effort",
    "extra_body",
    "schema",
    "images",
    "timeouts",
)


def check_request(
    prompt: str | None,
    messages: Sequence[Message] | None,
    system: str | None,
    temperature: float | None,
    max_tokens: int | None,
    images: Any = None,
) -> list[Message]:
    """The messages to send (``messages`` then ``prompt`` as a user turn, with ``images`` as
    image blocks after the prompt's text), after the checks that need nothing but the caller's
    values."""
    msgs = list(messages or [])
    if prompt is not None:
        msgs.append(Message.user(prompt))
    if not msgs:
        raise LlmError("nothing to send: give prompt= or messages=", ErrorCode.INVALID_OPTIONS)
    if images is not None:
        msgs = attach_images(msgs, images)
    check_unicode(system, msgs)
    if max_tokens is not None and max_tokens <= 0:
        raise LlmError(f"max_tokens must be positive, not {max_tokens}", ErrorCode.INVALID_OPTIONS)
    if temperature is not None and not 0 <= temperature <= 2:
        raise LlmError(
            f"temperature must be within 0..2, not {temperature}", ErrorCode.INVALID_OPTIONS
        )
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


def response_format_of(schema: Any) -> dict[str, Any] | None:
    """The request's ``response_format`` for ``schema=`` (``None``: no schema)."""
    if schema is None:
        return None
    from ..core.response_schema import as_schema

    return as_schema(schema).response_format()


def build_options(
    config: ProviderConfig,
    messages: list[Message],
    *,
    provider: str,
    model: str | None,
    system: str | None,
    tools: Sequence[ToolSchema] | None,
    temperature: float | None,
    max_tokens: int | None,
    stop_sequences: Sequence[str] | None,
    reasoning_effort: str | None,
    extra_body: dict[str, Any] | None,
    api_key: str | None,
    make_transport: Callable[[], httpx.AsyncBaseTransport] | None,
    response_format: dict[str, Any] | None = None,
    timeouts: Timeouts | None = None,
) -> GenerateOptions:
    """The adapter's options: the caller's values over the provider's settings."""
    return GenerateOptions(
        provider=provider,
        model=model or config.model,
        messages=messages,
        system=system,
        tools=list(tools) if tools else None,
        temperature=temperature,
        max_tokens=max_tokens,
        stop_sequences=list(stop_sequences) if stop_sequences else None,
        reasoning_effort=reasoning_effort,
        max_tokens_field=config.max_tokens_field,
        response_format=response_format,
        extra_body={**config.extra_body, **(extra_body or {})},
        base_url=config.base_url,
        headers=dict(config.headers),
        api_key=api_key,
        make_transport=make_transport,
        timeouts=timeouts,
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
