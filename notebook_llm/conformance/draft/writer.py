"""Lua writing: an :class:`~.infer.Inference` as a commented adapter script in the kernel's idioms.

The script is data plus small helpers: each inferred place is a path table (``TEXT``,
``REASONING``, ``USAGE``, ``FINISH_PATHS``, ``CALLS``, ...) with one comment line above it saying
why, and the hooks read payloads through ``values_at``/``first_at``. Nothing from the body enters
the source except through :func:`~.lua_text.lua_str` and :func:`~.lua_text.comment_text`.
"""

from __future__ import annotations

from collections.abc import Sequence

from .infer import SYNONYMS, Candidate, Inference, ToolSpec
from .lua_text import Path, comment_text, lua_path, lua_str, show_path

__all__ = ["whole_variants", "write_script"]


def whole_variants(path: Path) -> list[Path]:
    """A stream path and the path the same field has in a non-stream body of the usual
    OpenAI-like shape (``delta`` read as ``message``)."""
    out = [path]
    if "delta" in path:
        out.append(tuple("message" if s == "delta" else s for s in path))
    return out


#: Where reasoning sits next to the text in the APIs that have it (a guess when none is seen).
_REASONING_SIBLINGS = ("reasoning_content", "reasoning", "thinking")


def _unique(paths: list[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))


def _c(text: str) -> str:
    return "-- " + comment_text(text, 200)


def _paths(paths: Sequence[Path]) -> str:
    return "{ " + ", ".join(lua_path(p) for p in paths) + " }"


def _spec(cand: Candidate, whole: bool, deep: bool = False) -> str:
    paths = _unique(whole_variants(cand.path)) if whole else [cand.path]
    parts = [f"paths = {_paths(paths)}"]
    if whole and deep:
        parts.append("deep = true")
    if cand.separator:
        parts.append(f"sep = {lua_str(cand.separator)}")
    if cand.cond is None and not cand.reasoning_like:
        parts.append('cond = "unmarked"')
    if cand.cond is not None:
        v = cand.cond.value
        value = "true" if v is True else "false" if v is False else lua_str(str(v))
        neg = ", negate = true" if cand.cond.negate else ""
        parts.append(f"cond = {{ key = {lua_str(cand.cond.key)}, value = {value}{neg} }}")
    return "{ " + ", ".join(parts) + " }"


def _why_text(inf: Inference, cand: Candidate, kind: str, others: list[Candidate]) -> list[str]:
    spaces = sum(ch.isspace() for ch in cand.text) / max(len(cand.text), 1)
    lines = [
        _c(
            f"{kind}: {cand.show()}: {len(cand.text)} chars over {cand.payloads} payload(s), "
            f"{spaces:.0%} spaces, starting {cand.text[:40]!r}"
        )
    ]
    if len(others) > 1:
        shown = "; ".join(
            f"{c.show()} ({len(c.text)} chars, score {c.score:.0f})" for c in others[1:4]
        )
        lines.append(
            _c(
                f"  picked over {len(others) - 1} other candidate(s), as the one whose "
                f"concatenation reads most like an answer: {shown}"
            )
        )
    if cand.separator:
        lines.append(
            _c(
                "  TODO the payloads are bare words with no space anywhere: a space is added "
                "after each (sep); remove sep if the API sends text"
            )
        )
    if cand.cumulative:
        lines.append(
            _c("  each payload carries the whole text so far: the draft emits what is new")
        )
    return lines


def _tools_lines(tools: list[ToolSpec], whole: bool) -> str:
    rows = []
    for t in tools:
        for path in whole_variants(t.path) if whole else [t.path]:
            parts = [f"path = {lua_path(path)}", f"name = {lua_path(t.name)}"]
            if t.args:
                parts.append(f"args = {lua_path(t.args)}")
            if t.id:
                parts.append(f"id = {lua_path(t.id)}")
            if t.index:
                parts.append(f"index = {lua_path(t.index)}")
            if t.index_root:
                parts.append(f"index_root = {lua_str(t.index_root)}")
            rows.append("  { " + ", ".join(parts) + " },")
    return "\n".join(rows)


