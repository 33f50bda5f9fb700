"""A typed answer's JSON Schema means what the user's schema means: when an answer is validated
and in the copy sent to providers (its ``$ref`` s inlined), on the official JSON Schema Test
Suite's ``$ref``/``$defs`` cases and on cases of our own; a schema whose definitions reuse each
other is refused in one line instead of expanding to 2^depth; tool arguments and answers are
checked by one validator, and a pydantic answer never imports it."""

from __future__ import annotations

import importlib.util
import json
import math
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from notebook_llm.core.errors import ErrorCode, LlmError
from notebook_llm.core.json_schema_check import check
from notebook_llm.core.response_schema import as_schema
from tests.child_python import run_python

SUITE = Path(__file__).parent / "fixtures" / "json_schema_test_suite"
#: Wall-clock seconds a child process gets (the answers here take well under one).
LIMIT = 60.0


def _suite_cases() -> list[tuple[str, dict[str, Any]]]:
    cases = []
    for name in ("ref.json", "defs.json"):
        for case in json.loads((SUITE / name).read_text()):
            cases.append((f"{name}: {case['description']}", case))
    return cases


def _verdict(schema: Any, text: str) -> bool:
    try:
        schema.validate(text)
    except LlmError as err:
        if err.code != ErrorCode.SCHEMA_MISMATCH:
            raise
        return False
    return True


def test_the_official_ref_and_defs_cases_keep_their_verdicts() -> None:
    """Every case of the suite: jsonschema's own verdict is the suite's; a schema as_schema
    takes gives the suite's verdict on every instance, validated and as sent (inlined); one it
    refuses is refused in one line (a remote $ref, a nested $id, an anchor...)."""
    taken, refused = [], []
    for name, case in _suite_cases():
        original = jsonschema.Draft202012Validator(case["schema"])
        for test in case["tests"]:
            assert original.is_valid(test["data"]) == test["valid"], (name, test["description"])
        try:
            schema = as_schema(case["schema"])
        except LlmError as err:
            refused.append((name, err.code, err.message))
            continue
        taken.append(name)
        sent = jsonschema.Draft202012Validator(schema.schema)
        for test in case["tests"]:
            where = (name, test["description"])
            assert _verdict(schema, json.dumps(test["data"])) == test["valid"], where
            assert sent.is_valid(test["data"]) == test["valid"], (*where, schema.schema)
    for name, code, message in refused:
        assert code == ErrorCode.INVALID_OPTIONS, name
        assert "\n" not in message, name
    # the cases about local $refs are all taken (only $id, URN, anchor and remote ones are not)
    assert len(taken) >= 16, taken
    assert "ref.json: ref applies alongside sibling keywords" in taken
    assert "ref.json: escaped pointer ref" in taken
    assert "ref.json: naive replacement of $ref with its destination is not correct" in taken
    assert "ref.json: property named $ref, containing an actual $ref" in taken
    assert "ref.json: ref creates new scope when adjacent to keywords" in taken


# ------------------------------------------------------------------ siblings, names and data

SIBLINGS = {
    "$defs": {"Count": {"type": "integer", "minimum": 1}},
    "type": "object",
    "properties": {"n": {"$ref": "#/$defs/Count", "maximum": 3}},
    "required": ["n"],
}


@pytest.mark.parametrize(
    ("schema", "answers"),
    [
        # a $ref's siblings add to the target (2019-09 on): both bounds hold
        (SIBLINGS, {'{"n": 2}': True, '{"n": 0}': False, '{"n": 4}': False}),
        # siblings that read each other's group are combined, not merged: the target forbids
        # every property, and the sibling's "properties" must not lift that
        (
            {
                "$defs": {"Closed": {"type": "object", "additionalProperties": False}},
                "$ref": "#/$defs/Closed",
                "properties": {"a": {"type": "integer"}},
            },
            {"{}": True, '{"a": 1}': False},
        ),
        # the same keyword on both sides with different values: both apply
        (
            {
                "$defs": {"S": {"type": "string", "maxLength": 5}},
                "$ref": "#/$defs/S",
                "maxLength": 2,
            },
            {'"ab"': True, '"abc"': False},
        ),
        # a property named $defs or definitions is a property, at every level
        (
            {
                "type": "object",
                "properties": {
                    "$defs": {"type": "string"},
                    "inner": {
                        "type": "object",
                        "properties": {"definitions": {"type": "integer"}},
                        "required": ["definitions"],
                    },
                },
                "required": ["$defs", "inner"],
            },
            {
                '{"$defs": "x", "inner": {"definitions": 1}}': True,
                '{"$defs": 1, "inner": {"definitions": 1}}': False,
                '{"$defs": "x", "inner": {}}': False,
            },
        ),
        # an enum value shaped like a reference is data, not a reference
        (
            {"$defs": {"X": {"type": "integer"}}, "enum": [{"$ref": "#/$defs/X"}, 3]},
            {'{"$ref": "#/$defs/X"}': True, "3": True, "5": False},
        ),
        # a draft-07 schema: there, $ref hides its siblings, in both copies
        (
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "definitions": {"X": {"type": "integer"}},
                "properties": {"n": {"$ref": "#/definitions/X", "maximum": 3}},
            },
            {'{"n": 9}': True, '{"n": "a"}': False},
        ),
        # a pointer with escapes, and a boolean target
        (
            {
                "$defs": {"a/b": {"type": "integer"}, "no": False},
                "properties": {"x": {"$ref": "#/$defs/a~1b"}, "y": {"$ref": "#/$defs/no"}},
            },
            {'{"x": 1}': True, '{"x": "1"}': False, '{"y": 1}': False},
        ),
    ],
)
def test_what_is_sent_and_what_is_checked_mean_the_users_schema(
    schema: dict[str, Any], answers: dict[str, bool]
) -> None:
    checked = as_schema(schema)
    users = jsonschema.validators.validator_for(schema)(schema)
    sent = jsonschema.Draft202012Validator(checked.schema)
    for text, valid in answers.items():
        assert users.is_valid(json.loads(text)) == valid, text  # the case itself is right
        assert _verdict(checked, text) == valid, text
        assert sent.is_valid(json.loads(text)) == valid, (text, checked.schema)


