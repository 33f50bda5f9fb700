"""JSON semantics of the Lua sandbox codec (json.encode/json.decode/json.null)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from notebook_llm.adapters.lua.runtime import LuaSandbox
from notebook_llm.core.errors import ErrorCode, LlmError

SCRIPT = """
local M = {name = "j"}
function M.rt(s) return json.encode(json.decode(s, {null = json.null})) end
function M.rt_default(s) return json.encode(json.decode(s)) end
function M.run(code) return assert(load(code))() end
function M.enc_json(s) return json.encode(json.decode(s)) end
function M.echo(x) return x end
return M
"""


@pytest.fixture(scope="module")
def sb() -> LuaSandbox:
    return LuaSandbox(SCRIPT, name="j")


def rt(sb: LuaSandbox, text: str) -> str:
    out = sb.call("rt", text)
    assert isinstance(out, str)
    return out


def run(sb: LuaSandbox, code: str) -> Any:
    return sb.call("run", code)


@pytest.mark.parametrize(
    "value",
    [
        {"a": [], "b": {}, "c": [None, 1, None], "d": None},
        [[], {}, [[]], [{}]],
        {"n": 9007199254740993, "neg": -9007199254740993, "f": 1.5, "big": 1e300, "one": 1.0},
        {"s": "héllo \u00e9 \U0001f600 \u4e2d", "ctl": 'a\nb\tc\u0001\u001f"\\/'},
        {"nested": {"x": [1, [2, [3, {"y": None}]]]}},
        [True, False, None, 0, -0.5, 1e-7],
        "just a string",
        42,
    ],
)
def test_round_trip(sb: LuaSandbox, value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    out = rt(sb, text)
    back = json.loads(out)
    assert back == value
    # types are preserved: ints stay ints, floats stay floats
    assert json.dumps(back, sort_keys=True) == json.dumps(value, sort_keys=True)


def test_integers_and_floats(sb: LuaSandbox) -> None:
    assert rt(sb, "9007199254740993") == "9007199254740993"
    assert rt(sb, "[1.0, 1.5, 1e300, -0.0]") == "[1.0,1.5,1e+300,-0.0]"
    assert run(sb, "return math.type(json.decode('3'))") == "integer"
    assert run(sb, "return math.type(json.decode('3.0'))") == "float"
    assert run(sb, "return json.encode(2^53 + 1)") == "9007199254740992.0"
    assert run(sb, "return json.encode((1 << 53) + 1)") == "9007199254740993"


def test_empty_containers_and_markers(sb: LuaSandbox) -> None:
    assert rt(sb, '{"required": [], "properties": {}}') in (
        '{"required":[],"properties":{}}',
        '{"properties":{},"required":[]}',
    )
    assert run(sb, "return json.encode({})") == "{}"  # unmarked empty table -> object
    assert run(sb, "return json.encode(json.array())") == "[]"
    assert run(sb, "return json.encode(json.array({}))") == "[]"
    assert run(sb, "return json.encode(json.object())") == "{}"
    assert run(sb, "return json.encode({1, 2, 3})") == "[1,2,3]"
    assert run(sb, "return json.is_array(json.decode('[]'))") is True
    assert run(sb, "return json.is_object(json.decode('{}'))") is True


def test_null_decodes_to_nil_by_default(sb: LuaSandbox) -> None:
    # As in the reference kernel: a null field is absent, so `x ~= nil` and `x or ""` work.
    assert run(sb, "return json.decode('null') == nil") is True
    assert run(sb, "return json.decode('{\"a\":null}').a == nil") is True
    code = "local c = json.decode('{\"f\":null,\"c\":null}') return tostring(c.f ~= nil) .. (c.c or '')"
    assert run(sb, code) == "false"
    assert run(sb, "return next(json.decode('{\"a\":null}')) == nil") is True
    # an array keeps the positions of the other items; `#` counts up to the last non-null one
    assert run(sb, "local a = json.decode('[1,null,3]') return a[3] == 3 and a[2] == nil") is True
    assert run(sb, "return #json.decode('[null,null,3]')") == 3
    assert run(sb, "return #json.decode('[1,null,3]')") == 3
    assert run(sb, "return #json.decode('[null]')") == 0
    assert run(sb, "return #json.decode('[1,2,3]')") == 3
    assert sb.call("rt_default", '{"a":null,"b":[1,null,3],"c":[]}') == '{"b":[1,null,3],"c":[]}'


def test_null_sentinel(sb: LuaSandbox) -> None:
    assert run(sb, "return json.decode('null', {null = json.null}) == json.null") is True
    keep = "{null = json.null}"
    assert run(sb, f"return json.decode('[1,null,3]', {keep})[2] == json.null") is True
    assert run(sb, f"return #json.decode('[null,null,null]', {keep})") == 3
    assert run(sb, f"return json.decode('{{\"a\":null}}', {keep}).a == json.null") is True
    assert run(sb, "return json.encode({a = json.null})") == '{"a":null}'
    assert run(sb, "return tostring(json.null)") == "null"
    with pytest.raises(LlmError):
        run(sb, "json.null.x = 1")


def test_unicode_escapes(sb: LuaSandbox) -> None:
    assert run(sb, r"""return json.decode('"\\u00e9\\ud83d\\ude00\\n"')""") == "é\U0001f600\n"
    assert run(sb, r"""return json.decode('"\\ud800x"')""") == "\ufffdx"  # lone surrogate
    assert json.loads(rt(sb, '"caf\\u00e9 \\u4e2d"')) == "café 中"
    out = run(sb, 'return json.encode("a\\0b\\1c\\127")')
    assert out == '"a\\u0000b\\u0001c\\u007f"'


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "{",
        "[1,",
        '{"a" 1}',
        '{"a":1,}',
        "[1 2]",
        "nul",
        "tru",
        '"abc',
        "01x",
        "1.2.3",
        "{}x",
        '"a\nb"',
        "[-]",
        '{"a":}',
        "\\u0000",
    ],
)
def test_decode_invalid_raises(sb: LuaSandbox, bad: str) -> None:
    with pytest.raises(LlmError) as ei:
        rt(sb, bad)
    assert ei.value.code == ErrorCode.ADAPTER_ERROR
    assert "json.decode" in ei.value.message


def test_decode_error_catchable_in_lua(sb: LuaSandbox) -> None:
    msg = run(sb, "local ok, e = pcall(json.decode, '{bad'); return tostring(ok) .. ' ' .. e")
    assert msg.startswith("false json.decode:")


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        ("return json.encode({1, 2, x = 3})", "mixes"),
        ("return json.encode({[1] = 1, [3] = 3})", ""),
        ("return json.encode({[2] = 'x'})", "numeric key"),
        ("return json.encode({[true] = 1})", "key"),
        ("return json.encode({f = print})", "function"),
        ("return json.encode(0/0)", "NaN"),
        ("return json.encode(math.huge)", "infinity"),
        ("local t = {} t.t = t return json.encode(t)", "nested too deeply"),
    ],
)
def test_encode_errors(sb: LuaSandbox, code: str, fragment: str) -> None:
    with pytest.raises(LlmError) as ei:
        run(sb, code)
    assert "json.encode" in ei.value.message
    assert fragment in ei.value.message


def test_object_marked_numeric_keys_become_strings(sb: LuaSandbox) -> None:
    assert run(sb, "return json.encode(json.object({[1] = 'a'}))") == '{"1":"a"}'


def test_deep_nesting_is_an_error(sb: LuaSandbox) -> None:
    with pytest.raises(LlmError) as ei:
        rt(sb, "[" * 1000 + "]" * 1000)
    assert "nested too deeply" in ei.value.message


def test_call_conversion_uses_markers(sb: LuaSandbox) -> None:
    value = {"a": [], "b": {}, "c": [1, None, 2], "d": None, "n": 2**53 + 1, "f": 2.0}
    assert sb.call("echo", value) == value
    assert sb.call("echo", [None, []]) == [None, []]
    assert sb.call("echo", None) is None
    assert sb.call("echo", "text") == "text"
    assert sb.call("echo", 7) == 7
    assert run(sb, "return json.null") is None


def test_decode_marks_tables_from_python_args(sb: LuaSandbox) -> None:
    code = "return function(t) return json.encode(t) end"
    inner = LuaSandbox(f"local f = (function() {code} end)() return {{f = f}}", name="inner")
    assert inner.call("f", {"x": []}) == '{"x":[]}'
    assert inner.call("f", {"x": {}}) == '{"x":{}}'
    assert inner.call("f", {"x": [None]}) == '{"x":[null]}'


def test_decoded_objects_keep_their_key_order_when_re_encoded() -> None:
    from notebook_llm.adapters.lua.runtime import LuaSandbox

    sb = LuaSandbox(
        "return { transform_request = function(s) local t = json.decode(s); t.added = 1; "
        "t.b_extra = 2; return json.encode(t) end, transform_stream_chunk = function(s) return s end }",
        name="order",
    )
    schema = '{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"},"mid":{}},"required":["zeta","alpha"]}'
    out = sb.call("transform_request", schema)
    assert out == (
        '{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"},'
        '"mid":{}},"required":["zeta","alpha"],"added":1,"b_extra":2}'
    )


def test_objects_built_by_a_script_encode_in_a_stable_sorted_order() -> None:
    from notebook_llm.adapters.lua.runtime import LuaSandbox

    sb = LuaSandbox(
        "return { transform_request = function(s) return json.encode({ zz = 1, aa = 2, mm = { y = 1, b = 2 } }) end,"
        " transform_stream_chunk = function(s) return s end }",
        name="sorted",
    )
    assert sb.call("transform_request", "{}") == '{"aa":2,"mm":{"b":2,"y":1},"zz":1}'


@pytest.mark.parametrize(
    ("opts", "fragment"),
    [("5", "must be a table"), ("json.null", "must be a table"), ("{null = {}}", "json.null")],
)
def test_decode_options_are_checked(sb: LuaSandbox, opts: str, fragment: str) -> None:
    with pytest.raises(LlmError) as ei:
        run(sb, f"return json.decode('[null]', {opts})")
    assert fragment in ei.value.message


def test_duplicate_keys_with_null_encode_once(sb: LuaSandbox) -> None:
    # the last value wins (as in the kernel); a key that was null first is not listed twice
    out = run(sb, """return json.encode(json.decode('{"a":null,"a":1,"b":2,"a":null,"a":3}'))""")
    assert out == '{"a":3,"b":2}'


def test_kernel_faithful_edges(sb: LuaSandbox) -> None:
    # a number is read as its text, as the kernel's string check does
    assert run(sb, "return json.decode(42)") == 42
    # an unmarked empty table encodes as {} (as in the kernel); a decoded [] stays []
    assert run(sb, "return json.encode({})") == "{}"
    assert run(sb, "return json.encode(json.decode('{\"a\":[]}'))") == '{"a":[]}'
    # kernel scripts' guard: invalid input makes pcall return false, so `if not ok` skips it
    code = (
        "local ok, chunk = pcall(json.decode, '[DONE]') "
        "if not ok or chunk == nil then return 'skipped' end return 'used'"
    )
    assert run(sb, code) == "skipped"
    # integers print and compare as the kernel's numbers do
    assert run(sb, "local n = json.decode('{\"n\":3}').n return tostring(n) .. ' ' .. n") == "3 3"
    assert run(sb, "return json.decode('3') == 3.0 and json.decode('2.5') * 2 == 5") is True


ONE_FIELD = """
local M = { name = "one-field" }
-- The same json.encode under two hook names: transform_stream_chunk runs the hot path (where
-- a one-string-field object has its own fast path), general the general encoder.
local function enc(code) return assert(load(code))() end
M.transform_stream_chunk = enc
M.general = enc
return M
"""


@pytest.mark.parametrize(
    "code",
    [
        'return json.encode({content = "tok "})',
        'return json.encode({content = "a\\"b\\\\c\\n\\t\\1\\127 é 😀"})',
        'return json.encode({["we\\"ird\\nkey"] = "v"})',
        'return json.encode(json.object({content = ""}))',
        # not one string field: the general path in both
        "return json.encode({content = 1})",
        "return json.encode({content = true})",
        'return json.encode({content = "x", finish_reason = "stop"})',
        "return json.encode(json.object({[1] = 'x'}))",
        "return json.encode({})",
        "return json.encode(json.array({}))",
        'return json.encode({"x"})',
    ],
)
def test_one_string_field_fast_path_encodes_like_the_general_path(code: str) -> None:
    sb = LuaSandbox(ONE_FIELD, name="one-field")
    results, error = sb.call_each("transform_stream_chunk", [code])
    assert error is None
    expected = sb.call("general", code)
    assert json.loads(results[0]) == json.loads(expected)
    if code.count("=") <= 1 and "json.array" not in code and '{"x"}' not in code:
        assert results[0] == expected  # one key: the very same text


def test_one_string_field_fast_path_keeps_the_encode_errors() -> None:
    sb = LuaSandbox(ONE_FIELD, name="one-field")
    bad = "return json.encode({content = 'x', [2] = 'y'})"
    results, error = sb.call_each("transform_stream_chunk", [bad])
    assert results == []
    assert error is not None
    assert "numeric key" in error.message


def test_keys_and_values_are_escaped_every_time_in_both_encoders() -> None:
    # Key texts are cached (up to a bound) and strings are checked with one anchored match:
    # every special character must still be escaped, the first time and the thousandth, in
    # the general encoder and in the stream hot path's.
    script = """
    local M = { name = "keys" }
    local function many()
      local t = {}
      for i = 1, 1500 do t['k"\\\\' .. i .. "\\1"] = 'v\\n"' .. i .. "\\127" end
      return t
    end
    function M.general() return json.encode(many()) end
    function M.transform_stream_chunk(s)
      if s == "many" then return json.encode(many()) end
      return json.encode({ [s] = s })
    end
    return M
    """
    sb = LuaSandbox(script, name="keys")
    want = {f'k"\\{i}\x01': f'v\n"{i}\x7f' for i in range(1, 1501)}
    for _ in range(2):
        assert json.loads(sb.call("general")) == want
        results, error = sb.call_each("transform_stream_chunk", ["many", 'a"b', "c\\d", "\x02"] * 2)
        assert error is None
        assert [json.loads(r) for r in results] == [
            want,
            {'a"b': 'a"b'},
            {"c\\d": "c\\d"},
            {"\x02": "\x02"},
        ] * 2