HEADER = """\
--[[
{name}.lua - an adapter DRAFTED by notebook_llm from one recorded body
({source}: {describe}).

Every choice below was inferred from that body alone and is explained in the comment line above
it; what the body could not tell is marked TODO. Check the draft on other bodies of the API:
  python -m notebook_llm check-adapter {name}.lua --fixtures OTHER_BODY
  %adapter test {name} OTHER_BODY                    (in a notebook)
Written to the HomeAgent Lua adapter contract, in the kernel's idioms (json.decode turns null
into nil; present() tells a value from an absent one); the commented template is
notebook_llm/adapters/lua/adapter_template.lua.
]]
"""

HELPERS = """\
local null = json.null
-- JSON null decodes to nil by default; request bodies keep nulls as json.null (sent on as null).
local KEEP_NULLS = { null = null }

local function present(v)
  return v ~= nil and v ~= null
end

-- Paths into a payload: strings are keys, 1 is the first element of an array of alternatives
-- (choices, candidates), EACH is every element of a list (parts, content blocks).
local EACH = {}

-- Every present value at `path` inside v, each with the object holding it: { {value, holder}, ... }
local function values_at(v, path, i, holder, out)
  i = i or 1
  out = out or {}
  if i > #path then
    if present(v) then out[#out + 1] = { v, holder } end
    return out
  end
  if type(v) ~= "table" then return out end
  local step = path[i]
  if step == EACH then
    for _, item in ipairs(v) do values_at(item, path, i + 1, v, out) end
  else
    values_at(v[step], path, i + 1, v, out)
  end
  return out
end

-- The first value found at any of `paths`.
local function first_at(v, paths)
  for _, path in ipairs(paths) do
    local found = values_at(v, path)
    if found[1] then return found[1][1] end
  end
  return nil
end

-- Whether an object is marked as reasoning (thought = true, type = "thinking", ...).
local REASONING_WORDS = { "reason", "think", "thought", "analysis" }
local function marked(holder)
  if type(holder) ~= "table" or #holder > 0 then return false end
  for k, v in pairs(holder) do
    if type(k) == "string" then
      local key = string.lower(k)
      local word = (v == true and key) or ((key == "type" or key == "kind") and type(v) == "string" and string.lower(v))
      if word then
        for _, w in ipairs(REASONING_WORDS) do
          if string.find(word, w, 1, true) then return true end
        end
      end
    end
  end
  return false
end

local function matches(holder, cond)
  if cond == "unmarked" then return not marked(holder) end
  if cond == "marked" then return marked(holder) end
  if cond == nil then return true end
  local hit = type(holder) == "table" and holder[cond.key] == cond.value
  if cond.negate then return not hit end
  return hit
end

-- The string keys of an object, sorted: the deep walks visit them in one stable order.
local function sorted_keys(v)
  local keys = {}
  for k in pairs(v) do
    if type(k) == "string" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  return keys
end

-- Every value of `key` anywhere in v (lists in order, object keys sorted), with its holder:
-- how a drafted-from-a-stream transform_response finds a field the stream's paths miss.
local function deep_values(v, key, out, depth)
  out = out or {}
  depth = depth or 0
  if type(v) ~= "table" or depth > 32 then return out end
  if #v > 0 then
    for _, item in ipairs(v) do deep_values(item, key, out, depth + 1) end
    return out
  end
  for _, k in ipairs(sorted_keys(v)) do
    local x = v[k]
    if k == key and present(x) then out[#out + 1] = { x, v } end
    deep_values(x, key, out, depth + 1)
  end
  return out
end

-- The last key of a path (what deep_values looks for).
local function leaf_of(path)
  for i = #path, 1, -1 do
    if type(path[i]) == "string" then return path[i] end
  end
  return nil
end

-- first_at, then (deep) the first value anywhere under the paths' last keys.
local function first_of(v, paths, deep)
  local found = first_at(v, paths)
  if found ~= nil or not deep then return found end
  for _, path in ipairs(paths) do
    local leaf = leaf_of(path)
    local hits = leaf and deep_values(v, leaf) or {}
    if hits[1] then return hits[1][1] end
  end
  return nil
end

-- The strings at a field's paths joined (nil when the payload has none); with spec.deep, the
-- strings under the paths' last key anywhere when the paths find none.
local function text_at(v, spec)
  if spec == nil then return nil end
  local parts, seen = {}, false
  local function take(found)
    if type(found[1]) == "string" and matches(found[2], spec.cond) then
      parts[#parts + 1] = found[1] .. (spec.sep or "")
      seen = true
    end
  end
  for _, path in ipairs(spec.paths) do
    for _, found in ipairs(values_at(v, path)) do take(found) end
  end
  if not seen and spec.deep then
    local leaf = leaf_of(spec.paths[1])
    for _, found in ipairs(leaf and deep_values(v, leaf) or {}) do take(found) end
  end
  if spec.also then
    local more = text_at(v, spec.also)
    if more then
      parts[#parts + 1] = more
      seen = true
    end
  end
  if not seen then return nil end
  return table.concat(parts)
end
"""

