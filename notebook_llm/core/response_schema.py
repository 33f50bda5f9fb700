"""Answers shaped by a schema: one JSON Schema for every provider, and the answer checked back.

``schema=`` (on ``Engine.stream``/``complete``, ``Chat.send``, ``map`` and ``%%llm --schema``)
takes a pydantic model (when pydantic is installed: the ``notebook-llm[schema]`` extra), a
dataclass or a JSON Schema dict. :func:`as_schema` turns each into a :class:`ResponseSchema`:
one JSON Schema (local ``$ref`` s inlined, so every provider and the mock read it the same way),
a name, and whether it meets OpenAI's strict-mode rules (every object lists all its properties
as required and forbids others), so adapters can ask for strict decoding only when the provider
would accept the schema.

The answer is untrusted text. :meth:`ResponseSchema.validate` parses it (a fenced ```json
block is accepted) and validates it back into the caller's type: the pydantic model, the
dataclass (through pydantic when installed), or a plain dict for a JSON Schema (checked with
``jsonschema`` when installed, else with :func:`notebook_llm.core.json_schema_check.check`, a small documented subset). A
failure is ``LlmError(SCHEMA_MISMATCH)`` whose ``details`` keep the raw text and the validation
message, which :func:`retry_messages` feeds back to the model for one more try.

Nothing here imports pydantic or jsonschema at module import time.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import importlib
import json
import re
import sys
import types
import typing
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .completion import Completion
from .errors import ErrorCode, LlmError
from .json_schema_check import check
from .protocol import (
    BlockEnd,
    Event,
    Finish,
    FinishReason,
    Message,
    TextBlock,
    TextDelta,
)

__all__ = [
    "ResponseSchema",
    "as_schema",
    "check_events",
    "fields_of",
    "parse_into",
    "retry_messages",
]

SchemaKind = Literal["pydantic", "dataclass", "json"]
_NAME_RE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True)
class ResponseSchema:
    """A caller's schema, normalised: see the module docstring."""

    name: str
    schema: dict[str, Any]
    #: Whether the schema meets strict structured-output rules (adapters send ``strict`` then).
    strict: bool
    kind: SchemaKind = "json"
    #: The pydantic model or dataclass to build; ``None`` for a JSON Schema dict.
    target: Any = field(default=None, compare=False)

    def response_format(self) -> dict[str, Any]:
        """What the request carries (``GenerateOptions.response_format``): name, schema, strict."""
        return {"name": self.name, "schema": copy.deepcopy(self.schema), "strict": self.strict}

    @property
    def fields(self) -> list[str]:
        """The top-level property names, in schema order (the columns of a typed ``map``)."""
        props = self.schema.get("properties")
        return list(props) if isinstance(props, Mapping) else []

    def validate(self, text: str) -> Any:
        """The answer ``text`` parsed and validated into the caller's type; raises
        ``LlmError(SCHEMA_MISMATCH)`` (``details``: ``raw``, ``validation``) when it does not fit."""
        try:
            value = json.loads(_unfence(text), parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            problem = f"the answer is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            raise self._mismatch(text, problem) from None
        except RecursionError:  # the answer is untrusted: "[[[[..." must not crash the caller
            raise self._mismatch(text, "the answer's JSON nests too deeply") from None
        except ValueError as exc:  # NaN/Infinity, an integer longer than Python reads
            raise self._mismatch(text, f"the answer is not JSON ({exc})") from None
        if self.kind == "pydantic":
            return self._pydantic(text, value)
        if self.kind == "dataclass" and _pydantic() is not None:
            return self._pydantic(text, value)
        found = _json_schema_problem(self.schema, value)
        if found is not None:
            raise self._mismatch(text, found)
        if self.kind == "dataclass" and isinstance(value, dict):
            try:
                return self.target(**value)
            except TypeError as exc:
                raise self._mismatch(text, str(exc)) from None
        return value

    def _pydantic(self, text: str, value: Any) -> Any:
        pydantic = _pydantic()
        assert pydantic is not None
        try:
            if self.kind == "pydantic":
                return self.target.model_validate(value)
            return pydantic.TypeAdapter(self.target).validate_python(value)
        except pydantic.ValidationError as exc:
            raise self._mismatch(text, _pydantic_message(exc)) from None
        except RecursionError:
            raise self._mismatch(text, "the answer nests too deeply to validate") from None
        except Exception as exc:  # a validator of the caller's that raised something else
            problem = f"a validator raised {type(exc).__name__}: {_first_line(exc)}"
            raise self._mismatch(text, problem) from None

    def _mismatch(self, text: str, problem: str) -> LlmError:
        # a validator quotes the offending value: a long answer must not make a long message
        problem = " ".join(problem.split())
        if len(problem) > MAX_PROBLEM_CHARS:
            problem = problem[: MAX_PROBLEM_CHARS - 3] + "..."
        return LlmError(
            f"the answer does not match the schema {self.name}: {problem}",
            ErrorCode.SCHEMA_MISMATCH,
            details={"raw": text, "validation": problem, "schema": self.name},
        )


# ------------------------------------------------------------------------------ normalising


def as_schema(obj: Any) -> ResponseSchema:
    """A :class:`ResponseSchema` for a pydantic model, a dataclass or a JSON Schema dict (an
    existing ``ResponseSchema`` is returned as it is). A schema that no validator or provider
    could use (malformed, a ``$ref`` that is not local or points nowhere, nested deeper than
    :data:`MAX_SCHEMA_DEPTH`, a model pydantic cannot describe) is refused here, in one line,
    before anything is sent."""
    if isinstance(obj, ResponseSchema):
        return obj
    try:
        made = _as_schema(obj)
    except LlmError:
        raise
    except RecursionError:
        raise _bad_schema(f"it nests deeper than {MAX_SCHEMA_DEPTH} levels") from None
    except Exception as exc:  # pydantic's schema generation errors, a type hint that fails
        raise _bad_schema(f"{type(exc).__name__}: {_first_line(exc)}") from None
    _check_usable(made.schema)
    return made


#: A validation message is cut to this many characters (it is shown, and fed back on a retry).
MAX_PROBLEM_CHARS = 300

#: Schemas nested deeper than this many JSON levels are refused (an object's property is two:
#: ``properties``, then the property): providers allow far less (OpenAI: 10 object levels), and
#: validating, the mock and the Lua adapters walk the schema recursively.
MAX_SCHEMA_DEPTH = 64


def _bad_schema(problem: str) -> LlmError:
    return LlmError(f"schema= cannot be used: {problem}", ErrorCode.INVALID_OPTIONS)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _check_usable(schema: dict[str, Any]) -> None:
    """Refuse a schema that is too deep, has a ``$ref`` a validator cannot resolve locally, or
    that ``jsonschema`` (when installed) says is not a valid schema."""
    defs = {
        f"#/{key}/{n}"
        for key in ("$defs", "definitions")
        if isinstance(schema.get(key), Mapping)
        for n in schema[key]
    }
    stack: list[tuple[Any, int]] = [(schema, 0)]  # iterative: a deep schema cannot exhaust it
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise _bad_schema(f"it nests deeper than {MAX_SCHEMA_DEPTH} levels")
        if isinstance(node, Mapping):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref != "#" and ref not in defs:
                where = "is not local" if not ref.startswith("#") else "points nowhere"
                raise _bad_schema(f"the $ref {ref[:100]!r} {where} (only #/$defs/... refs)")
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    try:
        jsonschema: Any = importlib.import_module("jsonschema")
    except ImportError:
        return
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = ".".join(str(p) for p in exc.absolute_path) or "(root)"
        raise _bad_schema(f"it is not a valid JSON Schema at {where}: {exc.message}") from None


def _as_schema(obj: Any) -> ResponseSchema:
    if isinstance(obj, type) and _is_pydantic_model(obj):
        raw = typing.cast(Any, obj).model_json_schema()
        return _make(obj.__name__, _closed(_inline_refs(raw)), "pydantic", obj)
    if isinstance(obj, type) and dataclasses.is_dataclass(obj):
        pydantic = _pydantic()
        raw = (
            pydantic.TypeAdapter(obj).json_schema()
            if pydantic is not None
            else _dataclass_schema(obj, set())
        )
        return _make(obj.__name__, _closed(_inline_refs(raw)), "dataclass", obj)
    if isinstance(obj, Mapping):
        schema = _inline_refs(dict(obj))
        if "type" not in schema and isinstance(schema.get("properties"), Mapping):
            schema["type"] = "object"
        if not isinstance(schema.get("type"), str | list) and not any(
            k in schema for k in ("anyOf", "oneOf", "enum", "const")
        ):
            raise LlmError(
                "schema= got a dict that is not a JSON Schema (it has no type): give e.g. "
                '{"type": "object", "properties": {...}}',
                ErrorCode.INVALID_OPTIONS,
            )
        return _make(str(schema.get("title") or "answer"), schema, "json", None)
    raise LlmError(
        f"schema= takes a pydantic model, a dataclass or a JSON Schema dict, not "
        f"{type(obj).__name__}",
        ErrorCode.INVALID_OPTIONS,
    )


def _make(name: str, schema: dict[str, Any], kind: SchemaKind, target: Any) -> ResponseSchema:
    clean = _NAME_RE.sub("_", name).strip("_")[:64] or "answer"
    return ResponseSchema(clean, schema, _is_strict(schema), kind, target)


def _pydantic() -> Any:
    """pydantic, when installed (imported on first use only)."""
    if "pydantic" in sys.modules:
        return sys.modules["pydantic"]
    try:
        import pydantic
    except ImportError:
        return None
    return pydantic


def _is_pydantic_model(obj: type) -> bool:
    pydantic = sys.modules.get("pydantic")  # a model class means pydantic is already imported
    return pydantic is not None and issubclass(obj, pydantic.BaseModel)


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Local ``#/$defs/X`` (and ``#/definitions/X``) references replaced by their targets, so
    every provider and the mock read one self-contained schema; a recursive reference is kept
    as it is (with its definitions)."""
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), Mapping):
            defs.update({f"#/{key}/{n}": v for n, v in schema[key].items()})
    if not defs:
        return copy.deepcopy(schema)
    recursive = False

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        nonlocal recursive
        if isinstance(node, Mapping):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref in defs:
                if ref in seen:
                    recursive = True
                    return dict(node)
                target = walk(defs[ref], (*seen, ref))
                extra = {k: walk(v, seen) for k, v in node.items() if k != "$ref"}
                return {**target, **extra}
            return {k: walk(v, seen) for k, v in node.items() if k not in ("$defs", "definitions")}
        if isinstance(node, list):
            return [walk(v, seen) for v in node]
        return node

    out: dict[str, Any] = walk(schema, ())
    if recursive:
        for key in ("$defs", "definitions"):
            if key in schema:
                out[key] = copy.deepcopy(schema[key])
    return out


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """Objects of a generated schema (a model's or a dataclass's fields) forbid other keys, as
    strict decoding requires; a model ignores extra keys anyway, so nothing valid is lost."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: walk(v) for k, v in node.items()}
            if out.get("type") == "object" and "additionalProperties" not in out:
                out["additionalProperties"] = False
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    result: dict[str, Any] = walk(schema)
    return result


def _is_strict(schema: Any) -> bool:
    """OpenAI strict mode's rules: every object's properties all required, no other keys."""
    if isinstance(schema, list):
        return all(_is_strict(s) for s in schema)
    if not isinstance(schema, Mapping):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False:
            return False
        if set(props) != set(schema.get("required") or []):
            return False
    children: list[Any] = []
    for key in ("properties", "$defs"):
        if isinstance(schema.get(key), Mapping):
            children += list(schema[key].values())
    if "items" in schema:
        children.append(schema["items"])
    for key in ("anyOf", "oneOf", "allOf"):
        children += list(schema.get(key) or [])
    return all(_is_strict(c) for c in children)


# A dataclass without pydantic: written by hand because no standard-library tool maps type
# hints to JSON Schema; it covers the types a typed answer uses (str, int, float, bool, None,
# Literal, Enum, list/tuple/set, dict, Optional/Union, nested dataclasses).
def _dataclass_schema(cls: type, seen: set[type]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in dataclasses.fields(cls):
        props[f.name] = _type_schema(hints.get(f.name, Any), seen | {cls})
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
    return {"title": cls.__name__, "type": "object", "properties": props, "required": required}


def _type_schema(tp: Any, seen: set[type]) -> dict[str, Any]:
    simple = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if tp in simple:
        return {"type": simple[tp]}
    if tp is type(None):
        return {"type": "null"}
    if tp is Any:
        return {}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_type_schema(a, seen) for a in args]}
    if origin in (list, tuple, set, frozenset, Sequence):
        return {"type": "array", "items": _type_schema(args[0], seen) if args else {}}
    if origin in (dict, Mapping):
        return {"type": "object"}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and tp not in seen:
        return _dataclass_schema(tp, seen)
    raise LlmError(
        f"schema=: cannot describe the type {tp!r} without pydantic; install "
        "notebook-llm[schema] or give a JSON Schema dict",
        ErrorCode.INVALID_OPTIONS,
    )