def test_a_refused_schema_says_why_in_one_line() -> None:
    for schema, words in [
        ({"$ref": "https://example.com/s.json"}, "is not local"),
        ({"$ref": "#/$defs/missing", "$defs": {}}, "points nowhere"),
        ({"properties": {"a": {"$id": "https://x/y", "type": "integer"}}}, "$id below the root"),
        ({"type": "string", "pattern": "(?=a)b"}, "cannot run in linear time"),
        ({"type": "strnig"}, "not a valid JSON Schema"),
    ]:
        with pytest.raises(LlmError) as err:
            as_schema(schema)
        assert err.value.code == ErrorCode.INVALID_OPTIONS
        assert words in err.value.message
        assert "\n" not in err.value.message


# ------------------------------------------------------------------ expansion bounded


def _run(code: str) -> str:
    return run_python(code, limit=LIMIT, what=f"\n{textwrap.indent(code, '  ')}\n")


#: A0 = anyOf[A1, A1], A1 = anyOf[A2, A2], ...: about 1.6 KB that inlines to 2^depth nodes.
_REUSED = """
defs = {f"A{i}": {"anyOf": [{"$ref": f"#/$defs/A{i+1}"}, {"$ref": f"#/$defs/A{i+1}"}]}
        for i in range(%d)}
defs["A%d"] = {"type": "string"}
schema = {"$defs": defs, "$ref": "#/$defs/A0"}
"""


@pytest.mark.parametrize("combinator", ["anyOf", "allOf", "oneOf"])
def test_definitions_that_reuse_each_other_are_refused_in_one_line(combinator: str) -> None:
    setup = (_REUSED % (26, 26)).replace("anyOf", combinator)
    out = _run(
        setup + "import json\nassert 1400 < len(json.dumps(schema)) < 2200\n"
        "from notebook_llm.core.response_schema import as_schema\n"
        "from notebook_llm.core.errors import LlmError\n"
        "try:\n    as_schema(schema)\nexcept LlmError as err:\n    print(err.code, err.message)\n"
    )
    assert out.startswith("INVALID_OPTIONS")
    assert "inlined" in out
    assert out.count("\n") == 1


def test_pydantic_models_that_reuse_each_other_are_refused_in_one_line() -> None:
    out = _run(
        "import pydantic\n"
        "models = {'M20': pydantic.create_model('M20', x=(str, ...))}\n"
        "for i in range(19, -1, -1):\n"
        "    nxt = models[f'M{i+1}']\n"
        "    models[f'M{i}'] = pydantic.create_model(f'M{i}', a=(nxt, ...), b=(nxt, ...))\n"
        "from notebook_llm.core.response_schema import as_schema\n"
        "from notebook_llm.core.errors import LlmError\n"
        "try:\n    as_schema(models['M0'])\nexcept LlmError as err:\n    print(err.code, err.message)\n"
    )
    assert out.startswith("INVALID_OPTIONS")
    assert "inlined" in out


@pytest.mark.parametrize("combinator", ["anyOf", "oneOf"])
def test_checking_against_branching_references_ends(combinator: str) -> None:
    """Tool arguments are checked against the tool's own schema, not inlined: the step budget
    ends a check whose references branch (flat, or recursive through a deep value)."""
    flat = (_REUSED % (30, 30)).replace("anyOf", combinator)
    out = _run(
        flat + "from notebook_llm.core.json_schema_check import check\nprint(check(1, schema))\n"
        "node = {'anyOf': [{'type': 'object', 'properties': {'x': {'$ref': '#'}}}] * 2}\n"
        "value = 0\n"
        "for _ in range(40):\n    value = {'x': value}\n"
        "print(check(value, node))\n"
    )
    assert out.count("$ref steps") == 2, out


def test_a_dict_that_shares_its_sub_dicts_is_refused_before_it_is_written_out() -> None:
    """A Python dict may share a sub-dict (``a = {"anyOf": [b, b]}``): written out it holds
    2^depth values. It is refused after a bounded count, before anything serialises it."""
    out = _run(
        "node = {'type': 'string'}\n"
        "for _ in range(30):\n    node = {'anyOf': [node, node]}  # depth 60, 2^30 leaves\n"
        "wide = {'type': 'string'}\n"
        "for _ in range(20):\n    wide = {'allOf': [wide] * 8}\n"
        "from notebook_llm.core.response_schema import as_schema\n"
        "from notebook_llm.core.errors import LlmError\n"
        "for schema in (node, wide):\n"
        "    try:\n        as_schema(schema)\n"
        "    except LlmError as err:\n        print(err.code, err.message)\n"
    )
    lines = out.splitlines()
    assert len(lines) == 2, out
    for line in lines:
        assert line.startswith("INVALID_OPTIONS"), out
        assert "more than 100,000 values" in line, out