CUMULATIVE = """\
-- Per-stream state (one Lua state per stream): the text so far of each cumulative field.
local so_far = {}

-- What a cumulative value adds to the one before (all of it when it does not extend it).
local function delta_of(key, s)
  if s == nil then return nil end
  local prev = so_far[key] or ""
  so_far[key] = s
  if string.sub(s, 1, #prev) == prev then return string.sub(s, #prev + 1) end
  return s
end
"""

USAGE_FN = """\
local function usage_of(v, spec, deep)
  local out, any = {}, false
  for field, paths in pairs(spec) do
    local n = first_of(v, paths, deep)
    if type(n) == "number" then
      out[field] = n
      any = true
    end
  end
  -- the counts this body did not show, looked for by their common names inside the usage object
  for field, names in pairs(USAGE_GUESS) do
    if any and out[field] == nil then
      for _, root in ipairs(USAGE_ROOTS) do
        for _, name in ipairs(names) do
          for _, found in ipairs(deep_values(first_at(v, { root }), name)) do
            if out[field] == nil and type(found[1]) == "number" then
              out[field] = found[1]
              any = true
            end
          end
        end
      end
    end
  end
  if any then return out end
  return nil
end
"""

FINISH_FN = """\
local function finish_of(v, paths, deep)
  local raw = first_of(v, paths, deep)
  if type(raw) ~= "string" or raw == "" then return nil end
  local mapped = FINISH[string.lower(raw)]
  if mapped == false then return nil end -- a progress value, not a finish
  return mapped or raw
end
"""