# ------------------------------------------------------------------------------ validating


def _unfence(text: str) -> str:
    """The JSON of an answer: the text itself, or the content of its one fenced block.

    Models asked for JSON in the prompt (JSON mode, the Lua adapters, DeepSeek) often answer
    with a ```json block, sometimes with a sentence around it; one block is unambiguous, so it
    is taken. Two blocks, or bare JSON followed by prose, are left as they are (and fail with
    the parser's message, which a retry feeds back).

    A scan with ``str.find``, not a regex: the answer is untrusted, and the pattern this
    replaces (three backticks, an optional tag, white space, the content, white space, three
    backticks) backtracked for minutes on backticks followed by a long run of spaces."""
    text = text.strip()
    if text[:1] in ("{", "[", '"') or "```" not in text:
        return text
    if len(text) >= 6 and text.startswith("```") and text.endswith("```"):
        return _fenced(text, 3, len(text) - 3)
    if text.count("```") == 2:
        first = text.find("```") + 3
        start = _after_tag(text, first, len(text))
        end = text.find("```", start)
        if end >= 0:
            return _fenced(text, first, end)
    return text


#: The characters of a fence's language tag (```json).
_TAG_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _after_tag(text: str, start: int, end: int) -> int:
    """Where a fence's content starts: after its language tag when one (tag characters followed
    by white space) opens ``text[start:end]``, else ``start``."""
    at = start
    while at < end and text[at] in _TAG_CHARS:
        at += 1
    return at if start < at < end and text[at].isspace() else start