def test_a_ref_to_another_document_is_never_fetched() -> None:
    """A tool's or MCP server's schema may ``$ref`` a URL: nothing fetches it (it could hang
    the kernel or reach any host); the check says so in one line."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/s.json"
    try:
        for schema in (
            {"type": "object", "properties": {"a": {"$ref": url}}},
            {"$schema": "http://json-schema.org/draft-07/schema#", "allOf": [{"$ref": url}]},
            {"$schema": "http://json-schema.org/draft-04/schema#", "anyOf": [{"$ref": url}]},
        ):
            problems = check({"a": 1}, schema)
            assert len(problems) == 1, problems
            assert "not fetched" in problems[0], problems
            assert url in problems[0]
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody connected
    finally:
        listener.close()
    # the metaschemas are known without fetching
    meta = {"$ref": "https://json-schema.org/draft/2020-12/schema"}
    assert check({"type": "string"}, meta) == []
    assert check({"type": 12}, meta) != []


#: Values JSON Schema calls equal or not (numbers by value; booleans are not numbers; objects
#: whatever their key order), each with jsonschema's own verdict as the reference.
_UNIQUENESS = [
    [1, 1.0],
    [1, True],
    [0, False],
    [None, False],
    ["a", "a"],
    ["1", 1],
    [{"a": 1, "b": [1, 2]}, {"b": [1.0, 2], "a": 1}],
    [{"a": 1}, {"a": True}],
    [[1, [2]], [1, [2.0]]],
    [[1, 2], [2, 1]],
    [{"a": {"b": None}}, {"a": {"b": None}}],
    [{"a": {"b": None}}, {"a": {"c": None}}],
    [[], {}],
    [2**53 + 1, float(2**53)],
    [[True], [1]],
]


@pytest.mark.parametrize("items", _UNIQUENESS)
def test_unique_items_means_what_jsonschema_means(items: list[Any]) -> None:
    schema = {"type": "array", "uniqueItems": True}
    expected = jsonschema.Draft202012Validator(schema).is_valid(items)
    problems = check(items, schema)
    assert (problems == []) is expected, (items, problems)
    if not expected:
        assert "non-unique" in problems[0]
    assert check([*items, "tail"], {"uniqueItems": False}) == []


def test_unique_items_of_many_objects_ends() -> None:
    """jsonschema compares every pair of objects (8,000 took 106 s, holding the loop, with no
    Stop): the check is one pass over a set, so 60,000 objects end at all."""
    out = _run(
        "from notebook_llm.core.json_schema_check import check\n"
        "items = [{'id': i, 'tags': ['x', i]} for i in range(60_000)]\n"
        "schema = {'type': 'array', 'uniqueItems': True}\n"
        "print(check(items, schema) == [], len(check(items + [{'tags': ['x', 5], 'id': 5}], schema)))\n"
    )
    assert out.split("\n")[0] == "True 1"


def test_draft3_schemas_inside_extends_type_and_disallow_are_checked() -> None:
    """Draft 3 puts schemas under ``extends``, ``type`` and ``disallow``: their patterns and
    references are checked like any other (a lookahead is refused; a URL is not followed)."""
    d3 = "http://json-schema.org/draft-03/schema#"
    for key, sub in [
        ("extends", {"properties": {"a": {"pattern": "(?=a)a"}}}),
        ("extends", [{"properties": {"a": {"pattern": "(?=a)a"}}}]),
        ("type", [{"properties": {"a": {"pattern": "(?=a)a"}}}, "string"]),
        ("disallow", [{"properties": {"a": {"pattern": "(?=a)a"}}}]),
    ]:
        schema = {"$schema": d3, "type": "object", key: sub}
        with pytest.raises(LlmError) as err:
            as_schema(schema)
        assert err.value.code == ErrorCode.INVALID_OPTIONS
        assert "linear time" in err.value.message, (key, err.value.message)
        assert "linear time" in check({"a": "a"}, schema)[0]
    remote = {"$schema": d3, "type": "object", "extends": {"$ref": "http://127.0.0.1:9/x.json"}}
    with pytest.raises(LlmError) as err:
        as_schema(remote)
    assert "is not local" in err.value.message
    problems = check({"a": "a"}, remote)
    assert len(problems) == 1, problems
    assert "the schema cannot be used" in problems[0], problems


# ------------------------------------------------------------------ one validator


def test_a_pydantic_or_dataclass_answer_never_imports_jsonschema() -> None:
    out = _run(
        "import sys, dataclasses, pydantic\n"
        "from notebook_llm import Engine\n"
        "class Sentiment(pydantic.BaseModel):\n    label: str\n    score: float\n"
        "@dataclasses.dataclass\nclass Point:\n    x: int\n    y: int\n"
        "e = Engine()\n"
        "for schema in (Sentiment, Point):\n"
        "    r = e.complete_sync('mock', 'echo', prompt='the soup was cold', schema=schema)\n"
        "    assert r.parsed is not None, r\n"
        "print('jsonschema' in sys.modules)\n"
        "e.complete_sync('mock', 'echo', prompt='x', schema={'type': 'object', "
        "'properties': {'a': {'type': 'string'}}, 'required': ['a']})\n"
        "print('jsonschema' in sys.modules)\n"
    )
    assert out.split() == ["False", "True"]


#: A user's own format checks, one valid and one invalid value per deferred module's format.
_USER_FORMAT_CHECKS = (
    "import jsonschema\n"
    "check = jsonschema.Draft202012Validator.FORMAT_CHECKER\n"
    "for fmt, good, bad in [('iri', 'https://example.org/\u00e4', 'not an iri'),\n"
    "                       ('duration', 'P3D', 'three days'),\n"
    "                       ('uri', 'https://example.org/a', 'no scheme')]:\n"
    "    print(fmt, check.conforms(good, fmt), check.conforms(bad, fmt))\n"
    "    try:\n"
    "        check.check(bad, fmt)\n"
    "    except jsonschema.FormatError as err:\n"
    "        print(fmt, 'FormatError', str(err).startswith(repr(bad)))\n"
    "print(*(sys.modules[m].__spec__ is not None for m in DEFERRED))  # the real modules now\n"
)

#: What :data:`_USER_FORMAT_CHECKS` prints when every check works as plain jsonschema's.
_USER_FORMAT_CHECKS_SEEN = [
    "iri True False",
    "iri FormatError True",
    "duration True False",
    "duration FormatError True",
    "uri True False",
    "uri FormatError True",
    "True True True",
]


def test_a_json_schema_answer_defers_jsonschemas_slow_format_checkers() -> None:
    """jsonschema imports its optional format checkers on its own import, and some are slow
    (rfc3987_syntax: seconds; isoduration, which imports arrow; rfc3986_validator). A JSON Schema
    dict answer must not pay them, and a user's own format checks in the same process must
    still work, valid and invalid alike (each pays its module's import on its first call)."""
    # the test extra brings them (jupyterlab -> jupyter-events -> jsonschema[format-nongpl])
    from notebook_llm.core.json_schema_check import _DEFERRED_FORMAT_MODULES

    deferred = sorted(_DEFERRED_FORMAT_MODULES)
    assert deferred == ["isoduration", "rfc3986_validator", "rfc3987_syntax"]
    for module in deferred:
        assert importlib.util.find_spec(module) is not None, module
    out = _run(
        "import sys\n"
        f"DEFERRED = {deferred!r}\n"
        "from notebook_llm import Engine\n"
        "e = Engine(config_file=False, env_file=False)\n"
        "r = e.complete_sync('mock', 'echo', prompt='x', schema={'type': 'object', "
        "'properties': {'a': {'type': 'string'}}, 'required': ['a']})\n"
        "assert r.parsed is not None, r\n"
        "print('jsonschema' in sys.modules, *(m in sys.modules for m in DEFERRED))\n"
        + _USER_FORMAT_CHECKS
    )
    assert out.split("\n")[:8] == ["True False False False", *_USER_FORMAT_CHECKS_SEEN]


def test_a_jsonschema_that_reads_more_of_a_stand_in_gets_the_real_modules_names() -> None:
    """A later jsonschema may read a name a stand-in lacks at its import (an attribute, or
    ``from x import name``): it gets the real module's, and every format check still works."""
    out = _run(
        "import sys\n"
        "from notebook_llm.core import json_schema_check as c\n"
        "DEFERRED = sorted(c._DEFERRED_FORMAT_MODULES)\n"
        "c._DEFERRED_ERRORS.clear()  # isoduration's stand-in lacks the error class read\n"
        "c._DEFERRED_FORMAT_MODULES['rfc3986_validator'] = ()  # and this one the function\n"
        "print(len(c.check({'a': 1}, {'properties': {'a': {'type': 'string'}}})) == 1)\n"
        + _USER_FORMAT_CHECKS
    )
    assert out.split("\n")[:8] == ["True", *_USER_FORMAT_CHECKS_SEEN]


def test_code_that_imports_a_deferred_module_while_it_is_stood_in_for_gets_the_real_one() -> None:
    """Another thread may import a deferred module while jsonschema's first import is under way
    and keep the stand-in: it then behaves as the real module (its functions, any other name,
    ``from x import name``, its submodules), and the real module takes its place in
    ``sys.modules``."""
    out = _run(
        "import importlib.util, sys\n"
        "from notebook_llm.core import json_schema_check as c\n"
        "stand_in = c._stand_in('isoduration', importlib.util.find_spec('isoduration'))\n"
        "sys.modules['isoduration'] = stand_in  # as while jsonschema is first imported\n"
        "import isoduration  # the other thread's import\n"
        "print(isoduration is stand_in)\n"
        "import isoduration.parser.exceptions as errors  # a submodule, found by __path__\n"
        "print(issubclass(errors.DurationParsingException, ValueError))\n"
        "print(isoduration.parse_duration('P1D').date.days)  # the real function, no recursion\n"
        "from isoduration import format_duration  # a name the stand-in lacks\n"
        "print(format_duration(isoduration.parse_duration('P2D')))\n"
        "real = sys.modules['isoduration']\n"
        "print(real is not stand_in, real.__spec__ is not None)\n"
    )
    assert out.split("\n")[:5] == ["True", "True", "1", "P2D", "True True"]


def test_the_mcp_warmup_imports_jsonschema_with_the_slow_checkers_deferred() -> None:
    """Connecting an MCP server imports jsonschema in a thread (the SDK checks results with it):
    that import defers the same slow format checkers as an answer's."""
    out = _run(
        "import sys\n"
        "from notebook_llm.api.mcp import connection\n"
        "from notebook_llm.core.json_schema_check import _DEFERRED_FORMAT_MODULES\n"
        "connection._import_validator()  # what the warm-up thread runs\n"
        "print('jsonschema' in sys.modules, any(m in sys.modules for m in _DEFERRED_FORMAT_MODULES))\n"
    )
    assert out.split("\n")[0] == "True False"


def test_a_dataclass_answer_without_pydantic_never_imports_jsonschema() -> None:
    """Where pydantic is not installed (the environment scripts/lab makes), a dataclass answer
    is checked against the dataclass's type hints: the README's first typed answer."""
    out = _run(
        "import sys, dataclasses\n"
        "sys.modules['pydantic'] = None  # as if not installed\n"
        "from notebook_llm import Engine\n"
        "from notebook_llm.core.errors import LlmError\n"
        "@dataclasses.dataclass\nclass Sentiment:\n    label: str\n    score: float\n"
        "e = Engine(config_file=False, env_file=False)\n"
        "r = e.complete_sync('mock', 'echo', prompt='Review: cold soup', schema=Sentiment)\n"
        "assert isinstance(r.parsed, Sentiment), r\n"
        "from notebook_llm.core.response_schema import as_schema\n"
        'try:\n    as_schema(Sentiment).validate(\'{"label": 1, "score": 0.5}\')\n'
        "except LlmError as err:\n    print(err.details['validation'])\n"
        "print('jsonschema' in sys.modules)\n"
    )
    assert out.split("\n")[:2] == ["label: expected string, got 1", "False"]


@pytest.mark.parametrize(
    ("value", "schema", "words"),
    [
        (math.nan, {"type": "number", "maximum": 3}, "NaN"),
        (math.nan, {"type": "number", "minimum": 3}, "NaN"),
        (math.inf, {"type": "number", "maximum": 3}, "infinite"),
        (-math.inf, {"type": "integer", "minimum": 0}, "infinite"),
        ({"a": [math.nan]}, {"type": "object"}, "$.a[0]"),
    ],
)
def test_nan_and_infinity_are_not_numbers(value: Any, schema: Any, words: str) -> None:
    problems = check(value, schema)
    assert len(problems) == 1
    assert words in problems[0]


async def test_a_tool_refuses_nan_and_infinite_arguments() -> None:
    from notebook_llm.api.tool_calling.tools import Tool

    def scale(factor: float) -> float:
        return factor

    tool = Tool(
        scale,
        parameters={
            "type": "object",
            "properties": {"factor": {"type": "number", "minimum": 0, "maximum": 10}},
            "required": ["factor"],
        },
    )
    for arguments in ('{"factor": NaN}', '{"factor": 1e999}', '{"factor": -Infinity}'):
        text, is_error = await tool.invoke(arguments)
        assert is_error, arguments
        assert "not a number JSON can carry" in text
    assert await tool.invoke('{"factor": 2}') == ("2.0", False)


def test_a_schema_pattern_is_matched_in_linear_time_with_ecma_classes() -> None:
    schema = as_schema({"type": "string", "pattern": "^\\d{3}$"})
    assert _verdict(schema, '"123"')
    assert not _verdict(schema, '"١٢٣"')  # ECMA's \\d is ASCII, as RE2's
    assert check({"k": 1}, {"patternProperties": {"^k$": {"type": "string"}}}) == [
        "$.k: expected string, got integer 1"
    ]


# ------------------------------------------------------------------ $ref loops

#: Schemas whose ``$ref`` leads back to itself through schemas of the same value only: checking
#: any value against one never ends (jsonschema recurses to Python's limit).
_REF_LOOPS = {
    "two definitions": {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
    },
    "the root in allOf": {"allOf": [{"$ref": "#"}]},
    "left recursion in anyOf": {
        "$defs": {"E": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/E"}]}},
        "$ref": "#/$defs/E",
    },
    "not": {"type": "object", "not": {"$ref": "#"}},
    "then beside an if": {"if": {"type": "string"}, "then": {"$ref": "#"}},
    "dependentSchemas": {"type": "object", "dependentSchemas": {"a": {"$ref": "#"}}},
    "percent-encoded pointer": {
        "$defs": {"a b": {"oneOf": [{"$ref": "#/$defs/a%20b"}]}},
        "$ref": "#/$defs/a%20b",
    },
    "draft 7 definitions": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"allOf": [{"$ref": "#"}]}},
        "$ref": "#/definitions/a",
    },
}


