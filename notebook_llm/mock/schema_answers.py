"""The mock models' answer to a request with a JSON Schema: a deterministic valid instance.

:func:`request_schema` finds the schema in an OpenAI-like request (``response_format``
``json_schema``, which the server also makes from Ollama's ``format`` and Anthropic's
``output_config.format``); :func:`instance` builds a value from it. The same prompt and schema
always give the same answer; different prompts give different enum choices, numbers and
booleans (chosen by a hash of the prompt and the field's path), so a table of answers is not
one repeated row. Strings are the prompt's text (cut to ``maxLength``), or a fixed example for
``format: date / date-time / email / uri / uuid``. ``pattern`` is not honoured.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

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


def instance(schema: Any, text: str, path: str = "$") -> Any:
    """A value valid against ``schema`` (see the module docstring), seeded by ``text``."""
    if not isinstance(schema, Mapping):
        return text
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        values = list(schema["enum"])
        return values[_pick(text, path, len(values))]
    for key in ("anyOf", "oneOf"):
        options = [o for o in schema.get(key) or [] if isinstance(o, Mapping)]
        if options:
            real = [o for o in options if o.get("type") != "null"] or options
            return instance(real[0], text, path)
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            if isinstance(part, Mapping):
                merged.update(part)
        return instance(merged, text, path)
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), "null")
    if typ is None:
        typ = "object" if "properties" in schema else "string"
    if typ == "object":
        props = schema.get("properties") or {}
        names = list(props) + [r for r in schema.get("required") or [] if r not in props]
        return {n: instance(props.get(n, {}), text, f"{path}.{n}") for n in names}
    if typ == "array":
        low = int(schema.get("minItems", 1) or 0)
        high = int(schema.get("maxItems", max(low, 1)))
        count = max(low, min(1, high))
        return [instance(schema.get("items", {}), text, f"{path}[{i}]") for i in range(count)]
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
        value = value.ljust(least, ".")
    return value