def _fenced(text: str, start: int, end: int) -> str:
    """The content of a fence whose inside is ``text[start:end]``: its tag and the white space
    around it removed."""
    return text[_after_tag(text, start, end) : end].strip()


def _pydantic_message(exc: Any) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    more = len(exc.errors()) - 5
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _json_schema_problem(schema: Mapping[str, Any], value: Any) -> str | None:
    """The first problem of ``value`` against ``schema`` (``None``: it fits)."""
    try:
        jsonschema: Any = importlib.import_module("jsonschema")
    except ImportError:
        problems = check(value, schema)
        return problems[0] if problems else None
    validator_cls = jsonschema.validators.validator_for(schema)
    error = jsonschema.exceptions.best_match(validator_cls(schema).iter_errors(value))
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path) or "(root)"
    return f"{where}: {error.message}"


# ------------------------------------------------------------------------------ streams


async def check_events(
    events: AsyncIterator[Event], schema: ResponseSchema
) -> AsyncIterator[Event]:
    """The stream, with its ``finish{stop}`` replaced by ``finish{error: SCHEMA_MISMATCH}`` when
    the answer's text does not validate (the text itself is passed on as it streamed)."""
    deltas: dict[int, list[str]] = {}
    ended: dict[int, str] = {}
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                deltas.setdefault(event.index, []).append(event.text)
            elif isinstance(event, BlockEnd) and isinstance(event.block, TextBlock):
                ended[event.index] = event.block.text
            elif isinstance(event, Finish) and event.reason.kind == "stop":
                indexes = sorted(set(deltas) | set(ended))
                text = "".join(ended.get(i, "".join(deltas.get(i, []))) for i in indexes)
                try:
                    schema.validate(text)
                except LlmError as err:
                    event = Finish(FinishReason("error", err))
            yield event
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


