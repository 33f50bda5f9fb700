"""The request side of a draft: ``transform_request`` from a sample request body, or a default.

With a sample (``--request FILE``), the draft maps the kernel's OpenAI-like request onto the
sample's shape: where the message list is (a list of objects with a ``role``), the role names it
uses (``assistant`` may be ``model``), whether content is a string or a list of parts, where the
system prompt goes (a ``system`` message or a top-level key), and the keys for the model, the
stream flag, max tokens and temperature (found by name, nested or not). Sample keys it cannot
place are listed in a TODO. Without a sample, the request is sent as it is, clearly marked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import ErrorCode, LlmError
from .framing import _depth_ok
from .infer import norm
from .lua_text import Path, comment_text, lua_path, lua_str, show_path

__all__ = ["RequestShape", "default_request", "infer_request", "request_lua", "request_todos"]


def _c(text: str) -> str:
    return "-- " + comment_text(text, 200)


DEFAULT = "M.transform_request = draft.openai_request\n"


def default_request() -> tuple[str, list[str]]:
    """The clearly marked OpenAI-shaped default, and its comment lines."""
    return DEFAULT, [
        _c("TODO request: no sample request (--request FILE): an OPENAI-SHAPED default, the"),
        _c("kernel's request sent as it is; write M.transform_request(raw) for what the API wants"),
    ]


@dataclass
class RequestShape:
    """Where the sample request keeps each thing (paths from the top of the body)."""

    messages: Path
    role_key: str = "role"
    content_key: str = "content"
    #: ``"string"``, or ``"parts"`` with the keys of a text part (``{type = "text", text}``).
    content_form: str = "string"
    part_typed: bool = False
    part_text_key: str = "text"
    roles: dict[str, str] = field(default_factory=dict)
    system_path: Path | None = None
    system_form: str = "string"
    model: Path | None = None
    stream: Path | None = None
    max_tokens: Path | None = None
    temperature: Path | None = None
    unmapped: list[str] = field(default_factory=list)


def _find_messages(body: dict[str, Any]) -> tuple[Path, str] | None:
    def ok(v: Any) -> str | None:
        if isinstance(v, list) and v and all(isinstance(m, dict) for m in v):
            for key in ("role", "author"):
                if all(key in m for m in v):
                    return key
        return None

    for k, v in body.items():
        key = ok(v)
        if key:
            return (k,), key
    for k, v in body.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                key = ok(v2)
                if key:
                    return (k, k2), key
    return None


def _by_name(body: dict[str, Any], names: tuple[str, ...], skip: Path) -> Path | None:
    for k, v in body.items():
        if norm(k) in names and not isinstance(v, list | dict):
            return (k,)
    for k, v in body.items():
        if isinstance(v, dict) and (k,) != skip[:1]:
            for k2, v2 in v.items():
                if norm(k2) in names and not isinstance(v2, list | dict):
                    return (k, k2)
    return None


def infer_request(raw: bytes, label: str = "the sample request") -> RequestShape:
    """Read a sample request body (JSON); one ``LlmError`` line when it cannot be used."""
    try:
        body = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        raise LlmError(f"{label} is not a JSON request body", ErrorCode.INVALID_OPTIONS) from None
    if not isinstance(body, dict) or not _depth_ok(body):
        raise LlmError(
            f"{label} is not a JSON object of reasonable depth", ErrorCode.INVALID_OPTIONS
        )
    found = _find_messages(body)
    if found is None:
        raise LlmError(
            f"{label} has no list of messages (objects with a role): give a chat request body",
            ErrorCode.INVALID_OPTIONS,
        )
    path, role_key = found
    shape = RequestShape(path, role_key)
    messages = body[path[0]] if len(path) == 1 else body[path[0]][path[1]]
    seen_roles = {str(m.get(role_key)) for m in messages}
    for ours, theirs in (
        ("user", ("user", "human", "USER")),
        ("assistant", ("assistant", "model", "bot", "chatbot", "ai", "CHATBOT")),
        ("system", ("system", "developer", "SYSTEM")),
    ):
        shape.roles[ours] = next((t for t in theirs if t in seen_roles), ours)
    sample = messages[0]
    for key in ("content", "parts", "text", "message"):
        if key in sample:
            shape.content_key = key
            value = sample[key]
            if isinstance(value, list):
                shape.content_form = "parts"
                part = next((p for p in value if isinstance(p, dict)), {})
                shape.part_typed = part.get("type") == "text"
                shape.part_text_key = "text" if "text" in part else next(iter(part), "text")
            break
    if "system" not in seen_roles and "developer" not in seen_roles:
        for k, v in body.items():
            if norm(k) in (
                "system",
                "systeminstruction",
                "systemprompt",
                "preamble",
                "instructions",
            ):
                shape.system_path = (k,)
                shape.system_form = "parts" if isinstance(v, dict) and "parts" in v else "string"
    shape.model = ("model",) if "model" in body else None
    shape.stream = _by_name(body, ("stream",), path)
    shape.max_tokens = _by_name(
        body,
        (
            "maxtokens",
            "maxoutputtokens",
            "maxcompletiontokens",
            "numpredict",
            "maxnewtokens",
            "maxlength",
            "maxtokenstosample",
        ),
        path,
    )
    shape.temperature = _by_name(body, ("temperature",), path)
    placed = {
        p[0]
        for p in (
            path,
            shape.system_path,
            shape.model,
            shape.stream,
            shape.max_tokens,
            shape.temperature,
        )
        if p
    }
    shape.unmapped = [k for k in body if k not in placed]
    return shape


def _opt(name: str, path: Path | None) -> str:
    return f"local {name} = {lua_path(path) if path else 'nil'}"


def request_todos(shape: RequestShape) -> list[str]:
    """What the request mapping leaves undone (for the CLI's TODO list)."""
    out = []
    if shape.unmapped:
        out.append(
            "request: the sample also has "
            + ", ".join(repr(k) for k in shape.unmapped[:8])
            + "; not mapped"
        )
    out.append("request: tool definitions, tool results and images are not mapped (text only)")
    return out


def request_lua(shape: RequestShape, label: str) -> tuple[str, list[str]]:
    """``transform_request`` for ``shape``, and its comment lines."""
    comments = [
        _c(f"request: mapped onto the shape of the sample request ({label})"),
        _c(
            f"  messages at {show_path(shape.messages)}, role key {shape.role_key!r}, content "
            f"in {shape.content_key!r} as "
            + ("a string" if shape.content_form == "string" else "a list of text parts")
        ),
        _c(
            "  roles: "
            + ", ".join(f"{k} -> {v!r}" for k, v in shape.roles.items())
            + (
                f"; the system prompt goes in {show_path(shape.system_path)}"
                if shape.system_path
                else "; system prompts stay messages"
            )
        ),
    ]
    for what, path in (
        ("model", shape.model),
        ("stream", shape.stream),
        ("max_tokens", shape.max_tokens),
        ("temperature", shape.temperature),
    ):
        comments.append(
            _c(
                f"  {what} -> {show_path(path)}"
                if path
                else f"  {what}: not in the sample, not sent"
            )
        )
    if shape.unmapped:
        comments.append(
            _c(
                "TODO request: the sample also has "
                + ", ".join(repr(k) for k in shape.unmapped[:8])
                + "; not mapped (add them if the API needs them)"
            )
        )
    comments.append(
        _c("TODO request: tool definitions, tool results and images are not mapped (text only)")
    )
    roles = ", ".join(f"{k} = {lua_str(v)}" for k, v in shape.roles.items())
    if shape.content_form == "string":
        content = "text"
    elif shape.part_typed:
        content = f'json.array({{ {{ type = "text", [{lua_str(shape.part_text_key)}] = text }} }})'
    else:
        content = f"json.array({{ {{ [{lua_str(shape.part_text_key)}] = text }} }})"
    system_value = (
        "{ parts = json.array({ { text = s } }) }" if shape.system_form == "parts" else "s"
    )
    lua = f"""\
local ROLES = {{ {roles} }}
{_opt("MESSAGES_PATH", shape.messages)}
{_opt("SYSTEM_PATH", shape.system_path)}
{_opt("MODEL_PATH", shape.model)}
{_opt("STREAM_PATH", shape.stream)}
{_opt("MAX_TOKENS_PATH", shape.max_tokens)}
{_opt("TEMPERATURE_PATH", shape.temperature)}

function M.transform_request(raw)
  local req = json.decode(raw, {{ null = json.null }})
  local body, messages, system = {{}}, json.array(), {{}}
  for _, m in ipairs(req.messages) do
    local text = draft.message_text(m.content)
    if m.role == "system" and SYSTEM_PATH then
      system[#system + 1] = text
    else
      local msg = {{ [{lua_str(shape.role_key)}] = ROLES[m.role] or m.role }}
      msg[{lua_str(shape.content_key)}] = {content}
      messages[#messages + 1] = msg
    end
  end
  draft.put(body, MESSAGES_PATH, messages)
  if #system > 0 then
    local s = table.concat(system, "\\n\\n")
    draft.put(body, SYSTEM_PATH, {system_value})
  end
  if MODEL_PATH then draft.put(body, MODEL_PATH, req.model) end
  if STREAM_PATH then draft.put(body, STREAM_PATH, req.stream == true) end
  if MAX_TOKENS_PATH and draft.get(req, "max_tokens") then
    draft.put(body, MAX_TOKENS_PATH, req.max_tokens)
  end
  if TEMPERATURE_PATH and draft.get(req, "temperature") then
    draft.put(body, TEMPERATURE_PATH, req.temperature)
  end
  return json.encode(body)
end
"""
    return lua, comments
