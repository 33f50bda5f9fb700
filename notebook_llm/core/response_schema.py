"""Answers shaped by a schema: one JSON Schema for every provider, and the answer checked back.

``schema=`` (on ``Engine.stream``/``complete``, ``Chat.send``, ``map`` and ``%%llm --schema``)
takes a pydantic model (when pydantic is installed: the ``notebook-llm[schema]`` extra), a
dataclass or a JSON Schema dict. :func:`as_schema` turns each into a :class:`ResponseSchema`:
one JSON Schema for the providers (local ``$ref`` s inlined, so every provider and the mock read
it the same way), a name, and whether it meets OpenAI's strict-mode rules (every object lists
all its properties as required and forbids others), so adapters can ask for strict decoding
only when the provider would accept the schema.

Inlining keeps the schema's meaning (:func:`_inlined`): a ``$ref`` beside other keywords adds
them to the referenced schema (merged when no keyword of one side reads a keyword of the other,
else as ``allOf``; drafts 4 to 7, whose ``$ref`` hides its siblings, drop them), keywords are
told from names (a property called ``$defs`` or ``$ref`` is a name and stays), ``enum`` and
``default`` values are data, and the expansion is counted as it is built: a schema whose
definitions reuse each other (``A0 = anyOf[A1, A1]``, ...) is refused in one line once its
inlined form passes :data:`MAX_INLINED_NODES` values, instead of growing to 2^depth.

The answer is untrusted text. :meth:`ResponseSchema.validate` parses it (a fenced ```json
block is accepted) and validates it back into the caller's type: the pydantic model, the
dataclass (through pydantic when installed, else against its type hints: a dataclass never
needs the JSON Schema validator), or a plain dict for a JSON Schema, checked against
the user's own schema (not the inlined copy) by the package's one JSON Schema validator
(:func:`notebook_llm.core.json_schema_check.check`). A failure is ``LlmError(SCHEMA_MISMATCH)``
whose ``details`` keep the raw text and the validation message, which :func:`retry_messages`
feeds back to the model for one more try.

Nothing here imports pydantic or jsonschema at module import time, and a pydantic model or a
dataclass (with pydantic installed) never imports jsonschema.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import json
import math
import re
import sys
import types
import typing
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .completion import Completion
from .errors import ErrorCode, LlmError
from .json_schema_check import (
    MAX_SCHEMA_DEPTH,
    SCHEMA_KEYWORDS,
    SCHEMA_LIST_KEYWORDS,
    SCHEMA_MAP_KEYWORDS,
    check,
    pointer_target,
    ref_pointer,
    schema_problem,
    size_problem,
)
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
    "columns_of",
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
    #: The JSON Schema dict as the user gave it: what answers are validated against (``None``
    #: for a pydantic model or a dataclass).
    source: Any = field(default=None, compare=False, repr=False)

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
        if self.kind == "dataclass":
            try:
                found = _hint_problem(value, self.target, "", set())
            except RecursionError:
                found = "(root): the answer nests too deeply to check"
            if found is not None:
                raise self._mismatch(text, found)
            try:
                return self.target(**value)
            except TypeError as exc:
                raise self._mismatch(text, str(exc)) from None
        problems = check(value, self.source if self.source is not None else self.schema, path="")
        if problems:
            raise self._mismatch(text, problems[0])
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
    :data:`MAX_SCHEMA_DEPTH`, one that inlines to more than :data:`MAX_INLINED_NODES` values, a
    model pydantic cannot describe) is refused here, in one line, before anything is sent."""
    if isinstance(obj, ResponseSchema):
        return obj
    try:
        return _as_schema(obj)
    except LlmError:
        raise
    except RecursionError:
        raise _bad_schema(f"it nests deeper than {MAX_SCHEMA_DEPTH} levels") from None
    except Exception as exc:  # pydantic's schema generation errors, a type hint that fails
        raise _bad_schema(f"{type(exc).__name__}: {_first_line(exc)}") from None


#: A validation message is cut to this many characters (it is shown, and fed back on a retry).
MAX_PROBLEM_CHARS = 300

