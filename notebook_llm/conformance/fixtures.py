"""Finding and reading the recorded bodies the kit replays, and the results expected of them.

A body file (``.sse``, ``.ndjson``, ``.json``; other names are sniffed) becomes a
:class:`Fixture`: its bytes, framing, HTTP status and content type. The status comes from a
``<file>.meta.json`` sidecar (``{"status": 429, "content_type": ..., "headers": {...}}``) or from
the name (``error_401_*``), else 200. A ``%llm record`` file (JSON lines with a header) gives one
fixture per recorded response. Expectations come from a table file or a ``<stem>.expected.json``
sidecar. Nothing here runs an adapter: this module only reads files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..core.errors import ErrorCode, LlmError

__all__ = [
    "CONTENT_TYPES",
    "EXPECTED_KEYS",
    "Fixture",
    "Framing",
    "expected_for",
    "find_fixtures",
    "fixtures_from_recording",
    "is_recording",
    "load_expected",
    "load_fixture",
    "load_fixtures",
]

Framing = Literal["sse", "ndjson", "json"]
CONTENT_TYPES: dict[str, str] = {
    "sse": "text/event-stream; charset=utf-8",
    "ndjson": "application/x-ndjson",
    "json": "application/json",
}
EXPECTED_KEYS = frozenset({"text", "reasoning", "tool_calls", "usage", "finish", "error_code"})
_STATUS_IN_NAME = re.compile(r"(?:^|[_.-])(?:error|http|status)[_-]?(\d{3})(?=$|[_.-])")
_SIDECARS = (".meta.json", ".expected.json")


@dataclass
class Fixture:
    """A recorded response body and how to serve it."""

    path: Path
    body: bytes
    framing: Framing
    status: int = 200
    content_type: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    #: For a recorded exchange: the request's URL and JSON body (to tell whose exchange it is).
    url: str = ""
    request: Any = None

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def whole_body(self) -> bool:
        """A successful non-stream body: it goes through ``transform_response``, not the stream."""
        return self.framing == "json" and self.status < 400


def _sniff(path: Path, body: bytes) -> Framing:
    suffix = path.suffix.lower()
    if suffix in (".sse", ".ndjson", ".json"):
        return "ndjson" if suffix == ".ndjson" else ("sse" if suffix == ".sse" else "json")
    head = body.lstrip()[:200]
    if head.startswith((b"data:", b"event:", b":", b"id:")):
        return "sse"
    lines = [ln for ln in body.splitlines() if ln.strip()]
    if len(lines) > 1 and all(ln.lstrip().startswith(b"{") for ln in lines):
        try:
            [json.loads(ln) for ln in lines]
            return "ndjson"
        except (ValueError, RecursionError):
            pass
    return "json"


def load_fixture(path: str | Path) -> Fixture:
    """Read a body file and work out its framing, status and content type."""
    p = Path(path)
    try:
        body = p.read_bytes()
    except OSError as exc:
        raise LlmError(
            f"cannot read fixture {p}: {exc.strerror}", ErrorCode.INVALID_OPTIONS
        ) from None
    framing = _sniff(p, body)
    status, ctype, headers = 200, CONTENT_TYPES[framing], {}
    m = _STATUS_IN_NAME.search(p.stem.lower())
    if m:
        status = int(m.group(1))
    meta_path = p.with_name(p.name + ".meta.json")
    if not meta_path.exists():
        meta_path = p.with_suffix(".meta.json")
    if meta_path.exists() and meta_path != p:
        meta = read_json(meta_path, "fixture metadata")
        if not isinstance(meta, dict):
            raise _bad(meta_path, 'must be a JSON object such as {"status": 429}')
        status = meta.get("status", status)
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            raise _bad(meta_path, f"status must be an HTTP status (100-599), not {status!r}")
        ctype = meta.get("content_type", ctype)
        if not isinstance(ctype, str):
            raise _bad(meta_path, "content_type must be a string")
        raw_headers = meta.get("headers") or {}
        if not isinstance(raw_headers, dict) or not all(
            isinstance(v, str) for v in raw_headers.values()
        ):
            raise _bad(meta_path, "headers must be an object of strings")
        headers = {str(k): v for k, v in raw_headers.items()}
    return Fixture(p, body, framing, status, ctype, headers)


def read_json(path: Path, what: str) -> Any:
    """The JSON in ``path``; a file that cannot be read or parsed is one ``LlmError`` line
    (never a bare ``ValueError``, ``UnicodeDecodeError`` or ``RecursionError``)."""
    try:
        return json.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise _bad(path, f"({what}) cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise _bad(path, f"({what}) is not UTF-8 text") from None
    except RecursionError:
        raise _bad(path, f"({what}) is nested too deeply to read") from None
    except ValueError as exc:
        raise _bad(path, f"({what}) is not valid JSON ({exc})") from None
    except MemoryError:
        raise _bad(path, f"({what}) is too large to read") from None


def _bad(path: Path, problem: str) -> LlmError:
    return LlmError(f"{path}: {problem}", ErrorCode.INVALID_OPTIONS)


def is_recording(path: Path) -> bool:
    """Whether ``path`` is a ``%llm record`` file (JSON lines whose first line is its header)."""
    if path.suffix.lower() != ".jsonl":
        return False
    try:
        with path.open(encoding="utf-8") as fh:
            first = json.loads(fh.readline(1 << 20) or "null")
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(first, dict) and "notebook_llm_recording" in first


def fixtures_from_recording(path: str | Path) -> list[Fixture]:
    """Each response recorded by ``%llm record`` (e.g. a session against the mock server) as a
    fixture named ``FILE#N``, served with its recorded status and content type."""
    from ..wire.cassette import load_exchanges

    p = Path(path)
    out = []
    for n, exchange in enumerate(load_exchanges(p), 1):
        headers = {k.lower(): v for k, v in exchange.headers.items()}
        ctype = headers.get("content-type", "")
        framing: Framing = (
            "ndjson" if "ndjson" in ctype else "sse" if "event-stream" in ctype else "json"
        )
        out.append(
            Fixture(
                p.with_name(f"{p.name}#{n}"),
                exchange.body,
                framing,
                exchange.status,
                ctype or CONTENT_TYPES[framing],
                url=exchange.url,
                request=exchange.request,
            )
        )
    return out


