"""Lua writing: an :class:`~.infer.Inference` as a short adapter a learner can read.

The draft reads like a script written by hand: one ``read(c)`` function with one line per mapped
field, each with a concrete path (``text(c, { "choices", 1, "delta", "content" })``) and a
comment above it saying what the mapping rests on and how sure it is; then one short function
per hook. What every draft needs (path reading, the finish vocabulary, usage, tool calls, the
chunk's JSON) is the shipped library ``adapters/lib/draft_support.lua``, loaded with
``require``, so a plain text stream drafts into a few dozen lines. Nothing from a body enters the
source except through :func:`~.lua_text.lua_str` (a string literal, the body's text redacted)
and :func:`~.lua_text.comment_text` (a line comment, redacted too).
"""

from __future__ import annotations

from collections.abc import Sequence

from .finish import EndSpec
from .infer import Candidate, Inference, Mapping, ToolSpec
from .lua_text import (
    EACH,
    FIRST,
    Path,
    body_str,
    comment_text,
    lua_path,
    lua_str,
    sample,
    show_path,
)
from .paths import ALTERNATIVES
from .tools import Fragment

__all__ = ["write_script"]

_WIDTH = 100


def _c(text: str, indent: str = "") -> list[str]:
    """``text`` as ``--`` comment lines of at most about 100 characters."""
    words = comment_text(text, 2000).split(" ")
    lines: list[str] = []
    line = ""
    for w in words:
        if line and len(indent) + 3 + len(line) + 1 + len(w) > _WIDTH:
            lines.append(line)
            line = "  " + w
        else:
            line = f"{line} {w}" if line else w
    lines.append(line)
    return [f"{indent}-- {x}" for x in lines]


def _args(path: Sequence[str | int]) -> str:
    """A path as ``get``'s arguments: ``"choices", 1, "delta"``."""
    return ", ".join(
        body_str(s) if isinstance(s, str) else ("EACH" if s == EACH else str(s)) for s in path
    )


def _why(m: Mapping | None, what: str) -> str:
    if m is None:
        return what
    return f"{what} ({m.confidence}): {m.where}: {m.basis}"


HEADER = """\
--[[
{name}.lua - drafted by notebook_llm from {sources}.
Above each mapped field: what it rests on, how sure (sure, likely, guess); TODO: what the bodies
could not tell. Check on other bodies: python -m notebook_llm check-adapter {name}.lua --fixtures
BODY. draft.* is adapters/lib/draft_support.lua (export-adapter inlines what this file uses).
]]"""


def write_script(
    inf: Inference,
    name: str,
    source_labels: Sequence[str],
    request_lua: str,
    request_comments: list[str],
) -> str:
    """The draft's Lua source."""
    body = inf.body
    sources = " and ".join(
        f"{comment_text(label, 60)} ({comment_text(b.describe(), 80)})"
        for label, b in zip(source_labels, inf.bodies, strict=True)
    )
    out: list[str] = [HEADER.format(name=name, sources=sources)]
    out.append('local draft = require("draft_support")')
    out.append("local get, text, EACH = draft.get, draft.text, draft.EACH")
    out.append("")
    out.append("local M = {")
    out.append(f"  name = {lua_str(name)},")
    out.append('  version = "0.1.0-draft",')
    out.append('  endpoint = "/chat/completions", -- TODO endpoint: the body does not say its URL')
    if body.framing == "ndjson":
        out.append('  stream_format = "ndjson", -- one JSON object per line, no data: prefix')
    out.append("}")
    out.append("")
    out.extend(request_comments)
    out.append(request_lua.rstrip("\n"))
    out.append("")
    out.extend(_state(inf))
    out.extend(_read(inf))
    out.append("")
    if inf.stream:
        out.extend(_stream_hook(inf))
        out.append("")
        out.extend(
            _c(
                "TODO transform_response: drafted from a stream, so a non-stream body is read "
                "with the same fields (an object's message read as its delta): a guess"
            )
        )
        out.append("function M.transform_response(raw)")
        out.append("  return draft.response(read(draft.whole(json.decode(raw))))")
        out.append("end")
    else:
        out.extend(_c("framing: a non-stream JSON body, so requests ask for no stream"))
        out.append("function M.transform_response(raw)")
        out.append("  local r = json.decode(raw)")
        out.append("  local err = draft.error_in(r)")
        out.append("  if err then return json.encode({ error = err }) end")
        out.append("  return draft.response(read(r))")
        out.append("end")
    out.append("")
    out.append("return M")
    return "\n".join(out) + "\n"