CALLS_FN = """\
-- Objects anywhere in v that hold a call as `spec` describes one (name and arguments).
local function deep_calls(v, spec, out, depth)
  out = out or {}
  depth = depth or 0
  if type(v) ~= "table" or depth > 32 then return out end
  local named = first_at(v, { spec.name }) ~= nil
  local argued = spec.args ~= nil and first_at(v, { spec.args }) ~= nil
  if #v == 0 and ((named and (spec.args == nil or argued)) or (spec.loose and argued)) then
    out[#out + 1] = { v, nil }
    return out
  end
  if #v > 0 then
    for _, item in ipairs(v) do deep_calls(item, spec, out, depth + 1) end
    return out
  end
  for _, k in ipairs(sorted_keys(v)) do deep_calls(v[k], spec, out, depth + 1) end
  return out
end

-- Tool calls in v: kernel-shape stream entries, or (whole) the flat calls of a response; with
-- deep, calls found anywhere when the paths find none.
local function calls_of(v, specs, fragments, whole, deep)
  local calls = json.array()
  for _, spec in ipairs(specs) do
    local objects = spec.path and values_at(v, spec.path) or {}
    if deep and #objects == 0 then objects = deep_calls(v, spec) end
    if spec.guess and #objects > 0 and #calls > 0 then break end -- one guessed shape per payload
    for _, found in ipairs(objects) do
      local obj = found[1]
      if type(obj) == "table" then
        local name = first_at(obj, { spec.name })
        local args = spec.args and first_at(obj, { spec.args }) or nil
        local id = spec.id and first_at(obj, { spec.id }) or nil
        local index = spec.index and first_at(obj, { spec.index }) or nil
        if index == nil and spec.index_root then index = v[spec.index_root] end
        if name ~= nil or args ~= nil or id ~= nil then
          local call = { type = "function", name = name, id = id }
          if whole then
            call.arguments = args or json.object()
          else
            if index ~= nil then call.stream_index = index end
            if type(args) == "string" then
              call.raw_arguments = args
            elseif type(args) == "table" then
              -- an empty object opens a call whose arguments may follow in fragments
              if next(args) == nil then call.raw_arguments = "" else call.arguments = args end
            end
          end
          calls[#calls + 1] = call
        end
      end
    end
  end
  for _, spec in ipairs(fragments) do
    for _, found in ipairs(values_at(v, spec.path)) do
      if type(found[1]) == "string" and found[1] ~= "" then
        local call = { raw_arguments = found[1] }
        if spec.index_root then call.stream_index = v[spec.index_root] end
        calls[#calls + 1] = call
      end
    end
  end
  return calls
end
"""

GUESS_CALLS = """\
local GUESS_CALLS = {
  { guess = true, loose = true, name = { "function", "name" }, args = { "function", "arguments" }, id = { "id" }, index = { "index" } },
  { guess = true, name = { "name" }, args = { "args" }, id = { "id" } },
  { guess = true, name = { "name" }, args = { "arguments" }, id = { "id" }, index = { "index" } },
  { guess = true, name = { "name" }, args = { "input" }, id = { "id" }, index_root = "index" },
  { guess = true, name = { "functionCall", "name" }, id = { "functionCall", "id" } },
}"""

ERROR_FN = """\
local function error_of(e)
  if type(e) == "string" then return { message = e } end
  local code = e.code
  if not present(code) then code = e.type end
  if not present(code) then code = e.status end
  return {
    message = type(e.message) == "string" and e.message or "error",
    code = type(code) == "string" and code or nil,
    status = type(e.code) == "number" and e.code or nil,
  }
end
"""


def _finish_table(inf: Inference) -> list[str]:
    lines = []
    seen = ", ".join(f"{v!r} -> {m or 'passed on'}" for v, m in inf.finish_values.items()) or "none"
    where = ", ".join(show_path(p) for p in inf.finish_paths) or "none found"
    lines.append(_c(f"finish: {where}; final values seen: {seen}"))
    if inf.progress_values:
        lines.append(
            _c(
                "  values seen while content still followed are progress, not finishes: "
                + ", ".join(repr(v) for v in inf.progress_values)
            )
        )
    lines.append(
        _c(
            "  synonyms map to the contract's stop / length / tool_calls; any other value is "
            "passed on (the run ends as an error with that code)"
        )
    )
    entries: dict[str, str] = {k: v for k, v in SYNONYMS.items()}
    for v, m in inf.finish_values.items():
        if m is not None:
            entries[v.lower()] = m
    rows = [f"  [{lua_str(k)}] = {lua_str(v)}," for k, v in entries.items()]
    rows += [f"  [{lua_str(v.lower())}] = false," for v in inf.progress_values]
    lines.append("local FINISH = {")
    lines.extend(rows)
    lines.append("}")
    return lines