@pytest.mark.parametrize("name", sorted(_REF_LOOPS))
def test_a_ref_loop_through_the_same_value_is_refused_in_one_line(name: str) -> None:
    """A typed answer's schema is refused before any request; a tool's arguments get one line
    about the schema, not "the answer nests too deeply"."""
    schema = _REF_LOOPS[name]
    with pytest.raises(LlmError) as err:
        as_schema(schema)
    assert err.value.code == ErrorCode.INVALID_OPTIONS
    assert "leads back to itself" in err.value.message
    assert "\n" not in err.value.message
    problems = check({"x": 1, "a": 1}, schema)
    assert len(problems) == 1
    assert "the schema cannot be used" in problems[0]
    assert "leads back to itself" in problems[0]


def test_recursion_through_a_part_of_the_value_is_not_a_loop() -> None:
    """Recursion under ``properties`` or ``items`` ends with the value, and a ``then`` without
    an ``if`` or a draft 7 ``$ref``'s siblings are never read: none of these is refused."""
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                "required": ["kids"],
            }
        },
        "$ref": "#/$defs/node",
    }
    linked = {
        "type": "object",
        "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
    }
    then_alone = {"type": "object", "then": {"$ref": "#"}}
    draft7_sibling = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"a": {"type": "object"}},
        "$ref": "#/definitions/a",
        "allOf": [{"$ref": "#"}],  # hidden by the $ref in draft 7
    }
    deep = {"kids": [{"kids": [{"kids": []}]}, {"kids": []}]}
    assert as_schema(tree).validate(json.dumps(deep)) == deep
    assert as_schema(linked).validate('{"next": {"next": null}}') == {"next": {"next": None}}
    assert as_schema(then_alone).validate("{}") == {}
    assert check({}, draft7_sibling) == []
    assert check({"kids": [{"kids": 1}]}, tree) == ["$.kids[0].kids: expected array, got integer 1"]