def fields_of(value: Any) -> dict[str, Any] | None:
    """The top-level fields of a parsed answer (a pydantic model, a dataclass or a dict), as
    JSON-ready values; ``None`` for anything else."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        out = dump(mode="json")
        return out if isinstance(out, dict) else None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value if isinstance(value, dict) else None


def parse_into(completion: Completion, schema: ResponseSchema | None) -> LlmError | None:
    """Validate a finished completion's text against ``schema``: set ``completion.parsed``, or
    turn its ``stop`` finish into ``error: SCHEMA_MISMATCH`` and return that error. A
    completion that did not stop normally (an error, max tokens, tool calls) is left alone."""
    if schema is None or completion.finish is None or completion.finish.kind != "stop":
        return None
    try:
        completion.parsed = schema.validate(completion.text)
    except LlmError as err:
        completion.finish = FinishReason("error", err)
        return err
    return None


def retry_messages(messages: Sequence[Message], err: LlmError) -> list[Message]:
    """The conversation for one more try: the wrong answer and what was wrong with it."""
    raw = str(err.details.get("raw", ""))
    problem = str(err.details.get("validation", err.message))
    return [
        *messages,
        Message.assistant(raw),
        Message.user(
            f"That answer does not match the required JSON schema: {problem}. "
            "Answer again with only the corrected JSON."
        ),
    ]