def _state(inf: Inference) -> list[str]:
    """Module-level lines: per-stream state, the tool-call and usage tables (built once)."""
    out: list[str] = []
    for what, cand in (("text", inf.text), ("reasoning", inf.reasoning)):
        if cand is not None and cand.cumulative:
            out += _c(f"each payload carries the whole {what} so far: {what}_new gives what is new")
            out.append(f"local {what}_new = draft.cumulative() -- per stream: one Lua state each")
        elif cand is not None and cand.undecided and inf.stream and not cand.raw:
            out += _c(
                f"TODO {what}: the body sent it in one payload, so whether payloads carry pieces "
                "or the whole text so far is unknown: decided on the second value (whole when it "
                "repeats the first)"
            )
            out.append(f"local {what}_new = draft.cumulative(true) -- per stream")
    if inf.tools or inf.fragments:
        out.extend(_tool_tables(inf.tools, inf.fragments))
    out.extend(_usage_table(inf))
    if out:
        out.append("")
    return out


def _tool_tables(tools: list[ToolSpec], fragments: list[Fragment]) -> list[str]:
    out = ["local CALLS = {"]
    for t in tools:
        parts = [f"at = {lua_path(t.path)}", f"name = {lua_path(t.name)}"]
        if t.args:
            parts.append(f"args = {lua_path(t.args)}")
        if t.id:
            parts.append(f"id = {lua_path(t.id)}")
        if t.index:
            parts.append(f"index = {lua_path(t.index)}")
        if t.index_root:
            parts.append(f"index_root = {body_str(t.index_root)}")
        if t.cond is not None:
            parts.append(f"when = {{ {body_str(t.cond.key)}, {body_str(str(t.cond.value))} }}")
        out.append("  { " + ", ".join(parts) + " },")
    out.append("}")
    out.append("local FRAGMENTS = {")
    for f in fragments:
        parts = [f"at = {lua_path(f.path)}"]
        if f.index_root:
            parts.append(f"index_root = {body_str(f.index_root)}")
        if f.cond is not None:
            parts.append(f"when = {{ {body_str(f.cond.key)}, {body_str(str(f.cond.value))} }}")
        out.append("  { " + ", ".join(parts) + " },")
    out.append("}")
    return out


def _text_expr(cand: Candidate, guard: bool) -> str:
    """``text(c, {path})`` with the holder condition of ``cand`` (``guard``: leave out what is
    marked as reasoning, when no reasoning was seen)."""
    keep = ""
    cond = cand.cond
    if cond is not None and not cond.on_payload:
        fn = "unless" if cond.negate else "where"
        value = "true" if cond.value is True else body_str(str(cond.value))
        keep = f", draft.{fn}({body_str(cond.key)}, {value})"
    elif guard:
        keep = ", draft.unmarked"
    return f"text(c, {lua_path(cand.path)}{keep})"


def _assign(
    cand: Candidate, field: str, expr: str, what: str, kind_var: bool, stream: bool
) -> list[str]:
    """``out.FIELD = expr``, with the payload-kind condition and cumulative/separator handling."""
    if cand.cumulative or (cand.undecided and stream and not cand.raw):
        expr = f"{what}_new({expr})"
    lines: list[str]
    if cand.separator:
        lines = [
            f"local {what}_word = {expr}",
            f"if {what}_word then out.{field} = {what}_word .. {lua_str(cand.separator)} end",
        ]
    else:
        lines = [f"out.{field} = {expr}"]
    cond = cand.cond
    if cond is not None and cond.on_payload and kind_var:
        test = f"draft.is_kind(c, kind, {body_str(str(cond.value))})"
        test = f"not {test}" if cond.negate else test
        return [f"if {test} then", *("  " + x for x in lines), "end"]
    return lines