def test_a_long_ref_loop_is_found_and_named_in_one_line() -> None:
    defs = {f"D{i}": {"$ref": f"#/$defs/D{i + 1}"} for i in range(5_000)}
    defs["D5000"] = {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/D0"}]}
    with pytest.raises(LlmError) as err:
        as_schema({"$defs": defs, "$ref": "#/$defs/D0"})
    assert "leads back to itself" in err.value.message
    assert " -> ... -> " in err.value.message
    assert len(err.value.message) < 400
    chain = {f"D{i}": {"$ref": f"#/$defs/D{i + 1}"} for i in range(40)}
    chain["D40"] = {"type": "null"}  # a chain that ends: accepted
    assert as_schema({"$defs": chain, "$ref": "#/$defs/D0"}).validate("null") is None


def test_the_mock_answers_a_raw_ref_loop_without_recursing_forever() -> None:
    """The mock server takes a request's schema as it comes (a client that skipped
    ``as_schema``): a ``$ref`` loop is followed a bounded number of hops."""
    from notebook_llm.adapters.mock.schema_answers import instance

    for schema in _REF_LOOPS.values():
        instance(schema, "hi")  # returns: no RecursionError


def test_a_broken_install_of_a_deferred_format_module_leaves_that_format_unchecked() -> None:
    """jsonschema registers a format only when its module imports; ours are imported late, so a
    module that is installed but fails to import is found at the first check of its format.
    That check then passes the value, with one warning, as plain jsonschema (which never
    registered the format) does: never an ImportError in a user's own ``FormatChecker``."""
    broken = (
        "import os, sys, tempfile, logging\n"
        "logging.basicConfig(level=logging.WARNING, format='%(levelname)s %(message)s', "
        "stream=sys.stdout)\n"
        "d = tempfile.mkdtemp()\n"
        "for m in ('rfc3987_syntax', 'rfc3986_validator', 'isoduration'):\n"
        "    os.makedirs(os.path.join(d, m))\n"
        "    with open(os.path.join(d, m, '__init__.py'), 'w') as f:\n"
        "        f.write('raise ImportError(\"a dependency is missing\")')\n"
        "sys.path.insert(0, d)\n"
    )
    checks = (
        "check = jsonschema.Draft202012Validator.FORMAT_CHECKER\n"
        "for fmt, value in [('iri', 'not an iri'), ('uri', 'no scheme'), ('duration', 'P3D'),\n"
        "                   ('iri', 'again')]:\n"
        "    print(fmt, check.conforms(value, fmt))\n"
    )
    ours = _run(
        broken + "from notebook_llm.core.json_schema_check import load_jsonschema\n"
        "jsonschema = load_jsonschema()\n" + checks
    )
    plain = _run(broken + "import jsonschema\n" + checks)
    verdicts = [line for line in ours.splitlines() if not line.startswith("WARNING")]
    assert verdicts == plain.splitlines() == ["iri True", "uri True", "duration True", "iri True"]
    warnings = [line for line in ours.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 3, ours  # one per module, not per check
    assert all("a dependency is missing" in w for w in warnings)


# ------------------------------------------------------------------ a schema's verdict, kept


def test_a_schemas_verdict_is_kept_by_content(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every answer of a ``map`` and every tool call checks the same schema: its metaschema
    check runs once per content, a schema changed in place is checked again, and a value JSON
    cannot tell apart (a tuple, an int key) is checked as it is, never answered from the kept
    verdict of its JSON twin."""
    from notebook_llm.core import json_schema_check as c

    runs: list[Any] = []
    real = c._content_problem

    def counted(schema: Any, original: Any) -> Any:
        runs.append(schema)
        return real(schema, original)

    monkeypatch.setattr(c, "_content_problem", counted)
    monkeypatch.setattr(c, "_PREPARED", type(c._PREPARED)())
    monkeypatch.setattr(c, "_PREPARED_CHARS", 0)
    schema = {"type": "object", "properties": {"a": {"type": "string", "x-case": "kept"}}}
    for _ in range(50):
        assert check({"a": "x"}, schema) == []
        assert check({"a": 1}, schema) == ["$.a: expected string, got integer 1"]
    assert len(runs) == 1
    schema["properties"]["a"]["type"] = "strnig"  # changed in place
    assert "not a valid JSON Schema" in check({"a": "x"}, schema)[0]
    assert len(runs) == 2
    assert c.schema_problem({"enum": [1, 2], "x-case": "twin"}) is None
    before = len(runs)
    for _ in range(2):  # its JSON twin's verdict is kept; a tuple is checked every time
        problem = c.schema_problem({"enum": (1, 2), "x-case": "twin"})
        assert "is not of type 'array'" in str(problem)
        c.schema_problem({"properties": {1: {}}, "x-case": "int key"})
    assert len(runs) == before + 4
    for i in range(c._MAX_PREPARED + 10):  # bounded
        c.schema_problem({"type": "string", "x-i": i})
    assert len(c._PREPARED) == c._MAX_PREPARED


# ------------------------------------------------------------------ loops the check itself ends

#: Loops on the same value closed by a reference the static check does not follow (an
#: ``$anchor``, a ``$dynamicRef``, a URL ``$id``, 2019-09's ``$recursiveRef``, the empty
#: pointer, a negative index): the check's own guard ends each on its first turn.
_RUNTIME_LOOPS = [
    {"allOf": [{"$ref": ""}]},
    {"$anchor": "r", "not": {"$ref": "#r"}},
    {"$dynamicAnchor": "m", "allOf": [{"$dynamicRef": "#m"}]},
    {
        "$schema": "https://json-schema.org/draft/2019-09/schema",
        "$recursiveAnchor": True,
        "anyOf": [{"$recursiveRef": "#"}],
    },
    {"$id": "https://example.com/s", "allOf": [{"$ref": "https://example.com/s"}]},
    {"$id": "https://example.com/s", "allOf": [{"$ref": "s"}]},
    {"allOf": [{"$ref": "#/allOf/-1"}]},
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"a": {"$id": "#a", "allOf": [{"$ref": "#a"}]}},
        "$ref": "#/definitions/a",
    },
]


@pytest.mark.parametrize("index", range(len(_RUNTIME_LOOPS)))
def test_a_loop_through_any_kind_of_reference_is_one_line(index: int) -> None:
    problems = check([1, {"a": 1}], _RUNTIME_LOOPS[index])
    assert len(problems) == 1, problems
    assert "leads back to itself" in problems[0], problems


def test_the_loop_guard_holds_with_a_raised_recursion_limit() -> None:
    """With Python's recursion limit raised, a reference loop used to recurse until C's stack
    ran out (the process died); a chain of references too long for any schema is ended too."""
    out = _run(
        "import sys, threading\n"
        "sys.setrecursionlimit(10**6)\n"
        "from notebook_llm.core.json_schema_check import check\n"
        "loop = {'$anchor': 'r', 'not': {'$ref': '#r'}}\n"
        "defs = {f'D{i}': {'$ref': f'#/$defs/D{i + 1}'} for i in range(5000)}\n"
        "defs['D5000'] = {'type': 'string'}\n"
        "chain = {'$defs': defs, '$ref': '#/$defs/D0'}\n"
        "print(check([1] * 1000, loop))\n"
        "seen = []\n"
        "t = threading.Thread(target=lambda: seen.append(check(1, chain)))\n"
        "t.start(); t.join()\n"
        "print(seen[0])\n"
    )
    loop, chain = out.splitlines()
    assert "leads back to itself" in loop
    assert "more than 256 references inside one another" in chain


def test_a_ref_back_to_a_root_that_names_its_draft_keeps_the_linear_patterns() -> None:
    """jsonschema picks its own validator class for a subschema that names a ``$schema`` (a
    ``$ref`` back to the root does), whose ``pattern`` is ``re``: ``^(a+)+$`` on 40 ``a`` then
    backtracks for days. Every subschema is checked by the package's class, on RE2."""
    out = _run(
        "from notebook_llm.core.json_schema_check import check\n"
        "s = {'$schema': 'https://json-schema.org/draft/2020-12/schema',\n"
        "     'type': ['object', 'array'], 'items': {'$ref': '#'},\n"
        "     'properties': {'x': {'type': 'string', 'pattern': '^(a+)+$'},\n"
        "                    'n': {'$schema': 'https://json-schema.org/draft/2020-12/schema',\n"
        "                          'type': 'string', 'pattern': '^(b+)+$'}}}\n"
        "print(check([[{'x': 'a' * 40 + '!', 'n': 'b' * 40 + '!'}]], s))\n"
    )
    assert "$[0][0].x:" in out, out
    assert "$[0][0].n:" in out, out


def test_a_draft_7_ref_still_hides_its_siblings_and_a_property_may_be_named_schema() -> None:
    s7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {"a": {"$ref": "#/definitions/x", "type": "integer"}},
        "definitions": {"x": {"type": "string"}},
        "required": ["$schema"],
    }
    assert check({"a": "s", "$schema": "kept: a property's name"}, s7) == []
    assert check({"a": 1, "$schema": 1}, s7) == ["$.a: expected string, got integer 1"]
    assert s7["$schema"] == "http://json-schema.org/draft-07/schema#"  # the user's, untouched


@pytest.mark.parametrize(
    "schema",
    [
        {"extends": {"$ref": "#"}},  # draft 3's keyword, not read by 2020-12
        {"dependencies": {"a": {"$ref": "#"}}},  # not read by 2020-12
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "dependentSchemas": {"a": {"$ref": "#"}},
        },
        {"$schema": "http://json-schema.org/draft-06/schema#", "if": {"$ref": "#"}},
        {"type": "object", "$defs": {"a": {"$ref": "#/$defs/a"}}},  # never referenced
        {"anyOf": [True, {"$ref": "#"}]},  # the first branch always holds
        {"anyOf": [{}, {"$ref": "#"}]},
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "definitions": {"a": {"id": "http://example.com/a", "allOf": [{"$ref": "#"}]}},
        },
    ],
)
def test_what_a_check_never_reads_is_not_a_loop(schema: dict[str, Any]) -> None:
    from notebook_llm.core.json_schema_check import ref_loop_problem

    assert ref_loop_problem(schema) is None
    assert check({"b": 1}, schema) == []


