"""The templates of the sandbox's json.decode (stream hot path) against the general decoder.

In ``transform_stream_chunk`` json.decode learns the shape of a stream's payloads as data (a
constant prefix, a pattern whose captures are the values that changed, a constant suffix, and
the tables to make) and decodes later payloads of that shape through it, with no Lua code made at
run time (see ``notebook_llm/adapters/lua/json.lua``). The general decoder, used by every other
hook, is the reference: for any text, valid or not, the hot path must give the same value (types,
nulls, [] vs {}) or the same error message, with nulls decoded to nil (the default) and to
json.null (``{null = json.null}``). ``LuaSandbox.json_stats`` counts the templates' hits.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notebook_llm.adapters.lua import runtime
from notebook_llm.adapters.lua.runtime import LuaSandbox

# probe(text) -> {"ok": [value], "kept": [value with json.null]} or {"err": message}; the same
# function under two hook names:
# transform_stream_chunk runs the hot path (templates), general the general decoder.
SCRIPT = """
local M = { name = "shapes" }
-- Each text is decoded twice: nulls as nil (the default) and as json.null (the option).
local KEEP = { null = json.null }
local function probe(line)
  local ok, v = pcall(json.decode, line)
  if not ok then return json.encode({ err = v }) end
  local _, kept = pcall(json.decode, line, KEEP)
  local encoded, s = pcall(json.encode, json.array({ v }))
  if not encoded then return json.encode({ encode_err = s }) end -- e.g. 1e400 is inf
  local _, k = pcall(json.encode, json.array({ kept }))
  return '{"ok":' .. s .. ',"kept":' .. k .. "}"