def _read(inf: Inference) -> list[str]:
    m = inf.mappings
    out = _c("One payload (or a whole body) -> the fields of the unified chunk.")
    out.append("local function read(c)")
    out.append("  local out = {}")
    for prefix in _choice_lists(inf):
        out += _c("several choices (n > 1) come in their own payloads: read choice 0 only", "  ")
        out.append(f"  draft.first_choice(c, {lua_path(prefix)})")
    kind_var = inf.kind_key is not None
    if kind_var:
        out += _c(f"every payload names its kind in {inf.kind_key!r}", "  ")
        out.append(f"  local kind = get(c, {body_str(str(inf.kind_key))})")
    ind = "  "
    # text
    reasoning_seen = inf.reasoning is not None
    if inf.text is not None and inf.text.raw:
        out += _c("text: each payload that is not JSON, whole (in the stream hook)", ind)
    elif inf.text is not None:
        out += _c(_why(m.get("text"), "text"), ind)
        if inf.text.guessed:
            out += _c("TODO text: no answer text in the bodies; this field is a guess", ind)
        if inf.text.separator:
            out += _c("TODO text: bare words with no spaces, so a space is added after each", ind)
        guard = not reasoning_seen and inf.text.cond is None
        if guard:
            out += _c("(strings marked as reasoning, a common convention, are left out)", ind)
        expr = _text_expr(inf.text, guard)
        out += [ind + x for x in _assign(inf.text, "content", expr, "text", kind_var, inf.stream)]
    else:
        out += _c("text: no field in the bodies reads like answer text (tool calls only?)", ind)
    # reasoning
    if inf.reasoning is not None:
        out += _c(_why(m.get("reasoning"), "reasoning"), ind)
        expr = _text_expr(inf.reasoning, False)
        out += [
            ind + x
            for x in _assign(
                inf.reasoning, "reasoning_content", expr, "reasoning", kind_var, inf.stream
            )
        ]
    elif (
        inf.text is not None
        and not inf.text.guessed
        and not inf.text.raw
        and (inf.text.cond is None or inf.text.cond.on_payload)
    ):
        out += _c(
            "reasoning (guess): none in the bodies; marked strings or a sibling of the text "
            "named reasoning_content, reasoning or thinking",
            ind,
        )
        out.append(
            f"{ind}out.reasoning_content = draft.reasoning_near(c, {lua_path(inf.text.path)})"
        )
    else:
        out += _c("reasoning: none in the bodies", ind)
    out += _finish_lines(inf, ind)
    out += _usage_lines(inf, ind)
    out += _tool_lines(inf, ind)
    out += _end_lines(inf.end, inf, ind)
    out.append("  return out")
    out.append("end")
    return out


def _choice_lists(inf: Inference) -> list[Path]:
    """The lists of alternatives (``choices``) the mapped paths read the first element of."""
    paths: list[Path] = [c.path for c in (inf.text, inf.reasoning) if c is not None]
    paths += [f.path for f in inf.finish] + [t.path for t in inf.tools]
    paths += [f.path for f in inf.fragments]
    out: list[Path] = []
    for path in paths:
        for i in range(1, len(path)):
            step = path[i - 1]
            if path[i] == FIRST and isinstance(step, str) and step.lower() in ALTERNATIVES:
                if path[:i] not in out:
                    out.append(path[:i])
                break
    return out


def _finish_lines(inf: Inference, ind: str) -> list[str]:
    out: list[str] = []
    if not inf.finish:
        out += _c("TODO finish: no finish field in the bodies; every answer reads as a stop", ind)
        return out
    out += _c(_why(inf.mappings.get("finish"), "finish"), ind)
    exprs = [f"get(c, {_args(f.path)})" for f in inf.finish]
    value = exprs[0] if len(exprs) == 1 else "(" + " or ".join(exprs) + ")"
    out.append(f"{ind}out.finish_reason = draft.finish({value})")
    return out


def _paths_lua(paths: list[Path]) -> str:
    if len(paths) == 1:
        return lua_path(paths[0])
    return "{ " + ", ".join(lua_path(p) for p in paths) + " }"


def _usage_table(inf: Inference) -> list[str]:
    """The ``USAGE`` table (module level: built once, not on every payload), with the comment
    saying what the mapping rests on."""
    roles = inf.usage.mapped()
    if not roles:
        return []
    out = _c(_why(inf.mappings.get("usage"), "usage"))
    out.append("local USAGE = {")
    for role in roles:
        paths = [p.path for p in inf.usage.roles[role]]
        out.append(f"  {role} = {_paths_lua(paths)},")
    out.append("}")
    return out