def test_a_pointer_index_that_is_not_a_number_is_one_line_everywhere() -> None:
    from notebook_llm.adapters.mock.schema_answers import instance

    for index in ("\u00b2", "0" * 5000, "x", "99"):
        schema = {"type": "object", "allOf": [{"$ref": f"#/allOf/{index}"}]}
        problems = check({}, schema)
        assert len(problems) == 1, problems
        assert "\n" not in problems[0]
        instance(schema, "x")  # the mock takes it as pointing nowhere
        with pytest.raises(LlmError) as err:
            as_schema(schema)
        assert err.value.code == ErrorCode.INVALID_OPTIONS


def test_a_kept_verdict_is_the_verdict_of_its_text() -> None:
    """The verdict is worked out on a copy read back from the JSON text it is kept under: a
    dict that shares a sub-dict, and its JSON twin, get the same verdict, in either order."""
    from notebook_llm.core.json_schema_check import schema_problem

    loop = {"allOf": [{"$ref": "#"}]}
    shared = {"not": loop, "$defs": {"a": {"$id": "https://example.com/a", "not": loop}}}
    twin = json.loads(json.dumps(shared))
    first, second = schema_problem(shared), schema_problem(twin)
    assert first is not None
    assert first == second
    assert "leads back to itself" in first


