"""Fault descriptions for the mock server and the ``X-Mock-Fault`` header syntax."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import bodies

__all__ = [
    "FAULTS",
    "FAULT_HEADER",
    "KEEPALIVE",
    "STALL",
    "TRICKLE",
    "Fault",
    "faulted_stream",
    "parse_fault_header",
]

FAULT_HEADER = "X-Mock-Fault"

# name -> (description, default params)
FAULTS: dict[str, tuple[str, dict[str, float]]] = {
    "disconnect": (
        "Send `after` content chunks, then close the socket abruptly (no end marker).",
        {"after": 2},
    ),
    "stall": (
        "Send `after` content chunks, then sleep `seconds` without closing, then finish.",
        {"after": 2, "seconds": 30.0},
    ),
    "malformed": (
        "Insert a data line with invalid JSON after `after` content chunks.",
        {"after": 2},
    ),
    "rate_limit": (
        "HTTP 429 with `Retry-After: <seconds>` and a rate_limit_error body.",
        {"seconds": 1},
    ),
    "server_error": (
        "HTTP `status` (default 500) with a provider-style error body.",
        {"status": 500},
    ),
    "unauthorized": ("HTTP 401 with a provider-style authentication error body.", {}),
    "no_end": ("Clean HTTP end but no [DONE]/message_stop/done:true and no finish reason.", {}),
    "drip": (
        "One character per chunk with `delay` seconds between chunks; body correct.",
        {"delay": 0.02},
    ),
    "oversized_line": (
        "One valid data line of `size` bytes after `after` content chunks.",
        {"after": 1, "size": 20 * 1024 * 1024},
    ),
    "wrong_format": ("HTTP 200, text/event-stream content type, but an HTML body.", {}),
    "error_event": (
        "After `after` content chunks, an in-stream error event; then the stream ends.",
        {"after": 2},
    ),
    "keepalive": (
        "After `after` content chunks, a `: keepalive` comment (a blank line for NDJSON) every "
        "`delay` seconds for `seconds`, then the rest: alive, but no event.",
        {"after": 2, "delay": 0.5, "seconds": 30.0},
    ),
    "trickle": (
        "After `after` content chunks, one space every `delay` seconds for `seconds` (a line "
        "that never completes an event), then a line break and the rest.",
        {"after": 2, "delay": 0.5, "seconds": 30.0},
    ),
}


@dataclass(frozen=True)
class Fault:
    """A fault to apply to one request: ``name`` (a key of :data:`FAULTS`) and its params."""

    name: str
    params: dict[str, float | str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in FAULTS:
            raise ValueError(f"unknown fault {self.name!r}; known: {', '.join(FAULTS)}")

    def num(self, key: str) -> float:
        """Numeric parameter ``key`` (falling back to the fault's default)."""
        value = self.params.get(key, FAULTS[self.name][1].get(key, 0))
        return float(value)


def _value(text: str) -> float | str:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def parse_fault_header(value: str) -> Fault:
    """Parse ``"name"`` or ``"name; key=value; key=value"`` (e.g. ``"stall; seconds=2"``)."""
    name, *rest = [s.strip() for s in value.split(";")]
    params: dict[str, float | str] = {}
    for item in rest:
        if "=" in item:
            key, _, raw = item.partition("=")
            params[key.strip()] = _value(raw.strip())
    return Fault(name.lower(), params)


#: In :func:`faulted_stream`'s output: sleep the fault's ``seconds`` here (then go on).
STALL = object()
#: In :func:`faulted_stream`'s output: send comments here for the fault's ``seconds``.
KEEPALIVE = object()
#: In :func:`faulted_stream`'s output: send single spaces here for the fault's ``seconds``.
TRICKLE = object()


def faulted_stream(
    fmt: bodies.Format, frames: list[bodies.Frame], fault: Fault | None, *, model: str, rid: str
) -> list[bytes | object]:
    """The pieces of a streamed body under ``fault``: its frames' bytes, with frames inserted,
    dropped or cut where the fault says, and :data:`STALL` where the server is to pause."""
    name = fault.name if fault else ""
    n_start = sum(1 for f in frames if f.kind == "start")
    n_body = n_start + sum(1 for f in frames if f.kind == "content")
    pos = min(n_start + int(fault.num("after")), n_body) if fault and name != "drip" else 0
    pos = max(pos, 1) if name in ("disconnect", "stall", "keepalive", "trickle") else pos
    out: list[bytes | object] = [f.data for f in frames]
    if name == "no_end":
        out = [f.data for f in frames if f.kind != "end"]
    elif name == "malformed":
        out.insert(pos, bodies.malformed_frame(fmt))
    elif name == "error_event":
        out = [*out[:pos], bodies.error_frame(fmt)]
    elif name == "oversized_line" and fault:
        out.insert(pos, bodies.oversized_frame(fmt, int(fault.num("size")), model=model, rid=rid))
    elif name == "disconnect":
        out = out[:pos]
    elif name == "stall":
        out.insert(pos, STALL)
    elif name == "keepalive":
        out.insert(pos, KEEPALIVE)
    elif name == "trickle":
        out.insert(pos, TRICKLE)
    return out