def load_fixtures(path: str | Path) -> list[Fixture]:
    """The fixtures in one file: a body file gives one; a recording gives one per response."""
    p = Path(path)
    return fixtures_from_recording(p) if is_recording(p) else [load_fixture(p)]


def find_fixtures(paths: Iterable[str | Path]) -> list[Path]:
    """Files named by ``paths``; a folder gives its body files (not recursive, sorted)."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw).expanduser()
        if p.is_dir():
            out.extend(
                f
                for f in sorted(p.iterdir())
                if f.is_file()
                and not f.name.endswith(_SIDECARS)
                and f.suffix.lower() in (".sse", ".ndjson", ".json", ".txt", ".jsonl")
            )
        elif p.exists():
            out.append(p)
        else:
            raise LlmError(f"no such fixture file or folder: {p}", ErrorCode.INVALID_OPTIONS)
    return out


def load_expected(path: str | Path) -> dict[str, dict[str, Any]]:
    """Expected results: ``{fixture file name or stem: {...}}``, or one ``{...}`` for all (``*``)."""
    data = read_json(Path(path), "expected results")
    if not isinstance(data, dict):
        raise LlmError(f"{path}: expected a JSON object", ErrorCode.INVALID_OPTIONS)
    if data and set(data) <= EXPECTED_KEYS:
        return {"*": data}
    for k, v in data.items():
        if not isinstance(v, dict):
            raise _bad(Path(path), f"the entry {k!r} must be an object of expected results")
    return {str(k): dict(v) for k, v in data.items()}


def expected_for(fixture: Fixture, table: Mapping[str, Mapping[str, Any]] | None) -> Any:
    """What ``fixture`` should give: its entry in ``table`` (by name, stem, path or ``*``), else
    its ``<stem>.expected.json`` sidecar, else ``None`` (nothing is compared)."""
    if table:
        for key in (fixture.name, fixture.path.stem, str(fixture.path), "*"):
            if key in table:
                return table[key]
    sidecar = fixture.path.with_name(fixture.path.stem + ".expected.json")
    if sidecar.exists():
        return read_json(sidecar, "expected results")
    return None