def _usage_lines(inf: Inference, ind: str) -> list[str]:
    if not inf.usage.mapped():
        return _c(
            "TODO usage: no token counts in the bodies (no integer set once per answer); map "
            "them if the API sends any: out.usage = draft.usage(c, { prompt = PATH, completion "
            "= PATH })",
            ind,
        )
    return [f"{ind}out.usage = draft.usage(c, USAGE) -- the fields of USAGE, above"]


def _tool_lines(inf: Inference, ind: str) -> list[str]:
    if inf.tools or inf.fragments:
        out = _c(_why(inf.mappings.get("tool calls"), "tool calls"), ind)
        out.append(f"{ind}out.tool_calls = draft.calls(c, CALLS, FRAGMENTS)")
        return out
    where: Path = ("tool_calls", EACH)
    if inf.text is not None:
        where = (*inf.text.path[:-1], "tool_calls", EACH)
    out = _c(
        "TODO tool calls: none in the bodies, so calls of the common shapes are looked for "
        "anywhere (a guess); map their place if the API has them, e.g. objects {id, name, "
        f"arguments}} at {show_path(where)}: draft.calls(c, {{ {{ at = {lua_path(where)}, "
        'name = { "name" }, args = { "arguments" }, id = { "id" } } })',
        ind,
    )
    out.append(f"{ind}out.tool_calls = draft.guess_calls(c)")
    return out


def _end_lines(end: EndSpec, inf: Inference, ind: str) -> list[str]:
    if not inf.stream:
        return []
    if end.kind in ("done-sentinel", "sentinel"):
        return []  # in the hook: the marker is not JSON
    m = inf.mappings.get("end")
    out = _c(_why(m, "end"), ind)
    if end.kind == "flag" and end.path is not None:
        out.append(f"{ind}out.done = get(c, {_args(end.path)}) == true")
    elif end.kind == "kind":
        values = "{ " + ", ".join(body_str(v) for v in end.values) + " }"
        family = body_str(end.family) if end.family else "nil"
        out.append(f"{ind}out.done = draft.ends(kind, {values}, {family})")
        if not inf.finish and end.family:
            out += _c("no finish field: the end event's last word says how it ended", ind)
            out.append(f"{ind}out.finish_reason = draft.end_finish(kind, {family})")
    elif end.kind == "value" and end.path is not None:
        value = body_str(end.value) if isinstance(end.value, str) else str(end.value)
        out.append(f"{ind}out.done = get(c, {_args(end.path)}) == {value}")
    elif end.kind == "key" and end.path is not None:
        out.append(f"{ind}out.done = get(c, {_args(end.path)}) ~= nil")
    elif end.kind == "eof":
        out += _c(
            "TODO end: nothing marks the last payload, so the end of the body is the end: "
            "every payload says finish stop (a connection cut early then reads as complete)",
            ind,
        )
        out.append(f'{ind}out.finish_reason = out.finish_reason or "stop"')
    return out


def _stream_hook(inf: Inference) -> list[str]:
    end = inf.end
    out = _c('One payload of the stream -> a unified chunk ("" skips the payload).')
    out.append("function M.transform_stream_chunk(line)")
    if end.kind in ("done-sentinel", "sentinel"):
        out += _c(_why(inf.mappings.get("end"), "end"), "  ")
        out.append(
            f"  if line == {lua_str(str(end.value))} then return json.encode({{ done = true }}) end"
        )
    others = [p for p in inf.other_payloads if p != end.value]
    if inf.text is not None and inf.text.raw:
        out += _c(_why(inf.mappings.get("text"), "text"), "  ")
        out.append("  local ok, c = pcall(json.decode, line)")
        out.append(
            '  if not ok or type(c) ~= "table" then return json.encode({ content = line }) end'
        )
    elif others:
        out += _c(
            f"{len(others)} payload(s) are not JSON (e.g. {sample(others[0], 30)!r}): skipped",
            "  ",
        )
        out.append("  local ok, c = pcall(json.decode, line)")
        out.append('  if not ok or type(c) ~= "table" then return "" end')
    else:
        out.append("  local c = json.decode(line)")
        out.append('  if type(c) ~= "table" then return "" end')
    out.append("  local err = draft.error_in(c)")
    out.append("  if err then return json.encode({ error = err }) end")
    out.append("  return draft.chunk(read(c))")
    out.append("end")
    return out