#: The most JSON values the schema sent to providers may have once its ``$ref`` s are inlined
#: (a large real schema has a few thousand; providers refuse far smaller ones).
MAX_INLINED_NODES = 20_000

#: Keywords any JSON Schema has at least one of (a dict with none is not a schema).
_SCHEMA_WORDS = frozenset(
    {"type", "enum", "const", "$ref", "allOf", "anyOf", "oneOf", "not", "if", "$defs"}
    | {"properties", "items", "prefixItems", "required", "definitions", "additionalProperties"}
)
#: Keywords that only annotate: a ``$ref``'s sibling of this kind may replace the target's.
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly"}
    | {"writeOnly"}
)
#: Keywords that read others of their group in the same schema object (``additionalProperties``
#: depends on ``properties`` beside it...): a ``$ref``'s target and siblings that both use one
#: group are combined with ``allOf``, not merged.
_ADJACENT_GROUPS = (
    frozenset({"properties", "patternProperties", "additionalProperties", "unevaluatedProperties"}),
    frozenset({"prefixItems", "items", "additionalItems", "unevaluatedItems"}),
    frozenset({"contains", "minContains", "maxContains"}),
    frozenset({"if", "then", "else"}),
)
#: ``$schema`` values whose ``$ref`` ignores its siblings (drafts 4, 6 and 7).
_LEGACY_DIALECTS = ("draft-04", "draft-06", "draft-07")


def _bad_schema(problem: str) -> LlmError:
    return LlmError(f"schema= cannot be used: {problem}", ErrorCode.INVALID_OPTIONS)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _as_schema(obj: Any) -> ResponseSchema:
    if isinstance(obj, type) and _is_pydantic_model(obj):
        raw = typing.cast(Any, obj).model_json_schema()
        return _make(obj.__name__, _closed(_inlined(raw)), "pydantic", obj)
    if isinstance(obj, type) and dataclasses.is_dataclass(obj):
        pydantic = _pydantic()
        if pydantic is not None:
            raw = pydantic.TypeAdapter(obj).json_schema()
            return _make(obj.__name__, _closed(_inlined(raw)), "dataclass", obj)
        raw = _dataclass_schema(obj, set())
        return _make(obj.__name__, _closed(_inlined(raw)), "dataclass", obj)
    if isinstance(obj, Mapping):
        source = _plain_json(obj)
        if not any(k in source for k in _SCHEMA_WORDS):
            raise LlmError(
                "schema= got a dict that is not a JSON Schema (it has no type): give e.g. "
                '{"type": "object", "properties": {...}}',
                ErrorCode.INVALID_OPTIONS,
            )
        problem = schema_problem(source)
        if problem is not None:
            raise _bad_schema(problem)
        name = str(source.get("title") or "answer")
        return _make(name, _inlined(source), "json", None, source=source)
    raise LlmError(
        f"schema= takes a pydantic model, a dataclass or a JSON Schema dict, not "
        f"{type(obj).__name__}",
        ErrorCode.INVALID_OPTIONS,
    )