def _usage_lines(inf: Inference, whole: bool) -> tuple[str, list[str]]:
    label = "USAGE_WHOLE" if whole else "USAGE"
    notes: list[str] = []
    rows: list[str] = []
    for role in ("prompt", "completion", "total", "cache_read", "cache_write", "reasoning_tokens"):
        paths = inf.usage.get(role)
        if not paths:
            continue
        if role == "completion" and inf.derive_completion:
            notes.append(
                f"completion is not read from {', '.join(show_path(p) for p in paths)}: with a "
                "total given, the runtime takes total - prompt (output includes reasoning, as "
                "OpenAI counts it)"
            )
            continue
        all_paths = _unique([v for p in paths for v in (whole_variants(p) if whole else [p])])
        rows.append(f"  {role} = {_paths(all_paths)},")
        notes.append(f"{role} <- {', '.join(show_path(p) for p in paths)}")
    return "\n".join([f"local {label} = {{", *rows, "}"]), notes


#: Common names of the counts a body may not show (a reasoning count, cache reads and writes).
_USAGE_GUESS = {
    "reasoning_tokens": (
        "reasoning_tokens",
        "reasoningTokens",
        "thoughtsTokenCount",
        "thinking_tokens",
    ),
    "cache_read": (
        "cached_tokens",
        "cache_read_input_tokens",
        "cachedContentTokenCount",
        "num_cached_tokens",
        "prompt_cache_hit_tokens",
    ),
    "cache_write": ("cache_creation_input_tokens", "cache_write_tokens"),
}


def _usage_guess(inf: Inference, stream: bool) -> list[str]:
    """Lua for the counts the body did not show: looked for by name inside the usage objects."""
    missing = {k: v for k, v in _USAGE_GUESS.items() if k not in inf.usage}
    roots = _unique([p[:-1] for paths in inf.usage.values() for p in paths if len(p) > 1])
    if stream:
        roots = _unique([w for r in roots for w in whole_variants(r)])
    lines = []
    if missing and inf.usage:
        lines.append(
            _c(
                "usage not in this body (" + ", ".join(missing) + ") is looked for by its common "
                "names inside "
                + (", ".join(show_path(r) for r in roots) or "the payload")
                + " (a guess)"
            )
        )
    rows = [
        f"  {field} = {{ " + ", ".join(lua_str(n) for n in names) + " },"
        for field, names in missing.items()
    ]
    lines.append("local USAGE_GUESS = {")
    lines.extend(rows if inf.usage else [])
    lines.append("}")
    lines.append(f"local USAGE_ROOTS = {_paths(roots or [()])}")
    return lines


