"""The package's one small JSON Schema validator: a tool call's arguments, and a typed answer
when ``jsonschema`` is not installed.

Why not always the ``jsonschema`` package: the core dependencies are deliberately few (httpx,
lupa, platformdirs); ``jsonschema`` (the ``schema`` extra) brings ``attrs``, ``referencing`` and
the compiled ``rpds-py``. The schemas checked here are almost always the ones the tool decorator
generates (:mod:`notebook_llm.api.tool_calling.type_schema`) or a pydantic model's, which use a
small subset of the language; where ``jsonschema`` is installed, an answer's schema is checked
with it (:mod:`notebook_llm.core.response_schema`). Supported keywords: ``type`` (string or list),
``enum``, ``const``, ``properties``, ``required``, ``additionalProperties`` (bool or schema),
``items``, ``prefixItems``, ``minItems``, ``maxItems``, ``minimum``, ``maximum``,
``exclusiveMinimum``, ``exclusiveMaximum``, ``minLength``, ``maxLength``, ``anyOf``, ``oneOf``
(checked like ``anyOf``), ``allOf``. Other keywords (``$ref``, ``pattern``, ``format``...) are
ignored, i.e. accepted, so a hand-written schema never rejects valid arguments because of a
keyword this validator does not know.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["check"]

_MAX_ERRORS = 5


def _type_ok(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if name == "array":
        return isinstance(value, list)
    if name == "object":
        return isinstance(value, dict)
    return True  # unknown type names are not ours to reject


def _describe(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def check(value: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Problems of ``value`` against ``schema``, as ``"<path>: <problem>"`` lines (``[]``: valid).

    At most a handful of problems are reported; the first ones are the useful ones.
    """
    errors: list[str] = []
    _check(value, schema, path, errors)
    return errors[:_MAX_ERRORS]


def _check(value: Any, schema: Any, path: str, errors: list[str]) -> None:
    if len(errors) >= _MAX_ERRORS or not isinstance(schema, Mapping):
        return
    typ = schema.get("type")
    if typ is not None:
        names = [typ] if isinstance(typ, str) else list(typ)
        if not any(_type_ok(value, n) for n in names):
            errors.append(
                f"{path}: expected {' or '.join(names)}, got {_kind(value)} {_describe(value)}"
            )
            return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(_describe(v) for v in schema["enum"])
        errors.append(f"{path}: {_describe(value)} is not one of {allowed}")
        return
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: expected {_describe(schema['const'])}, got {_describe(value)}")
        return
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            branch_errors = [
                check(value, o, path) if isinstance(o, Mapping) else [] for o in options
            ]
            if all(branch_errors):
                best = min(branch_errors, key=len)
                errors.append(f"{path}: matches none of the allowed forms ({best[0]})")
                return
    for sub in schema.get("allOf") or []:
        _check(value, sub, path, errors)
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        _check_number(value, schema, path, errors)
    elif isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{path}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']} characters")
    elif isinstance(value, list):
        _check_array(value, schema, path, errors)
    elif isinstance(value, dict):
        _check_object(value, schema, path, errors)


def _check_number(value: float, schema: Mapping[str, Any], path: str, errors: list[str]) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{path}: {value} is less than the minimum of {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{path}: {value} is greater than the maximum of {schema['maximum']}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        errors.append(f"{path}: {value} must be more than {schema['exclusiveMinimum']}")
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        errors.append(f"{path}: {value} must be less than {schema['exclusiveMaximum']}")


def _check_array(value: list[Any], schema: Mapping[str, Any], path: str, errors: list[str]) -> None:
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(f"{path}: has {len(value)} items, at least {schema['minItems']} needed")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(f"{path}: has {len(value)} items, at most {schema['maxItems']} allowed")
    prefix = schema.get("prefixItems") or []
    for i, sub in enumerate(prefix[: len(value)]):
        _check(value[i], sub, f"{path}[{i}]", errors)
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i in range(len(prefix), len(value)):
            _check(value[i], items, f"{path}[{i}]", errors)


def _check_object(
    value: dict[str, Any], schema: Mapping[str, Any], path: str, errors: list[str]
) -> None:
    props = schema.get("properties") or {}
    missing = [r for r in schema.get("required") or [] if r not in value]
    if missing:
        errors.append(f"{path}: missing required {', '.join(repr(m) for m in missing)}")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        where = f"{path}.{key}"
        if key in props:
            _check(item, props[key], where, errors)
        elif extra is False:
            allowed = ", ".join(repr(p) for p in props) or "none"
            errors.append(f"{path}: unexpected property {key!r} (allowed: {allowed})")
        elif isinstance(extra, Mapping):
            _check(item, extra, where, errors)