end
M.transform_stream_chunk = probe
M.general = probe
return M
"""
# One decode per text (nulls as nil), for the tests that count the templates' hits.
SCRIPT_ONE = SCRIPT.replace("local _, kept = pcall(json.decode, line, KEEP)", "local kept = v")


def canonical(out: str) -> str:
    # sort_keys: the two paths may order keys differently; ints/floats, null, [] and {} stay
    # distinct in the dump.
    return json.dumps(json.loads(out), sort_keys=True)


def hot(sb: LuaSandbox, texts: list[str]) -> list[str]:
    results, error = sb.call_each("transform_stream_chunk", texts)
    assert error is None
    return [canonical(r) for r in results]


def general(sb: LuaSandbox, texts: list[str]) -> list[str]:
    return [canonical(sb.call("general", t)) for t in texts]


CHUNK = (
    '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1732900000,"model":"m",'
    '"choices":[{"index":0,"delta":{"content":"%s"},"logprobs":null,"finish_reason":null}]}'
)


@pytest.fixture(autouse=True, scope="module")
def _learn_from_the_first_text() -> Any:
    """The tests here count hits from the first text on: no warmup (its own test sets one).
    Module-scoped, so the property tests run under it too."""
    warmup, runtime.JSON_TEMPLATE_WARMUP = runtime.JSON_TEMPLATE_WARMUP, 0
    yield
    runtime.JSON_TEMPLATE_WARMUP = warmup


def test_a_short_stream_learns_no_shape_and_a_long_one_does_after_the_warmup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Learning a shape costs more than a dozen payloads save, and a sandbox serves one request:
    # a map row paid it (about 2 ms, 1.4x its CPU) and never gained.
    monkeypatch.setattr(runtime, "JSON_TEMPLATE_WARMUP", 32)
    sb = LuaSandbox(SCRIPT_ONE, name="shapes")
    short = [CHUNK.replace("%s", f"tok{i} ") for i in range(12)]
    assert hot(sb, short) == general(sb, short)
    assert sb.json_stats() == {"hits": 0, "learned": 0, "paused": 0}
    more = [CHUNK.replace("%s", f"more{i} ") for i in range(50)]
    assert hot(sb, more) == general(sb, more)
    # 20 more texts of warmup, then one notes the outline, the next is learned, the rest hit
    assert sb.json_stats() == {"hits": 50 - 20 - 2, "learned": 1, "paused": 0}


def test_a_learned_shape_decodes_later_chunks() -> None:
    sb = LuaSandbox(SCRIPT_ONE, name="shapes")
    texts = [CHUNK.replace("%s", f"tok{i} ") for i in range(50)]
    assert hot(sb, texts) == general(sb, texts)
    # text 1 only notes its outline, text 2 (the outline seen again) is learned, the rest hit
    assert sb.json_stats() == {"hits": 48, "learned": 1, "paused": 0}


def test_a_shape_is_learned_the_second_time_its_outline_is_seen() -> None:
    # A stream's one-off chunks (the role header, the finish, the usage) are never learned:
    # learning costs about ten decodes, and a short answer would not use what it learned.
    sb = LuaSandbox(SCRIPT_ONE, name="shapes")
    role = CHUNK.replace('{"content":"%s"}', '{"role":"assistant","content":""}')
    finish = CHUNK.replace('{"content":"%s"}', "{}").replace(
        '"finish_reason":null', '"finish_reason":"stop"'
    )
    usage = '{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}'
    texts = [role, CHUNK.replace("%s", "a"), CHUNK.replace("%s", "b"), finish, usage]
    assert hot(sb, texts) == general(sb, texts)
    assert sb.json_stats()["learned"] == 1  # the text deltas' shape, at its second text
    more = [CHUNK.replace("%s", f"t{i}") for i in range(5)]
    assert hot(sb, more) == general(sb, more)
    assert sb.json_stats()["hits"] == 5
    # Structural characters inside a string are part of its value, not of the outline. A value
    # the template held constant (y) that changes is a miss that widens the template.
    odd = ['{"x":"a, b","y":1}', '{"x":"c","y":1}', '{"x":"d","y":2}', '{"x":"e","y":3}']
    assert hot(sb, odd) == general(sb, odd)
    assert sb.json_stats() == {"hits": 5 + 1, "learned": 3, "paused": 0}


def test_padding_of_any_length_fits_the_shape() -> None:
    # Anthropic pads its events with a run of spaces of varying length before the last brace.
    sb = LuaSandbox(SCRIPT_ONE, name="shapes")
    texts = [
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"t'
        + str(i)
        + '"}'
        + " " * (i % 7 + 1)
        + "}"
        for i in range(30)
    ]
    assert hot(sb, texts) == general(sb, texts)
    assert sb.json_stats() == {"hits": 28, "learned": 1, "paused": 0}


def test_values_of_another_type_fall_back_to_the_general_decoder() -> None:
    sb = LuaSandbox(SCRIPT, name="shapes")
    base = '{"a":"x","n":1,"f":1.5,"b":[true,null],"o":{},"e":[]}'
    # base twice: the second is learned (see test_a_shape_is_learned_the_second_time_its_outline_is_seen)
    variants = [
        '{"a":"y","n":2,"f":-0.25e-3,"b":[true,null],"o":{},"e":[]}',  # same shape
        '{"a":1,"n":2,"f":1.5,"b":[true,null],"o":{},"e":[]}',  # number where a string was
        '{"a":"x","n":"2","f":1.5,"b":[true,null],"o":{},"e":[]}',  # string where a number was
        '{"a":"x","n":2,"f":1.5,"b":[true,null,1],"o":{},"e":[]}',  # longer array
        '{"a":"x","n":2,"f":1.5,"b":[true,null],"o":{"k":1},"e":[]}',  # non-empty object
        '{"a":"x","n":2,"f":1.5,"b":[true,null],"o":{},"e":[],"z":0}',  # extra key
        '{"a":"x", "n":2,"f":1.5,"b":[true,null],"o":{},"e":[]}',  # other spacing
        '{"a":"x","n":2,"f":1.5,"b":[true,null],"o":{},"e":[]}  \n',  # trailing whitespace
    ]
    texts = [base, base, *variants]
    assert hot(sb, texts) == general(sb, texts)


@pytest.mark.parametrize(
    "value",
    [
        # escapes inside a captured string value
        r"a\nb",
        r"q\"uote",
        r"back\\",
        r"back\\\\",
        r"\u00e9\ud83d\ude00",
        r"\ud83d",  # lone high surrogate -> U+FFFD
        r"\udc00",  # lone low surrogate -> U+FFFD
        r"\/",
        # invalid: the general decoder's error must come out
        r"bad\x",
        r"bad\u12",
        "raw\x01control",
        "del\x7f",
        "é€中😀",
    ],
)
def test_string_values_match_the_general_decoder(value: str) -> None:
    sb = LuaSandbox(SCRIPT, name="shapes")
    # learned as the same text (no value changes) and as a changed content
    texts = [CHUNK.replace("%s", "learn")] * 2 + [CHUNK.replace("%s", value)]
    texts += [CHUNK.replace("%s", "a"), CHUNK.replace("%s", "b"), CHUNK.replace("%s", value)]
    assert hot(sb, texts) == general(sb, texts)


def test_an_escaped_closing_quote_is_not_taken_for_the_real_one() -> None:
    # The shape '{"a":"(..)","b":"(..)"}' matches this text if the capture stops at the escaped
    # quote after p\ ; the real string is  p","b":  and the text is invalid JSON.
    sb = LuaSandbox(SCRIPT, name="shapes")
    texts = ['{"a":"x","b":"y"}'] * 2 + [r'{"a":"p\","b":"q"}', r'{"a":"p\\","b":"q"}']
    out = hot(sb, texts)
    assert out == general(sb, texts)
    assert "err" in json.loads(out[2])
    assert json.loads(out[3])["ok"] == [{"a": "p\\", "b": "q"}]


@pytest.mark.parametrize(
    ("content", "ok"),
    [
        (r"say \"hi\"", True),
        (r"\"\\", True),
        (r"\\\"", True),
        (r"\"\u0022\/", True),
        (r"\q", False),  # invalid escape
        (r"\"\q", False),  # \" plus a real \q: \q must not read as a quote
        (r"\"\\q", True),  # \\ then a plain q
        (r"\"\x", False),
    ],
)
def test_escaped_quotes_in_values(content: str, ok: bool) -> None:
    sb = LuaSandbox(SCRIPT_ONE, name="shapes")
    # two texts whose contents differ: the content is the template's one changed value
    texts = [CHUNK.replace("%s", "learn"), CHUNK.replace("%s", "again")]
    texts.append(CHUNK.replace("%s", content))
    out = hot(sb, texts)
    assert out == general(sb, texts)
    assert ("ok" in json.loads(out[2])) is ok
    if ok and "\\q" not in content:  # a text holding "\q" anywhere goes to the general path
        assert sb.json_stats()["hits"] == 1


@pytest.mark.parametrize(
    "number",
    [
        "0",
        "-0",
        "12",
        "-3.25e-7",
        "1E+2",
        "1e400",
        "9007199254740993",
        "-9223372036854775808",
        "9223372036854775808",
        "1.0",
        # accepted or refused exactly as the general decoder does
        "01",
        "1.",
        "-",
        "1e",
        "1.2.3",
        "--1",
        "1e5e5",
        "1-2",
    ],
)
def test_numbers_match_the_general_decoder(number: str) -> None:
    sb = LuaSandbox(SCRIPT, name="shapes")
    # A shape learned from an ordinary text meets the number, and one learned from the number
    # (when it is valid) meets an ordinary text; each shape is learned from its second text.
    obj = '{"n":' + number + ',"s":"x"}'
    texts = ['{"n":7,"s":"x"}'] * 2 + [obj, "[5]", "[5]", f"[{number}]"]
    texts += [obj, obj, '{"n":7,"s":"x"}', f"[{number}]", "[5]"]
    assert hot(sb, texts) == general(sb, texts)


def test_duplicate_keys_are_never_learned() -> None:
    sb = LuaSandbox(SCRIPT_ONE, name="shapes")
    texts = ['{"a":1,"a":2}', '{"a":3,"a":4}']
    assert (
        hot(sb, texts)
        == general(sb, texts)
        == [
            canonical('{"ok":[{"a":2}],"kept":[{"a":2}]}'),
            canonical('{"ok":[{"a":4}],"kept":[{"a":4}]}'),
        ]
    )


def test_shapes_pause_when_every_text_differs() -> None:
    sb = LuaSandbox(SCRIPT_ONE, name="shapes")
    texts = [f'{{"k{i}":1}}' for i in range(200)]
    assert hot(sb, texts) == general(sb, texts)
    assert sb.json_stats() == {"hits": 0, "learned": 0, "paused": 1}


def test_other_hooks_use_the_general_decoder_and_keep_key_order() -> None:
    sb = LuaSandbox(
        SCRIPT_ONE.replace(
            "return M", "function M.rt(s) return json.encode(json.decode(s)) end\nreturn M"
        ),
        name="shapes",
    )
    text = '{"zeta":1,"alpha":{"y":1,"b":2},"mid":[]}'
    hot(sb, [text, text, text])  # learn the shape in the hot path, and use it once
    assert sb.call("rt", text) == text
    assert sb.json_stats()["hits"] == 1  # only the hot path's third text


def test_a_long_digit_run_before_junk_does_not_hang() -> None:
    # The general decoder once matched number and separator with one pattern, which backtracked
    # through every split of the digits (O(n^3) in one C call: 2,000 digits took 33 s, beyond the
    # CPU hook's reach). 20,000 digits would take hours that way.
    sb = LuaSandbox(SCRIPT, name="shapes")
    text = '{"a":' + "1" * 20_000 + "x}"
    box: list[Any] = []
    worker = threading.Thread(target=lambda: box.append(sb.call("general", text)), daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "json.decode hung on a long digit run"
    assert "expected ',' or '}'" in json.loads(box[0])["err"]


# ---------------------------------------------------------------------------- differential fuzz

KEYS = st.sampled_from(["a", "b", "id", "content", "tool_calls", "x y", "é"])
STRING_PIECES = st.sampled_from(
    [
        "a",
        " ",
        "é",
        "😀",
        r"\n",
        r"\"",
        r"\\",
        "\\",  # a lone backslash: escapes whatever follows, possibly the closing quote
        r"\u00e9",
        r"\ud83d\ude00",
        r"\ud83d",
        r"\x",
        r"\q",  # invalid; also the hot path's own spelling of \" (it must not be confused)
        r"\\q",
        "\x01",
        "\x7f",
        '"',  # a raw quote ends the string early
        '","a":"',  # looks like the next member
    ]
)
NUMBERS = st.sampled_from(
    [
        "0",
        "-0",
        "7",
        "-12",
        "1.5",
        "1e5",
        "1E-2",
        "2.5e+3",
        "9007199254740993",
        "01",
        "1.",
        "-",
        "1e",
    ]
)


@st.composite
def leaf(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["s", "s", "s", "n", "n", "lit"]))
    if kind == "s":
        return '"' + "".join(draw(st.lists(STRING_PIECES, max_size=4))) + '"'
    if kind == "n":
        return draw(NUMBERS)
    return draw(st.sampled_from(["true", "false", "null"]))


# A shape: nested lists/dicts whose leaves are placeholders; rendering fills the leaves.
shapes = st.recursive(
    st.just(None),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def render(draw: st.DrawFn, shape: Any, sep: str) -> str:
    if shape is None:
        return draw(leaf())
    if isinstance(shape, list):
        return "[" + sep.join(draw(render(item, sep)) for item in shape) + "]"
    members = [
        json.dumps(k, ensure_ascii=False) + ":" + draw(render(v, sep)) for k, v in shape.items()
    ]
    return "{" + sep.join(members) + "}"


@st.composite
def text_series(draw: st.DrawFn) -> list[str]:
    shape = draw(shapes)
    sep = draw(st.sampled_from([",", ", "]))
    return [draw(render(shape, sep)) for _ in range(draw(st.integers(3, 9)))]


@settings(
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(text_series(), min_size=1, max_size=3))
def test_the_hot_path_agrees_with_the_general_decoder(series: list[list[str]]) -> None:
    sb = LuaSandbox(SCRIPT, name="shapes")
    texts = [t for s in series for t in s]
    assert hot(sb, texts) == general(sb, texts)


def test_invalid_texts_count_as_misses() -> None:
    # Texts that match the shapes' patterns but are invalid JSON (a bad escape) must pause the
    # cache like any other miss, not cost a shape attempt each forever.
    sb = LuaSandbox(SCRIPT_ONE, name="shapes")
    good = ['["x",1,1,1]', '["y",2,1,1]', '["z",3,1,1]']
    bad = ['["' + "a" * 50 + r"\x" + '",1,1,1]'] * 100
    assert hot(sb, good + bad) == general(sb, good + bad)
    assert sb.json_stats()["learned"] >= 1
    assert sb.json_stats()["paused"] == 1


# ---------------------------------------------------------------------------- constant prefixes

LONG_ID = "chatcmpl-" + "x" * 40


def test_texts_sharing_a_prefix_skip_it_with_one_comparison() -> None:
    sb = LuaSandbox(SCRIPT_ONE, name="shapes")
    texts = [CHUNK.replace("chatcmpl-1", LONG_ID).replace("%s", f"tok{i} ") for i in range(40)]
    assert hot(sb, texts) == general(sb, texts)
    # text 2 is learned (the values before the delta are the same: its prefix), the rest hit
    assert sb.json_stats() == {"hits": 38, "learned": 1, "paused": 0}


def test_a_changed_prefix_value_falls_back_to_the_full_shape() -> None:
    sb = LuaSandbox(SCRIPT_ONE, name="shapes")
    texts = [CHUNK.replace("chatcmpl-1", LONG_ID).replace("%s", f"tok{i} ") for i in range(10)]
    # The same shape, but every value before the delta differs in turn: the template must not
    # hand back the values it remembers.
    texts += [
        texts[5].replace(LONG_ID, LONG_ID[:-1] + "y"),
        texts[5].replace("1732900000", "1732900001"),
        texts[5].replace('"model":"m"', '"model":"n"'),
        texts[5].replace('"index":0', '"index":7'),
        texts[5].replace('"index":0', '"index":0.5'),
        texts[5].replace('"index":0', '"index":"0"'),
        texts[5].replace('"logprobs":null', '"logprobs":[]'),
        texts[5].replace('"finish_reason":null', '"finish_reason":"stop"'),
        texts[5].replace("}]}", "}]} \n"),
        texts[5].replace('"content":"tok5 "', '"content":"a\\"b\\u00e9\\\\"'),
        texts[5].replace('"content":"tok5 "', '"content":"a\\nb\\u00e9\\/"'),  # no \"
        texts[5].replace('"content":"tok5 "', '"content":"a\\x"'),  # invalid escape
        texts[5] + "x",  # trailing junk
        texts[5],
    ]
    out = hot(sb, texts)
    assert out == general(sb, texts)
    assert json.loads(out[-3])["err"].startswith("json.decode: invalid escape")
    assert json.loads(out[-1])["ok"][0]["id"] == LONG_ID
    delta = json.loads(out[-4])["ok"][0]["choices"][0]["delta"]
    assert delta == {"content": "a\nb\u00e9/"}


def test_a_prefix_holding_an_escape_decodes_as_learned() -> None:
    sb = LuaSandbox(SCRIPT_ONE, name="shapes")
    escaped = LONG_ID + "\\n"
    texts = [CHUNK.replace("chatcmpl-1", escaped).replace("%s", f"tok{i} ") for i in range(10)]
    assert hot(sb, texts) == general(sb, texts)
    assert sb.json_stats()["hits"] == 8  # its constant value is the one the first text decoded


PREFIX_VALUES = st.sampled_from(
    ['"' + "p" * 40 + '"', '"' + "p" * 39 + 'q"', "1234567890123456789012345678901234", "true"]
)


@st.composite
def prefixed_series(draw: st.DrawFn) -> list[str]:
    # A series of one shape whose first member is long and mostly the same: the texts share a
    # prefix often enough for templates with a long constant prefix to be made and used, and
    # to stop fitting.
    shape = draw(shapes)
    sep = draw(st.sampled_from([",", ", "]))
    main = draw(PREFIX_VALUES)
    rests = [draw(render(shape, sep)) for _ in range(2)]
    texts = []
    for _ in range(draw(st.integers(4, 12))):
        head = draw(st.sampled_from([main, main, main]) | PREFIX_VALUES)
        rest = draw(st.sampled_from(rests) | render(shape, sep))
        texts.append('{"head":' + head + sep + '"rest":' + rest + "}")
    return texts


@settings(
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(prefixed_series(), min_size=1, max_size=3))
def test_constant_prefixes_agree_with_the_general_decoder(series: list[list[str]]) -> None:
    sb = LuaSandbox(SCRIPT, name="shapes")
    texts = [t for s in series for t in s]
    assert hot(sb, texts) == general(sb, texts)


# ---------------------------------------------------------------------------- what a hit hands out


def test_each_hit_makes_new_tables_a_script_may_change() -> None:
    # A script that changes what json.decode gave it (a member set, one removed, a table
    # marked again) changes nothing that a later decode of the same template gives.
    script = """
