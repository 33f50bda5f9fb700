"""The mock models' answer to a request with a JSON Schema: a deterministic valid instance.

:func:`request_schema` finds the schema in an OpenAI-like request (``response_format``
``json_schema``, which the server also makes from Ollama's ``format`` and Anthropic's
``output_config.format``); :func:`instance` builds a value from it. The same prompt and schema
always give the same answer; different prompts give different enum choices, numbers and
booleans (chosen by a hash of the prompt and the field's path), so a table of answers is not
one repeated row. Local ``$ref`` s are followed; a recursive schema is followed a few levels,
then left by ``null`` or an empty array where the schema allows. Strings are the prompt's text (cut to ``maxLength``), or a fixed example for
``format: date / date-time / email / uri / uuid``. ``pattern`` is not honoured.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from ...core.json_schema_check import pointer_target, ref_pointer

__all__ = ["instance", "request_schema"]

_FORMATS = {
    "date": "2024-01-01",
    "date-time": "2024-01-01T00:00:00Z",
    "time": "00:00:00",
    "email": "user@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


def request_schema(request: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON Schema the request asks the answer to follow, if any."""
    fmt = request.get("response_format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        if isinstance(spec, Mapping) and isinstance(spec.get("schema"), Mapping):
            return dict(spec["schema"])
    return None


def _pick(seed: str, path: str, n: int) -> int:
    digest = hashlib.sha1(f"{seed}\x00{path}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % max(n, 1)


#: How deep a recursive schema (a ``$ref`` to itself) is followed before the instance takes the
#: shortest way out: ``null`` where allowed, no more array items than ``minItems``.
RECURSION_DEPTH = 2
#: Past this depth nothing more is built (a schema with no finite instance gets ``{}``).
MAX_DEPTH = 32
#: The most array items and string characters the mock writes, whatever ``minItems`` /
#: ``minLength`` ask: a schema asking for a billion must not make the mock build them (the
#: answer then fails validation, honestly).
MAX_ITEMS = 100
MAX_CHARS = 10_000
#: The most values one answer is built of: a schema whose properties each recurse
#: (``{"properties": {"a": {"$ref": "#"}, "b": {"$ref": "#"}}}``) would give 2^MAX_DEPTH.
MAX_VALUES = 10_000


def _resolve(ref: str, root: Mapping[str, Any]) -> Any:
    """A local ``$ref`` (``#`` or ``#/a/b``) in ``root``; ``None`` when it points nowhere."""
    pointer = ref_pointer(ref)
    if pointer is None:
        return None
    try:
        return pointer_target(root, pointer)
    except LookupError:
        return None


def instance(
    schema: Any,
    text: str,
    path: str = "$",
    root: Mapping[str, Any] | None = None,
    refs: int = 0,
    budget: list[int] | None = None,
) -> Any:
    """A value valid against ``schema`` (see the module docstring), seeded by ``text``.
    ``root`` is the whole schema (for ``$ref``), ``refs`` how many refs led here, ``budget``
    the values left to build (:data:`MAX_VALUES` in all)."""
    if budget is None:
        budget = [MAX_VALUES]
    budget[0] -= 1
    if not isinstance(schema, Mapping):
        return text
    if root is None:
        root = schema
    if budget[0] < 0 or path.count(".") + path.count("[") > MAX_DEPTH:
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and refs <= MAX_DEPTH:  # a $ref loop is left after MAX_DEPTH hops
        target = _resolve(ref, root)
        if isinstance(target, Mapping):
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return instance({**target, **rest}, text, path, root, refs + 1, budget)
    deep = refs > RECURSION_DEPTH
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        values = list(schema["enum"])
        return values[_pick(text, path, len(values))]
    for key in ("anyOf", "oneOf"):
        options = [o for o in schema.get(key) or [] if isinstance(o, Mapping)]
        if options:
            nulls = [o for o in options if o.get("type") == "null"]
            if deep and nulls:
                return None
            real = [o for o in options if o.get("type") != "null"] or options
            return instance(real[0], text, path, root, refs, budget)
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            if isinstance(part, Mapping):
                merged.update(part)
        return instance(merged, text, path, root, refs, budget)
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = "null" if deep and "null" in typ else next((t for t in typ if t != "null"), "null")
    if typ is None:
        typ = "object" if "properties" in schema else "string"
    if typ == "object":
        props = schema.get("properties") or {}
        names = list(props) + [r for r in schema.get("required") or [] if r not in props]
        return {
            n: instance(props.get(n, {}), text, f"{path}.{n}", root, refs, budget) for n in names
        }
    if typ == "array":
        low = int(schema.get("minItems", 1) or 0)
        high = int(schema.get("maxItems", max(low, 1)))
        count = int(schema.get("minItems", 0) or 0) if deep else max(low, min(1, high))
        count = min(count, MAX_ITEMS)
        items = schema.get("items", {})
        return [instance(items, text, f"{path}[{i}]", root, refs, budget) for i in range(count)]
    if typ == "boolean":
        return _pick(text, path, 2) == 1
    if typ == "integer":
        low = int(schema.get("minimum", 0))
        high = int(schema.get("maximum", low + 9))
        return low + _pick(text, path, high - low + 1)
    if typ == "number":
        start = float(schema.get("minimum", 0.0))
        end = float(schema.get("maximum", start + 1.0))
        return round(start + (end - start) * _pick(text, path, 101) / 100, 2)
    if typ == "null":
        return None
    return _string(schema, text)


def _string(schema: Mapping[str, Any], text: str) -> str:
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS:
        return _FORMATS[fmt]
    value = " ".join(text.split()) or "text"
    limit = schema.get("maxLength")
    if isinstance(limit, int) and limit >= 0:
        value = value[:limit]
    least = schema.get("minLength")
    if isinstance(least, int) and len(value) < least:
        value = value.ljust(min(least, MAX_CHARS), ".")
    return value