def test_the_mock_builds_a_bounded_answer_for_properties_that_each_recurse() -> None:
    out = _run(
        "import json\n"
        "from notebook_llm.adapters.mock.schema_answers import MAX_VALUES, instance\n"
        "s = {'type': 'object', 'properties': {'a': {'$ref': '#'}, 'b': {'$ref': '#'}}}\n"
        "text = json.dumps(instance(s, 'x'))\n"
        "print(text.count('{') <= MAX_VALUES + 1, len(text) < 1_000_000)\n"
    )
    assert out.split() == ["True", "True"]


def test_every_subschema_and_the_metaschema_check_run_on_the_packages_class() -> None:
    """A ``$ref`` to a subschema that names a ``$schema`` (anywhere in the document: under an
    unknown keyword, in an ``enum``) or to a metaschema used to put the rest of the check on
    jsonschema's own class: ``re`` patterns, no step budget, no loop guard (with a raised
    recursion limit, the process died). And the metaschema check's ``uniqueItems`` was
    jsonschema's quadratic one: 30,000 ``required`` names took minutes."""
    out = _run(
        "import sys\n"
        "sys.setrecursionlimit(10**6)\n"
        "from notebook_llm.core.json_schema_check import check, schema_problem\n"
        "D7 = 'http://json-schema.org/draft-07/schema#'\n"
        "D12 = 'https://json-schema.org/draft/2020-12/schema'\n"
        "bad = 'a' * 40 + '!'\n"
        "slow = {'$schema': D7, 'pattern': '^(a+)+$'}\n"
        "print(check(bad, {'$ref': '#/x/a', 'x': {'a': slow}}))\n"
        "print(check(bad, {'$ref': '#/enum/0', 'enum': [slow]}))\n"
        "print(check({'not': bad}, {'$id': 'urn:x', '$dynamicAnchor': 'meta',\n"
        "                           'pattern': '^(a+)+$', '$ref': D12}))\n"
        "print(check(1, {'allOf': [{'$ref': '#/x'}], 'x': {'$schema': D12, '$ref': '#/$defs/l'},\n"
        "                '$defs': {'l': {'$dynamicAnchor': 'l', '$dynamicRef': '#l'}}}))\n"
        "print(schema_problem({'required': [str(i) for i in range(30_000)]}))\n"
    )
    lines = out.splitlines()
    assert len(lines) == 5, out
    for line in lines[:3]:
        assert "does not match '^(a+)+$'" in line, line
    assert "leads back to itself" in lines[3]
    assert lines[4] == "None"


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        (  # a 2020-12 root, a draft 7 definition: its $ref hides "maximum"
            {
                "$ref": "#/$defs/d7",
                "$defs": {
                    "t": {"type": "integer"},
                    "d7": {
                        "$schema": "http://json-schema.org/draft-07/schema#",
                        "allOf": [{"$ref": "#/$defs/t", "maximum": 5}],
                    },
                },
            },
            10,
        ),
        (  # a draft 7 root, a 2020-12 definition: prefixItems is read there
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "$ref": "#/definitions/a",
                "definitions": {
                    "a": {
                        "$schema": "https://json-schema.org/draft/2020-12/schema",
                        "prefixItems": [{"type": "integer"}],
                    }
                },
            },
            ["x"],
        ),
    ],
)
def test_a_definition_of_another_draft_means_what_jsonschema_says(
    schema: dict[str, Any], value: Any
) -> None:
    plain = jsonschema.validators.validator_for(schema)(schema).is_valid(value)
    assert (check(value, schema) == []) == plain