def write_script(
    inf: Inference,
    name: str,
    source_label: str,
    request_lua: str,
    request_comments: list[str],
) -> str:
    """The draft's Lua source."""
    body = inf.body
    stream = body.framing != "json"
    out: list[str] = [
        HEADER.format(
            name=name,
            source=comment_text(source_label, 80),
            describe=comment_text(body.describe(), 80),
        )
    ]
    out.append("local M = {")
    out.append(f"  name = {lua_str(name)},")
    out.append('  version = "0.1.0-draft",')
    out.append("  " + _c("TODO endpoint: the body does not say which URL it came from"))
    out.append('  endpoint = "/chat/completions",')
    if body.framing == "ndjson":
        out.append("  " + _c("framing: NDJSON (one JSON object per line, no data: prefix)"))
        out.append('  stream_format = "ndjson",')
    out.append("}")
    out.append("")
    out.append(HELPERS)
    if stream:
        out.append(_c(f"framing: {body.describe()}"))
    else:
        out.append(
            _c(
                "framing: a non-stream JSON body, so this draft has no transform_stream_chunk "
                "(requests ask for no stream); add one if the API streams"
            )
        )
    out.append("")

    # text and reasoning
    if inf.text is not None and inf.text.guessed:
        out.append(
            _c(
                f"TODO text: no answer text in this body; {show_path(inf.text.path)} is empty or "
                "null here and named like text, so it is read (a guess)"
            )
        )
    elif inf.text is not None:
        out.extend(_why_text(inf, inf.text, "text", inf.text_candidates))
    if inf.text is not None:
        if stream:
            out.append(f"local TEXT = {_spec(inf.text, False)}")
        out.append(f"local TEXT_WHOLE = {_spec(inf.text, stream, stream)}")
    else:
        out.append(_c("text: no field in this body reads like answer text (tool calls only?)"))
        out.append("local TEXT, TEXT_WHOLE = nil, nil")
    if inf.reasoning is not None:
        out.extend(_why_text(inf, inf.reasoning, "reasoning", inf.reasoning_candidates))
        if stream:
            out.append(f"local REASONING = {_spec(inf.reasoning, False)}")
        out.append(f"local REASONING_WHOLE = {_spec(inf.reasoning, stream, stream)}")
    else:
        out.append(_c("reasoning: none in this body (no field named or marked as reasoning)"))
        if inf.text is not None and inf.text.cond is None:
            out.append(
                _c(
                    '  text marked as reasoning (thought = true, type = "thinking": a common '
                    "convention, not seen here) is read as reasoning, not as text"
                )
            )
            siblings = [(*inf.text.path[:-1], k) for k in _REASONING_SIBLINGS]
            out.append(
                _c(
                    "  and so is a sibling of the text named "
                    + ", ".join(_REASONING_SIBLINGS)
                    + " (the common names; none seen here)"
                )
            )
            marked = Candidate(inf.text.path, reasoning_like=True)
            whole_sibs = _unique(
                [w for p in siblings for w in (whole_variants(p) if stream else [p])]
            )
            if stream:
                sib = "{ paths = " + _paths(siblings) + " }"
                out.append(
                    f'local REASONING = {_spec(marked, False)[:-2]}, cond = "marked", '
                    f"also = {sib} }}"
                )
            sib_whole = (
                "{ paths = " + _paths(whole_sibs) + (", deep = true" if stream else "") + " }"
            )
            out.append(
                f'local REASONING_WHOLE = {_spec(marked, stream, stream)[:-2]}, cond = "marked", '
                f"also = {sib_whole} }}"
            )
        else:
            out.append("local REASONING, REASONING_WHOLE = nil, nil")
    out.append("")

    # usage
    if inf.usage:
        for whole in (False, True) if stream else (True,):
            table, notes = _usage_lines(inf, whole)
            if not whole or not stream:
                out.append(_c("usage: " + "; ".join(notes)))
            out.append(table)
    else:
        out.append(_c("TODO usage: this body reports no token counts; map them if the API does"))
        out.append("local USAGE, USAGE_WHOLE = {}, {}")
        if not stream:
            out[-1] = "local USAGE_WHOLE = {}"
    out.extend(_usage_guess(inf, stream))
    out.append(USAGE_FN)

    # finish
    if not inf.finish_paths:
        out.append(_c("TODO finish: no finish field in this body; every answer reads as a stop"))
    out.extend(_finish_table(inf))
    finish_paths = inf.finish_paths
    if stream:
        out.append(f"local FINISH_PATHS = {_paths(finish_paths)}")
    whole_finish = _unique(
        [v for p in finish_paths for v in (whole_variants(p) if stream else [p])]
    )
    out.append(f"local FINISH_PATHS_WHOLE = {_paths(whole_finish)}")
    out.append(FINISH_FN)

    # tool calls
    if inf.tools or inf.fragments:
        for t in inf.tools:
            parts = [f"name {show_path(t.name)}"]
            if t.args:
                parts.append(f"arguments {show_path(t.args)}")
            if t.id:
                parts.append("id")
            if t.index:
                parts.append(f"numbered by {show_path(t.index)}")
            elif t.index_root:
                parts.append(f"numbered by the payload's {t.index_root!r}")
            out.append(_c(f"tool calls: {show_path(t.path)} ({', '.join(parts)}; {t.calls} seen)"))
        for f in inf.fragments:
            how = (
                f"joined by the payload's {f.index_root!r}" if f.index_root else "to the last call"
            )
            out.append(_c(f"tool-call argument fragments: {show_path(f.path)}, {how}"))
    else:
        out.append(
            _c("TODO tool calls: none in this body; if the API has them, add their paths to CALLS")
        )
    if inf.tools or inf.fragments:
        if stream:
            out.append("local CALLS = {")
            out.append(_tools_lines(inf.tools, False))
            out.append("}")
        out.append("local CALLS_WHOLE = {")
        out.append(_tools_lines(inf.tools, stream))
        out.append("}")
        out.append("local CALLS_DEEP = false")
    else:
        out.append(
            _c(
                "  meanwhile, calls are looked for anywhere in a payload in the common shapes "
                "(a guess): {function = {name, arguments}}, {name, args}, {name, arguments}, "
                "{name, input}, {functionCall = {name}}"
            )
        )
        out.append(GUESS_CALLS)
        if stream:
            out.append("local CALLS = GUESS_CALLS")
        out.append("local CALLS_WHOLE = GUESS_CALLS")
        out.append("local CALLS_DEEP = true")
    frag_rows = [
        "  { path = "
        + lua_path(f.path)
        + (f", index_root = {lua_str(f.index_root)}" if f.index_root else "")
        + " },"
        for f in inf.fragments
    ]
    out.append("local FRAGMENTS = {")
    out.extend(frag_rows)
    out.append("}")
    out.append("")
    out.append(CALLS_FN)

    # errors
    if inf.error_seen:
        out.append(
            _c("TODO errors: this 200 body has an error field; map it to {error = {message}}")
        )
        out.append("local function error_in(v) return nil end")
    else:
        out.append(
            _c(
                "errors: none in this body; a top-level error object or string is the common "
                "shape (a guess)"
            )
        )
        out.append(ERROR_FN)
        out.append("local function error_in(v)")
        out.append('  local e = type(v) == "table" and v.error or nil')
        out.append('  if type(e) == "table" or type(e) == "string" then return error_of(e) end')
        out.append("  return nil")
        out.append("end")
    out.append("")

    # request
    out.extend(request_comments)
    out.append(request_lua)
    out.append("")

    # response
    if stream:
        out.append(
            _c(
                "TODO transform_response: drafted from a stream, the non-stream shape is a guess "
                "(delta read as message, else the same keys anywhere); replay such a body"
            )
        )
    out.append(f"local DEEP = {'true' if stream else 'false'}")
    out.append(WHOLE_HOOK)
    if stream:
        if (inf.text is not None and inf.text.cumulative) or (
            inf.reasoning is not None and inf.reasoning.cumulative
        ):
            out.append(CUMULATIVE)
        out.append(_stream_hook(inf))
    out.append("return M\n")
    return "\n".join(out)


