"""JSON Schema from Python type hints, and JSON values back into the hinted Python types.

Supported hints: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``, ``list[X]`` (and
``Sequence``, ``set``, ``frozenset``, ``tuple[X, ...]``, fixed ``tuple[X, Y]``), ``dict`` /
``dict[str, X]`` (and ``Mapping``), ``Literal[...]``, ``Optional[X]`` / ``X | None``, other
unions, ``Enum`` subclasses, dataclasses, ``TypedDict`` classes and ``Annotated[X, "text"]``
(the first string in the metadata becomes the description). Anything else raises
``TypeError`` when the tool is created, so a bad tool fails where it is defined rather than in
the middle of a conversation.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import inspect
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from .docstrings import parse_docstring

__all__ = ["coerce", "schema_for_type"]

JsonSchema = dict[str, Any]

_PRIMITIVES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ARRAYS = {
    list,
    set,
    frozenset,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Iterable,
    collections.abc.Collection,
    collections.abc.Set,
    collections.abc.MutableSet,
}
_OBJECTS = {dict, collections.abc.Mapping, collections.abc.MutableMapping}


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _is_union(origin: Any) -> bool:
    return origin is Union or origin is types.UnionType


def _json_type(value: Any) -> str | None:
    if value is None:
        return "null"
    for py, name in (
        (bool, "boolean"),
        (int, "integer"),
        (float, "number"),
        (str, "string"),
    ):
        if isinstance(value, py):
            return name
    return None


def _enum_schema(values: list[Any]) -> JsonSchema:
    kinds = {_json_type(v) for v in values}
    out: JsonSchema = {}
    if len(kinds) == 1 and None not in kinds:
        out["type"] = kinds.pop()
    out["enum"] = values
    return out


def _hints(tp: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(tp, include_extras=True)
    except Exception as exc:  # unresolvable forward references
        raise TypeError(f"cannot resolve the type hints of {tp!r}: {exc}") from None


def _class_doc(cls: type) -> tuple[str, dict[str, str]]:
    raw = cls.__dict__.get("__doc__")  # not inherited: a TypedDict would get dict's docstring
    doc = inspect.cleandoc(raw) if isinstance(raw, str) else ""
    if dataclasses.is_dataclass(cls) and doc.startswith(cls.__name__ + "("):
        doc = ""  # the signature dataclasses write when there is no docstring
    parsed = parse_docstring(doc)
    return parsed.description, parsed.params


def schema_for_type(tp: Any, where: str = "value") -> JsonSchema:
    """The JSON Schema of type hint ``tp``; ``where`` names it in error messages."""
    if tp is Any or tp is object or tp is inspect.Parameter.empty:
        return {}
    if tp is None or tp is type(None):
        return {"type": "null"}
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        inner = schema_for_type(args[0], where)
        text = next((m for m in args[1:] if isinstance(m, str)), None)
        if text:
            inner = {**inner, "description": text}
        return inner
    if origin is Literal:
        return _enum_schema([a.value if isinstance(a, enum.Enum) else a for a in args])
    if _is_union(origin):
        non_null = [a for a in args if a is not type(None)]
        nullable = len(non_null) < len(args)
        parts = [schema_for_type(a, where) for a in non_null]
        if nullable and len(parts) == 1:
            only = parts[0]
            if isinstance(only.get("type"), str) and "enum" not in only:
                return {**only, "type": [only["type"], "null"]}
            return {"anyOf": [only, {"type": "null"}]}
        if nullable:
            parts.append({"type": "null"})
        return {"anyOf": parts}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_schema([m.value for m in tp])
    if tp in _PRIMITIVES:
        return {"type": _PRIMITIVES[tp]}
    if tp in _ARRAYS or tp is tuple:
        return {"type": "array"}
    if tp in _OBJECTS:
        return {"type": "object"}
    if origin in _ARRAYS:
        return {"type": "array", "items": schema_for_type(args[0], where) if args else {}}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_for_type(args[0], where)}
        if args == ((),) or not args:
            return {"type": "array", "maxItems": 0}
        return {
            "type": "array",
            "prefixItems": [schema_for_type(a, where) for a in args],
            "minItems": len(args),
            "maxItems": len(args),
        }
    if origin in _OBJECTS:
        out: JsonSchema = {"type": "object"}
        if len(args) == 2:
            if args[0] not in (str, Any):
                raise TypeError(f"{where}: JSON object keys are strings, not {args[0]!r}")
            if args[1] is not Any:
                out["additionalProperties"] = schema_for_type(args[1], where)
        return out
    if _is_typeddict(tp) or (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
        return _class_schema(tp, where)
    raise TypeError(
        f"{where}: unsupported type hint {tp!r} for a tool parameter; use str, int, float, bool, "
        "list, dict, Literal, Optional, an Enum, a dataclass or a TypedDict"
    )


def _class_schema(cls: type, where: str) -> JsonSchema:
    hints = _hints(cls)
    description, field_docs = _class_doc(cls)
    props: dict[str, JsonSchema] = {}
    required: list[str] = []
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            props[f.name] = schema_for_type(hints.get(f.name, Any), f"{where}.{f.name}")
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
    else:
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        for key, hint in hints.items():
            props[key] = schema_for_type(hint, f"{where}.{key}")
            if key in required_keys:
                required.append(key)
    for key, text in field_docs.items():
        if key in props and text and "description" not in props[key]:
            props[key] = {**props[key], "description": text}
    out: JsonSchema = {"type": "object"}
    if description:
        out["description"] = description
    out["properties"] = props
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


def coerce(value: Any, tp: Any) -> Any:
    """Turn a JSON value (already validated against ``schema_for_type(tp)``) into ``tp``.

    Enums become members, dataclasses instances, ``set``/``tuple`` hints their type, integral
    floats ints for ``int``, recursively through containers; everything else is left as is.
    """
    if tp is Any or tp is inspect.Parameter.empty or value is None:
        return value
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        return coerce(value, args[0])
    if origin is Literal:
        for a in args:
            if isinstance(a, enum.Enum) and a.value == value:
                return a
        return value
    if _is_union(origin):
        for a in args:
            if a is not type(None) and _matches(value, a):
                return coerce(value, a)
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if tp is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, list):
        if tp in (set, frozenset, tuple):
            return tp(value)
        if origin in _ARRAYS:
            items = [coerce(v, args[0]) for v in value] if args else value
            return (
                set(items)
                if origin in (set, collections.abc.Set, collections.abc.MutableSet)
                else (frozenset(items) if origin is frozenset else items)
            )
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(coerce(v, args[0]) for v in value)
            return tuple(coerce(v, a) for v, a in zip(value, args, strict=False))
    if isinstance(value, dict):
        if origin in _OBJECTS and len(args) == 2:
            return {k: coerce(v, args[1]) for k, v in value.items()}
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            hints = _hints(tp)
            return tp(**{k: coerce(v, hints.get(k, Any)) for k, v in value.items()})
        if _is_typeddict(tp):
            hints = _hints(tp)
            return {k: coerce(v, hints.get(k, Any)) for k, v in value.items()}
    return value


def _matches(value: Any, tp: Any) -> bool:
    """Whether a JSON value fits hint ``tp`` (used to pick the branch of a union)."""
    from ...core.json_schema_check import check

    try:
        return not check(value, schema_for_type(tp))
    except TypeError:
        return False