def test_unevaluated_properties_beside_pattern_properties_anywhere_is_refused() -> None:
    """jsonschema's ``unevaluatedProperties`` matches the ``patternProperties`` it reaches
    through a ``$ref`` with ``re``, wherever the ``$ref`` points."""
    schema = {
        "type": "object",
        "unevaluatedProperties": False,
        "$ref": "#/x/p",
        "x": {"p": {"patternProperties": {"^(a+)+$": True}}},
    }
    with pytest.raises(LlmError) as err:
        as_schema(schema)
    assert "unevaluatedProperties beside patternProperties" in err.value.message
    assert "not supported" in check({"a" * 40 + "!": 1}, schema)[0]


def test_anyof_stops_at_a_branch_that_holds_unless_unevaluated_reads_them_all() -> None:
    from notebook_llm.core.json_schema_check import ref_loop_problem

    assert ref_loop_problem({"type": "object", "anyOf": [True, {"$ref": "#"}]}) is None
    looping = {"type": "object", "unevaluatedProperties": False, "anyOf": [True, {"$ref": "#"}]}
    assert "leads back to itself" in str(ref_loop_problem(looping))


@pytest.mark.parametrize("dialect", [5, [1], {"a": 1}, None])
def test_a_schema_keyword_that_is_not_a_string_is_one_line(dialect: Any) -> None:
    problems = check({}, {"$schema": dialect})
    assert len(problems) == 1, problems
    assert "not a valid JSON Schema at $schema" in problems[0]