def _plain_json(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON Schema dict as plain JSON (what would be sent), or a one-line
    refusal for what JSON cannot carry (a Python type as a value, a non-string key), or for a
    dict too big or too deep (checked first: a dict that shares its sub-dicts serialises to
    2^depth values)."""
    problem = size_problem(obj)
    if problem is not None:
        raise _bad_schema(problem)
    try:
        copied: dict[str, Any] = json.loads(json.dumps(obj, allow_nan=False))
    except RecursionError:
        raise _bad_schema(f"it nests deeper than {MAX_SCHEMA_DEPTH} levels") from None
    except (TypeError, ValueError) as exc:
        raise _bad_schema(f"it is not JSON ({_first_line(exc)})") from None
    return copied


def _make(
    name: str, schema: dict[str, Any], kind: SchemaKind, target: Any, source: Any = None
) -> ResponseSchema:
    clean = _NAME_RE.sub("_", name).strip("_")[:64] or "answer"
    return ResponseSchema(clean, schema, _is_strict(schema), kind, target, source)


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


# ------------------------------------------------------------------------------ inlining


def _resolve(root: Any, pointer: str) -> Any:
    try:
        return pointer_target(root, pointer)
    except LookupError:
        raise _bad_schema(f"the $ref {('#' + pointer)[:100]!r} points nowhere") from None


class _Inliner:
    """Builds the providers' copy of a schema (see the module docstring), counting values."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        dialect = root.get("$schema")
        self.legacy = isinstance(dialect, str) and any(d in dialect for d in _LEGACY_DIALECTS)
        self.nodes = 0
        self.recursive = False

    def count(self, n: int = 1) -> None:
        self.nodes += n
        if self.nodes > MAX_INLINED_NODES:
            raise _bad_schema(
                f"with its $refs inlined it has more than {MAX_INLINED_NODES:,} values (its "
                "definitions reuse each other too often: define the shape once, or flatten it)"
            )

    def data(self, value: Any) -> Any:
        """A keyword's value that is not a schema, copied (and counted)."""
        self.count(_size(value))
        return copy.deepcopy(value)

    def schema(self, node: Any, stack: tuple[str, ...], depth: int) -> Any:
        if depth > MAX_SCHEMA_DEPTH:
            raise _bad_schema(
                f"with its $refs inlined it nests deeper than {MAX_SCHEMA_DEPTH} levels"
            )
        self.count()
        if not isinstance(node, Mapping):
            return node
        if "$id" in node and depth > 0:
            raise _bad_schema("a $id below the root changes what its $refs mean; not supported")
        for word in ("$dynamicRef", "$recursiveRef", "$anchor", "$dynamicAnchor"):
            if word in node:
                raise _bad_schema(f"{word} is not supported (only #/... pointer $refs)")
        ref = node.get("$ref")
        if isinstance(ref, str):
            return self.reference(node, ref, stack, depth)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("$defs", "definitions") and isinstance(value, Mapping):
                continue  # inlined where used (kept at the root when a $ref recurses)
            if key in SCHEMA_KEYWORDS and isinstance(value, Mapping | bool):
                out[key] = self.schema(value, stack, depth + 1)
            elif key in SCHEMA_LIST_KEYWORDS and isinstance(value, list):
                out[key] = [self.sub(v, stack, depth + 2) for v in value]
            elif key in SCHEMA_MAP_KEYWORDS and isinstance(value, Mapping):
                out[key] = {name: self.sub(v, stack, depth + 2) for name, v in value.items()}
            else:
                out[key] = self.data(value)  # enum, default, required...: data, not schemas
        return out

    def sub(self, value: Any, stack: tuple[str, ...], depth: int) -> Any:
        """An item of a list or map of schemas (a non-schema item, such as a ``dependencies``
        list of names, is data)."""
        if isinstance(value, Mapping | bool):
            return self.schema(value, stack, depth)
        return self.data(value)

    def reference(
        self, node: Mapping[str, Any], ref: str, stack: tuple[str, ...], depth: int
    ) -> Any:
        pointer = ref_pointer(ref)
        if pointer is None:
            where = "is not local" if not ref.startswith("#") else "is not a #/... pointer"
            raise _bad_schema(f"the $ref {ref[:100]!r} {where} (only #/$defs/... refs)")
        target = _resolve(self.root, pointer)
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if self.legacy:
            siblings = {}
        rest = self.schema(siblings, stack, depth) if siblings else {}
        if pointer in stack:  # recursion: keep the reference (its definitions go to the root)
            if pointer != "" and not pointer.startswith(("/$defs/", "/definitions/")):
                raise _bad_schema(
                    f"the recursive $ref {ref[:100]!r} points outside $defs (not supported)"
                )
            self.recursive = True
            return {"$ref": ref, **rest} if isinstance(rest, dict) else {"$ref": ref}
        inlined = self.schema(target, (*stack, pointer), depth)
        return _with_siblings(inlined, rest)


def _with_siblings(target: Any, siblings: Any) -> Any:
    """The schema meaning both ``target`` and ``siblings`` (a ``$ref`` and its neighbours)."""
    if not siblings:
        return target
    if target is True:
        return siblings
    if target is False:
        return False
    if _mergeable(target, siblings):
        return {**target, **siblings}
    both = dict(siblings)
    both["allOf"] = [target, *both.get("allOf", [])]
    return both


def _mergeable(target: dict[str, Any], siblings: dict[str, Any]) -> bool:
    """Whether ``{**target, **siblings}`` means the same as both together: no keyword on both
    sides with different values (but annotations), and no group of keywords that read each other
    split between the two sides; ``unevaluated*`` and ``$ref`` never merge."""
    keys = target.keys() | siblings.keys()
    if any(k in keys for k in ("unevaluatedProperties", "unevaluatedItems")):
        return False
    for key in target.keys() & siblings.keys():
        if key not in _ANNOTATIONS and target[key] != siblings[key]:
            return False
    for group in _ADJACENT_GROUPS:
        mine, theirs = group & target.keys(), group & siblings.keys()
        if mine and theirs and any(target.get(k) != siblings.get(k) for k in mine | theirs):
            return False
    return True


def _size(value: Any) -> int:
    count = 0
    stack = [value]
    while stack:
        node = stack.pop()
        count += 1
        if isinstance(node, Mapping):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """The providers' copy of ``schema``: local ``$ref`` s inlined, meaning kept (see the module
    docstring); a recursive reference is kept as it is, with the root's definitions."""
    inliner = _Inliner(schema)
    out = inliner.schema(schema, ("",), 0)  # the root is being inlined: "#" recurses
    if not isinstance(out, dict):
        out = {"allOf": [out]}
    if inliner.recursive:
        for key in ("$defs", "definitions"):
            if isinstance(schema.get(key), Mapping):
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


#: Keywords OpenAI's strict mode refuses: a schema using one is sent without ``strict``.
_NOT_STRICT = frozenset(
    {"allOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "patternProperties"}
    | {"unevaluatedProperties", "unevaluatedItems", "prefixItems", "contains"}
)


def _is_strict(schema: Any) -> bool:
    """OpenAI strict mode's rules: every object's properties all required, no other keys, and
    none of the keywords it refuses (walked without recursion: the schema is the user's)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, Mapping):
            continue
        if _NOT_STRICT & node.keys():
            return False
        if node.get("type") == "object" or "properties" in node:
            props = node.get("properties") or {}
            if node.get("additionalProperties") is not False:
                return False
            if set(props) != set(node.get("required") or []):
                return False
        for key in ("properties", "$defs"):
            if isinstance(node.get(key), Mapping):
                stack.extend(node[key].values())
        if "items" in node:
            stack.append(node["items"])
        for key in ("anyOf", "oneOf", "allOf"):
            stack.extend(node.get(key) or [])
    return True


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


# A dataclass's answer without pydantic is checked against its type hints, the same ones
# _type_schema describes to the provider: a dataclass is Python types, not a JSON Schema dict,
# so it never needs (or imports) the JSON Schema validator.
def _hint_problem(value: Any, tp: Any, path: str, seen: set[type]) -> str | None:
    """Why the JSON ``value`` does not fit type hint ``tp`` (``None``: it fits)."""
    if tp is Any:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        branches = [_hint_problem(value, a, path, seen) for a in args]
        if None in branches:
            return None
        return f"{path or '(root)'}: matches none of the allowed forms ({branches[0]})"
    if origin is Literal:
        ok = any(value == a and type(value) is type(a) for a in args)
        return None if ok else f"{path or '(root)'}: {_shown(value)} is not one of {list(args)!r}"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        allowed = [m.value for m in tp]
        return (
            None
            if value in allowed
            else f"{path or '(root)'}: {_shown(value)} is not one of {allowed!r}"
        )
    if origin in (list, tuple, set, frozenset, Sequence):
        if not isinstance(value, list):
            return f"{path or '(root)'}: expected array, got {_shown(value)}"
        for i, item in enumerate(value if args else ()):
            problem = _hint_problem(item, args[0], _child(path, i), seen)
            if problem is not None:
                return problem
        return None
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        return (
            None
            if isinstance(value, dict)
            else f"{path or '(root)'}: expected object, got {_shown(value)}"
        )
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_problem(value, tp, path, seen)
    checks: dict[Any, tuple[str, Any]] = {
        str: ("string", lambda v: isinstance(v, str)),
        bool: ("boolean", lambda v: isinstance(v, bool)),
        int: ("integer", lambda v: _number(v) and float(v).is_integer()),
        float: ("number", _number),
        type(None): ("null", lambda v: v is None),
    }
    if tp in checks:
        name, fits = checks[tp]
        return None if fits(value) else f"{path or '(root)'}: expected {name}, got {_shown(value)}"
    return None  # a hint _type_schema cannot describe is refused when the schema is made


def _dataclass_problem(value: Any, cls: type, path: str, seen: set[type]) -> str | None:
    if not isinstance(value, dict):
        return f"{path or '(root)'}: expected object, got {_shown(value)}"
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in value:
        if name not in fields:
            return f"{path or '(root)'}: unexpected property {name!r} (allowed: {', '.join(map(repr, fields))})"
    for name, f in fields.items():
        if name not in value:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                return f"{path or '(root)'}: missing required {name!r}"
            continue
        found = _hint_problem(value[name], hints.get(name, Any), _child(path, name), seen | {cls})
        if found is not None:
            return found
    return None


def _child(path: str, key: Any) -> str:
    """Where a field or an item is, written as jsonschema's messages here write it (``a.0.b``)."""
    return f"{path}.{key}" if path else str(key)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


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


# ------------------------------------------------------------------------------ streams


#: The finishes whose answer is parsed: ``stop``, and ``other``, a finish the vocabulary cannot
#: classify (a provider's ``"complete"``, ``"end"``): nothing says the answer was cut (that
#: would be ``max-tokens``, ``tool-calls``, ``error`` or ``aborted``), so it is taken as whole
#: and validated; an answer that does not validate is ``SCHEMA_MISMATCH``, as after ``stop``.
#: Before, such an answer was returned unparsed with no error, so a typed ``map`` gave a row of
#: empty columns.
PARSED_FINISHES = frozenset({"stop", "other"})


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
            elif isinstance(event, Finish) and event.reason.kind in PARSED_FINISHES:
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


def columns_of(value: Any, schema: ResponseSchema) -> dict[str, Any] | None:
    """The top-level fields of a parsed answer keyed by the schema's property names (the
    columns of a typed ``map``). A pydantic model's properties are its aliases
    (``Field(alias=)``, ``alias_generator``, a validation alias), while ``model_dump`` keys by
    field name and leaves out ``exclude=True`` fields: each property is mapped back to its
    field, so every column gets its value."""
    if schema.kind != "pydantic" or not hasattr(value, "model_dump"):
        return fields_of(value)
    names = _field_names(typing.cast(Any, type(value)))
    dumped = value.model_dump(mode="json")
    from pydantic_core import to_jsonable_python

    return {
        prop: dumped[name] if name in dumped else to_jsonable_python(getattr(value, name, None))
        for prop, name in names.items()
    }


@functools.lru_cache(maxsize=256)
def _field_names(model: type) -> dict[str, str]:
    """A pydantic model's schema property names (aliases) -> its field names: the two
    schemas pydantic writes, by alias and by name, list the fields in the same order."""
    cls = typing.cast(Any, model)
    by_alias = list(cls.model_json_schema(by_alias=True).get("properties", {}))
    by_name = list(cls.model_json_schema(by_alias=False).get("properties", {}))
    return dict(zip(by_alias, by_name, strict=False))


def parse_into(completion: Completion, schema: ResponseSchema | None) -> LlmError | None:
    """Validate a finished completion's text against ``schema``: set ``completion.parsed``, or
    turn its ``stop`` (or ``other``) finish into ``error: SCHEMA_MISMATCH`` and return that
    error. A completion cut short (an error, max tokens, tool calls, aborted) is left alone: see
    :data:`PARSED_FINISHES`."""
    if schema is None or completion.finish is None:
        return None
    if completion.finish.kind not in PARSED_FINISHES:
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