local M = { name = "mutates" }
function M.transform_stream_chunk(line)
  local c = json.decode(line)
  local before = json.encode(c)
  c.id = "changed"; c.extra = { 1 }; c.choices[1].delta.content = nil
  c.choices[1].delta = json.array({})
  c.choices[2] = "more"
  return json.encode({ content = before })
end
return M
"""
    sb = LuaSandbox(script, name="mutates")
    texts = [CHUNK.replace("%s", f"tok{i}") for i in range(6)]
    results, error = sb.call_each("transform_stream_chunk", texts)
    assert error is None
    expected = []
    for text in texts:
        value = json.loads(text)
        del value["choices"][0]["logprobs"], value["choices"][0]["finish_reason"]  # null: nil
        expected.append(value)
    assert [json.loads(json.loads(r)["content"]) for r in results] == expected
    assert sb.json_stats()["hits"] == 4


def test_no_lua_code_is_made_at_run_time() -> None:
    # The templates are data read by fixed functions: json.lua compiles nothing (the shape
    # cache that generated Lua source and compiled it with a captured `load` is gone for good).
    source = (Path(runtime.__file__).parent / "json.lua").read_text()
    code = "\n".join(line.split("--", 1)[0] for line in source.splitlines())
    assert "load" not in code
    assert "dump" not in code
