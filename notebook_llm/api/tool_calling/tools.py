"""Python functions as tools: :class:`Tool`, the :func:`tool` decorator and :func:`as_tool`."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import enum
import functools
import inspect
import json
import threading
import typing
from collections.abc import Callable
from typing import Any, overload

from ...core.errors import ErrorCode, LlmError
from ...core.json_schema_check import check
from ...core.protocol import ImageBlock, ToolSchema
from .docstrings import parse_docstring
from .type_schema import coerce, schema_for_type

__all__ = ["Tool", "ToolReply", "as_tool", "format_result", "function_schema", "tool"]

JsonSchema = dict[str, Any]


def _json_default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # pydantic v2 style
        try:
            return dump(mode="json")
        except TypeError:
            return dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def format_result(value: Any) -> str:
    """A tool's return value as the text sent to the model.

    ``str`` as is; anything else as JSON: objects with ``model_dump()`` (pydantic) and
    dataclasses as their fields, enums as their values, sets and tuples as lists, other
    unknown objects as ``str(value)``.
    """
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=_json_default)


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def function_schema(
    fn: Callable[..., Any], *, description: str | None = None
) -> tuple[str, JsonSchema, dict[str, Any]]:
    """``(description, parameters schema, hints by parameter)`` of ``fn``.

    Parameters without a default are required; ``*args`` and ``**kwargs`` are not offered to
    the model (``**kwargs`` lets extra properties through). Raises ``TypeError`` for a type
    hint that has no JSON form.
    """
    target: Any = fn
    if isinstance(fn, functools.partial):
        target = fn.func
    elif inspect.isclass(fn):
        target = fn.__init__
    elif not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        target = type(fn).__call__  # a callable object
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception as exc:
        raise TypeError(f"cannot resolve the type hints of {fn!r}: {exc}") from None
    doc = parse_docstring(inspect.getdoc(fn) or inspect.getdoc(target))
    props: dict[str, JsonSchema] = {}
    required: list[str] = []
    param_hints: dict[str, Any] = {}
    extra_allowed = False
    fn_name = getattr(fn, "__name__", type(fn).__name__)
    for p in signature.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            continue
        if p.kind is p.VAR_KEYWORD:
            extra_allowed = True
            continue
        hint = hints.get(p.name, inspect.Parameter.empty)
        if hint is inspect.Parameter.empty and p.default is not p.empty and p.default is not None:
            hint = type(p.default)
        param_hints[p.name] = hint
        prop = dict(schema_for_type(hint, f"parameter {p.name!r} of {fn_name}"))
        if p.name in doc.params and "description" not in prop:
            prop["description"] = doc.params[p.name]
        if p.default is p.empty:
            required.append(p.name)
        elif _json_safe(p.default) and not isinstance(p.default, enum.Enum):
            prop["default"] = p.default
        elif isinstance(p.default, enum.Enum):
            prop["default"] = p.default.value
        props[p.name] = prop
    schema: JsonSchema = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    if not extra_allowed:
        schema["additionalProperties"] = False
    return (description if description is not None else doc.description), schema, param_hints


@dataclasses.dataclass
class ToolReply:
    """What a tool gives back when it is more than one value: the text the model reads, the
    images it is shown after the tool results, and whether the text is the tool's own error.

    An MCP tool answers this way (the protocol's text, images and ``isError``); a Python tool
    may return one too. The loop passes it on as it is, never through :func:`format_result`.
    """

    text: str
    images: list[ImageBlock] = dataclasses.field(default_factory=list)
    is_error: bool = False


class Tool:
    """A Python callable the model can call.

    ``name`` and ``description`` default to the function's name and docstring; ``parameters``
    (a JSON Schema object) defaults to one built from the signature and type hints. A ``Tool``
    is still callable like the function it wraps.

    >>> def add(a: int, b: int = 1) -> int:
    ...     '''Add numbers.'''
    ...     return a + b
    >>> t = Tool(add)
    >>> t.schema.parameters["required"]
    ['a']
    """

    #: Where the tool lives, as tool cards show it: empty for a Python function, ``mcp:NAME``
    #: for a tool of the MCP server NAME.
    source: str = ""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: JsonSchema | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"a tool needs a callable, not {fn!r}")
        self.fn = fn
        desc, generated, self._hints = function_schema(fn, description=description)
        self.name: str = name or getattr(fn, "__name__", None) or type(fn).__name__
        self.description: str = desc
        self.parameters: JsonSchema = parameters if parameters is not None else generated
        self._signature = inspect.signature(fn)
        functools.update_wrapper(self, fn, updated=())

    @property
    def schema(self) -> ToolSchema:
        """The engine-level form offered to the model."""
        return ToolSchema(self.name, self.description, self.parameters)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, description={self.description[:40]!r})"

    def with_overrides(self, *, name: str | None = None, description: str | None = None) -> Tool:
        """A copy with another name and/or description."""
        return Tool(
            self.fn,
            name=name or self.name,
            description=self.description if description is None else description,
            parameters=self.parameters,
        )

    # ------------------------------------------------------------------ running

    def prepare(self, arguments_json: str) -> tuple[dict[str, Any] | None, str | None]:
        """Parse and check the model's arguments: ``(kwargs, None)`` or ``(None, problem)``.

        Never raises: arguments nested too deeply to parse or check, a hand-written schema the
        validator trips on, and a hint whose type refuses the value all come back as a problem
        for the model to fix.
        """
        try:
            return self._prepare(arguments_json)
        except RecursionError:
            return None, (
                f"the arguments for tool {self.name!r} are nested too deeply to read; send a "
                "flatter JSON object matching the tool's parameters"
            )
        except Exception as exc:
            return None, f"invalid arguments for tool {self.name!r}: {error_text(exc)}"

    def _prepare(self, arguments_json: str) -> tuple[dict[str, Any] | None, str | None]:
        text = (arguments_json or "").strip()
        try:
            value = json.loads(text) if text else {}
        except json.JSONDecodeError as exc:
            return None, (
                f"the arguments for tool {self.name!r} are not valid JSON ({exc.msg} at position "
                f"{exc.pos}); send a JSON object matching the tool's parameters"
            )
        if not isinstance(value, dict):
            return None, (
                f"the arguments for tool {self.name!r} must be a JSON object, not "
                f"{type(value).__name__}"
            )
        problems = check(value, self.parameters)
        if problems:
            expected = json.dumps(self.parameters, ensure_ascii=False, default=str)
            return None, (
                f"invalid arguments for tool {self.name!r}: "
                + "; ".join(problems)
                + f". Expected parameters schema: {expected}"
            )
        try:
            kwargs = {
                k: coerce(v, self._hints.get(k, inspect.Parameter.empty)) for k, v in value.items()
            }
        except RecursionError:
            raise
        except Exception as exc:  # a dataclass or model constructor may raise anything
            return None, f"invalid arguments for tool {self.name!r}: {exc}"
        return kwargs, None

    async def call(self, kwargs: dict[str, Any]) -> Any:
        """Run the function with checked ``kwargs``: async functions are awaited, sync ones run
        in a thread of their own (so they do not block the event loop).

        Whatever the function raises comes out as an ordinary exception: a ``BaseException``
        it raises itself (``SystemExit``, ``GeneratorExit``, its own ``CancelledError`` or
        ``KeyboardInterrupt``) and ``StopIteration`` are wrapped in :class:`ToolExit`. What
        still propagates is a real stop: the cancellation of the calling task, and a
        ``KeyboardInterrupt`` raised on the main thread (where a kernel interrupt lands).
        """
        args: list[Any] = []
        named = dict(kwargs)
        for p in self._signature.parameters.values():
            if p.kind is p.POSITIONAL_ONLY and p.name in named:
                args.append(named.pop(p.name))
        return await run_user_code(self.fn, *args, **named)

    async def invoke(self, arguments_json: str) -> tuple[str, bool]:
        """Run the tool on the model's JSON arguments: ``(result text, is_error)``.

        Invalid JSON, arguments that do not fit the schema, exceptions raised by the function
        and results that cannot be turned into text all come back as an error text for the
        model, never as an exception (a real stop, see :meth:`call`, does propagate).
        """
        kwargs, problem = self.prepare(arguments_json)
        if kwargs is None:
            return problem or "invalid arguments", True
        try:
            result = await self.call(kwargs)
        except Exception as exc:
            return error_text(exc), True
        return result_text(self.name, result)


def result_text(name: str, value: Any) -> tuple[str, bool]:
    """``(text, is_error)`` for a tool's return value; never raises (short of a real stop).

    A value that cannot be turned into text (a circular structure, one nested too deeply, an
    object whose ``__str__`` or ``model_dump`` fails) is the tool's error, said as such.
    """
    try:
        return format_result(value), False
    except RecursionError:
        return f"the result of tool {name!r} is nested too deeply to be turned into text", True
    except BaseException as exc:
        if is_real_stop(exc):
            raise
        return f"the result of tool {name!r} could not be turned into text: {error_text(exc)}", True


class ToolExit(Exception):
    """A tool raised a ``BaseException`` of its own (``SystemExit``, ``KeyboardInterrupt``,
    ``GeneratorExit``, ``CancelledError``) or ``StopIteration``; reported like any exception.

    Left as they are, asyncio re-raises the first two out of the event loop (which ends the
    kernel or leaves the turn waiting forever), fails the step on the others, and cannot put
    ``StopIteration`` into a future at all (the await then never ends).
    """

    def __init__(self, original: BaseException) -> None:
        self.original = original
        super().__init__(error_text(original))


def is_real_stop(exc: BaseException) -> bool:
    """Whether ``exc`` is a stop from outside the user's code rather than the code's own raise.

    A ``CancelledError`` is real when the running task has been asked to cancel; a
    ``KeyboardInterrupt`` is real when raised on the main thread, where Python delivers
    SIGINT (a worker thread or the background loop's thread never receives it).
    """
    if isinstance(exc, asyncio.CancelledError):
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no running loop: not a task's cancellation
            return False
        return task is not None and task.cancelling() > 0
    if isinstance(exc, KeyboardInterrupt):
        return threading.current_thread() is threading.main_thread()
    return False


async def run_user_code(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run user code (a tool, a confirm function): a coroutine function is awaited, anything
    else runs in a daemon thread of its own and an awaitable it returns is awaited.

    Why a thread per call rather than ``asyncio.to_thread``: the loop's default executor has a
    handful of workers, and tools that hang (or that a Stop left running) would fill it, after
    which every later ``to_thread`` on that loop, name resolution included, waits forever.
    """
    try:
        if _is_async(fn):
            return await fn(*args, **kwargs)
        result = await _in_thread(fn, *args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result
    except ToolExit:
        raise
    except StopIteration as exc:
        raise ToolExit(exc) from None
    except BaseException as exc:
        if isinstance(exc, Exception) or is_real_stop(exc):
            raise
        raise ToolExit(exc) from None


def _in_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.Future[Any]:
    """``fn(*args, **kwargs)`` in a new daemon thread, as a future of this loop.

    Everything the function raises reaches the future: a ``BaseException`` raised in a worker
    thread is always the code's own, so it is wrapped in :class:`ToolExit`, which a future
    accepts (``StopIteration`` is refused by ``Future.set_exception``).
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # cancelled meanwhile (Stop): the result is dropped
            return
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)

    def run() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = context.run(fn, *args, **kwargs)
        except Exception as exc:
            error = ToolExit(exc) if isinstance(exc, StopIteration) else exc
        except BaseException as exc:
            error = ToolExit(exc)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(settle, value, error)
        del value, error

    name = getattr(fn, "__name__", type(fn).__name__)
    threading.Thread(target=run, name=f"notebook_llm-tool-{name}", daemon=True).start()
    return future


def error_text(exc: BaseException) -> str:
    """How a tool's exception is reported to the model: ``"ValueError: message"``."""
    if isinstance(exc, ToolExit):
        exc = exc.original
    try:
        message = str(exc)
    except Exception:  # an exception whose __str__ fails still has a name
        message = ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _is_async(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    if isinstance(fn, functools.partial):
        return _is_async(fn.func)
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__)


@overload
def tool(
    fn: Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> Tool: ...


@overload
def tool(
    fn: None = None, *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a :class:`Tool`: ``@tool``, ``@tool(name="search")`` or ``tool(f)``.

    The decorated name still works as a normal function.
    """
    if fn is None:
        return lambda f: as_tool(f, name=name, description=description)
    return as_tool(fn, name=name, description=description)


def as_tool(
    obj: Tool | Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> Tool:
    """``obj`` as a :class:`Tool`: a ``Tool`` (optionally renamed), a function, a method, a
    ``functools.partial`` or any callable object. A bare ``ToolSchema`` is rejected: it has no
    function to run."""
    if isinstance(obj, Tool):
        if name is None and description is None:
            return obj
        return obj.with_overrides(name=name, description=description)
    if isinstance(obj, ToolSchema):
        raise LlmError(
            f"tool {obj.name!r} is a ToolSchema without a function to run; pass "
            "Tool(fn, name=..., description=..., parameters=...) instead",
            ErrorCode.INVALID_OPTIONS,
        )
    if not callable(obj):
        raise LlmError(f"{obj!r} is not callable and cannot be a tool", ErrorCode.INVALID_OPTIONS)
    return Tool(obj, name=name, description=description)