WHOLE_HOOK = """\
function M.transform_response(raw)
  local r = json.decode(raw)
  local err = error_in(r)
  if err then return json.encode({ error = err }) end
  local out = { content = text_at(r, TEXT_WHOLE) or "" }
  local thinking = text_at(r, REASONING_WHOLE)
  if thinking and thinking ~= "" then out.reasoning_content = thinking end
  local calls = calls_of(r, CALLS_WHOLE, {}, true, DEEP or CALLS_DEEP)
  if #calls > 0 then out.tool_calls = calls end
  out.finish_reason = finish_of(r, FINISH_PATHS_WHOLE, DEEP)
  out.token_usage = usage_of(r, USAGE_WHOLE, DEEP)
  return json.encode(out)
end
"""


def _stream_hook(inf: Inference) -> str:
    end = inf.end
    lines = ["function M.transform_stream_chunk(line)"]
    if end.kind == "done-sentinel":
        lines.append("  " + _c(f"end: {end.note} (the runtime also stops there)"))
        lines.append('  if line == "[DONE]" then return json.encode({ done = true }) end')
    elif end.kind == "sentinel":
        lines.append("  " + _c(f"end: {end.note} {str(end.value)!r}"))
        lines.append(
            f"  if line == {lua_str(str(end.value))} then return json.encode({{ done = true }}) end"
        )
    if inf.other_payloads and not (end.kind == "sentinel" and inf.other_payloads == [end.value]):
        extra = [p for p in inf.other_payloads if p != end.value]
        lines.append(
            "  "
            + _c(f"{len(extra)} payload(s) are not JSON (e.g. {extra[0][:30]!r}): they are skipped")
        )
        lines.append("  local ok, c = pcall(json.decode, line)")
        lines.append('  if not ok or type(c) ~= "table" then return "" end')
    else:
        lines.append("  local c = json.decode(line)")
        lines.append('  if type(c) ~= "table" then return "" end')
    lines.append("  local err = error_in(c)")
    lines.append("  if err then return json.encode({ error = err }) end")
    lines.append("  local out, any = {}, false")
    text_expr = "text_at(c, TEXT)"
    if inf.text is not None and inf.text.cumulative:
        text_expr = f'delta_of("text", {text_expr})'
    reason_expr = "text_at(c, REASONING)"
    if inf.reasoning is not None and inf.reasoning.cumulative:
        reason_expr = f'delta_of("reasoning", {reason_expr})'
    lines += [
        f"  local text = {text_expr}",
        '  if text and text ~= "" then',
        "    out.content = text",
        "    any = true",
        "  end",
        f"  local thinking = {reason_expr}",
        '  if thinking and thinking ~= "" then',
        "    out.reasoning_content = thinking",
        "    any = true",
        "  end",
        "  -- a guessed call shape is looked for only in a payload that names something",
        "  local calls = json.array()",
        "  if not CALLS_DEEP or string.find(line, '\"name\"', 1, true)"
        " or string.find(line, '\"function\"', 1, true) then",
        "    calls = calls_of(c, CALLS, FRAGMENTS, false, CALLS_DEEP)",
        "  end",
        "  if #calls > 0 then",
        "    out.tool_calls = calls",
        "    any = true",
        "  end",
        "  local finish = finish_of(c, FINISH_PATHS)",
        "  if finish then",
        "    out.finish_reason = finish",
        "    any = true",
        "  end",
        "  local usage = usage_of(c, USAGE)",
        "  if usage then",
        "    out.usage = usage",
        "    any = true",
        "  end",
    ]
    if end.kind == "flag" and end.path is not None:
        lines.append("  " + _c(f"end: {end.note}"))
        lines.append(f"  if first_at(c, {{ {lua_path(end.path)} }}) == true then")
        lines += ["    out.done = true", "    any = true", "  end"]
    elif end.kind == "value" and end.path is not None:
        lines.append("  " + _c(f"end: {end.note}"))
        lines.append(
            f"  if first_at(c, {{ {lua_path(end.path)} }}) == {lua_str(str(end.value))} then"
        )
        lines += ["    out.done = true", "    any = true", "  end"]
    elif end.kind == "key" and end.path is not None:
        lines.append("  " + _c(f"end: {end.note}"))
        lines.append(f"  if first_at(c, {{ {lua_path(end.path)} }}) ~= nil then")
        lines += ["    out.done = true", "    any = true", "  end"]
    elif end.kind == "finish":
        lines.append("  " + _c(f"end: {end.note} (the finish itself completes the answer)"))
    elif end.kind == "eof":
        # The hook never sees the end of the body, but the runtime takes a stream whose chunks
        # gave a finish_reason as complete when the body ends (OpenAI's usage chunk follows
        # its finish too): saying "stop" on every payload makes the body's end the answer's.
        lines.append(
            "  "
            + _c(
                "TODO end: nothing marks the last payload, so the end of the body is the end: "
                "every payload says finish stop (a connection cut early then reads as complete)"
            )
        )
        lines += ['  out.finish_reason = out.finish_reason or "stop"', "  any = true"]
    lines += ['  if not any then return "" end', "  return json.encode(out)", "end", ""]
    return "\n".join(lines)
