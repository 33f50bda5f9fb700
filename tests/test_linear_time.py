"""Every function that runs a pattern over untrusted text (model output, server bodies,
recordings, schemas, config, notebook content) finishes on adversarial inputs of about a
megabyte: long runs of spaces or backticks, repeated ``<title>``, unclosed fences, nested
quantifier killers.

A backtracking regex holds the GIL, so a hang cannot be stopped from inside the process: each
case runs in a child process with a wall-clock limit far above what a linear pass needs (a
linear pass over a megabyte takes well under a second; the patterns these replaced took minutes
to hours on the same inputs). The verdict is "finished at all", not a time: a child that is
still running at the limit is killed and the case fails. ``docs/reliability.md`` lists each
pattern and its bound.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.child_python import run_python

#: Seconds a child may run: far above what the linear code needs on a loaded machine (the
#: slowest case, several megabytes through markdown-it, took about 30 s with two busy loops and
#: the suite beside it), and far below what a superlinear one needs (a quadratic pass over a
#: megabyte takes hours). The verdict must not depend on the machine's speed.
LIMIT = 300.0
#: About a megabyte of adversarial text.
N = 1_000_000

#: name -> (setup, call): Python run in the child with ``N`` set; ``call`` must return.
CASES: dict[str, tuple[str, str]] = {
    # --- model output
    "typed answer: a fence, a long run of spaces, a letter": (
        "from notebook_llm.core.response_schema import _unfence",
        "_unfence('```' + ' ' * N + 'a')",
    ),
    "typed answer: a tag, spaces, no closing fence": (
        "from notebook_llm.core.response_schema import _unfence",
        "_unfence('```json' + ' ' * N + '\\n' + 'a ' * 1000 + '```x')",
    ),
    "typed answer: two fences around a long run of spaces": (
        "from notebook_llm.core.response_schema import _unfence",
        "_unfence('x ```' + ' ' * N + 'y ``` z')",
    ),
    "--format json: many unclosed fences on one line": (
        "from notebook_llm.notebook.widgets.render import strip_fences",
        "strip_fences('```a' * (N // 4) + '\\n' + 'b')",
    ),
    "--format json: a fence and a long run of backticks and spaces": (
        "from notebook_llm.notebook.widgets.render import strip_fences",
        "strip_fences('```\\n' + '` ' * (N // 2) + 'x')",
    ),
    "--format json: unclosed tilde and backtick fences": (
        "from notebook_llm.notebook.widgets.render import strip_fences",
        "strip_fences(('~~~x\\n' + '```y\\n') * (N // 10) + 'z')",
    ),
    "dropped-text witness: a letter, a long run of spaces, a digit": (
        "from notebook_llm.adapters.lua.dropped_text import DroppedText\nd = DroppedText()",
        "d.feed_value({'field': 'a' + ' ' * N + '1'}); d.best()",
    ),
    "dropped-text witness: letters and punctuation runs": (
        "from notebook_llm.adapters.lua.dropped_text import DroppedText\nd = DroppedText()",
        "d.feed_value({'field': ('a' + ' .' * 50 + '_') * (N // 102)}); d.best()",
    ),
    "a schema's pattern on an answer: a nested quantifier": (
        "import json\nfrom notebook_llm.core.response_schema import as_schema\n"
        "s = as_schema({'type': 'object', 'properties': {'a': {'type': 'string', "
        "'pattern': '^(a+)+$'}}})",
        "try:\n    s.validate(json.dumps({'a': 'a' * N + '!'}))\nexcept Exception:\n    pass",
    ),
    "a tool argument against a pattern: a nested quantifier": (
        "from notebook_llm.core.json_schema_check import check",
        "check({'a': 'x' * N + '!'}, {'type': 'object', 'properties': {'a': {'pattern': "
        "'^(x|xx)+$'}}})",
    ),
    "showing an answer: redaction of URLs, keys and bearer words": (
        "from notebook_llm.core.redaction import redact, register_secret\n"
        "register_secret('sk-abcdefghijklmnop0123')",
        "redact('?key=' + 'a' * N); redact('https://' + 'a' * N); redact('bearer ' * (N // 7));"
        "redact('sk-abcdefghijklmnop012' * (N // 22)); redact('%25' * (N // 3))",
    ),
    "showing an answer: the stream's cut points": (
        "from notebook_llm.notebook.widgets.live import RedactedStream\ns = RedactedStream()",
        "s.push('?sig=' + 'a' * N); s.take(); s.push(' bearer' * (N // 7)); s.take()",
    ),
    "showing an answer: the stream's cut point after eight megabytes of bearer words": (
        # quadratic here took 17 s a megabyte, so a megabyte alone passed the limit: at eight,
        # quadratic needs over 1,000 s and linear a few
        "from notebook_llm.notebook.widgets.live import RedactedStream\ns = RedactedStream()",
        "s.push(' bearer' * (8 * N // 7)); s.take()",
    ),
    # --- an answer shown as Markdown: bare links (linkify-it-py's patterns backtrack; a word of
    # 40,000 characters of "http://a/(" took 19 s, a megabyte hours), code blocks (Pygments)
    "showing an answer: one long word of URL parentheses": (
        "from notebook_llm.notebook.widgets.safe_html import markdown_html",
        "markdown_html(('http://a/(' * N)[:N])",
    ),
    "showing an answer: URL words at the linkify bound": (
        "from notebook_llm.notebook.widgets.safe_html import markdown_html, LINKIFY_MAX_WORD\n"
        "w = ('ftp://a/(' * N)[:LINKIFY_MAX_WORD] + ' '",
        "markdown_html((w * (N // len(w)))[:N])",
    ),
    "showing an answer: runs of dots, @, :// and scheme-like words": (
        "from notebook_llm.notebook.widgets.safe_html import markdown_html",
        "markdown_html('.' * N); markdown_html('@' * N); markdown_html('a://' * (N // 4));"
        "markdown_html('x!://' * (N // 5)); markdown_html('a@a.' * (N // 4));"
        "markdown_html('www.' * (N // 4)); markdown_html('http://' + 'a.' * (N // 2))",
    ),
    "showing an answer: code blocks past the highlighting bounds": (
        "from notebook_llm.notebook.widgets.safe_html import markdown_html",
        "markdown_html(''.join(f'```{l}\\n' + 'a' + ' ' * (N // 40) + '(\\n```\\n' "
        "for l in ('c', 'cpp', 'csharp', 'r', 'java', 'python') * 6))",
    ),
    "showing an answer: a megabyte of image starts, links and emphasis": (
        "from notebook_llm.notebook.widgets.final import FinalView",
        "FinalView('![' * (N // 2)).html(); FinalView('[a *b* _c_](http://x.y/z) ' * (N // 26))"
        ".html(); FinalView('&' * N, fmt='text').html()",
    ),
    "the mock reads a prompt: quotes, question words, numbers": (
        "from notebook_llm.adapters.mock.models import _Prompt",
        "p = _Prompt(\"'a \" * (N // 3) + 'please ' * 1000 + '\"x' * 1000 + ' 1' * 1000);"
        "p.short_phrase(); p.mentions('include_no'); p.enum(['x' * 150])",
    ),
    # --- server bodies and recordings
    "an HTML error page of repeated <title>": (
        "from notebook_llm.wire.http_errors import provider_error_message",
        "provider_error_message('<html>' + '<title>' * (N // 7))",
    ),
    "an HTML error page with an unclosed <title attribute": (
        "from notebook_llm.wire.http_errors import provider_error_message",
        "provider_error_message('<html><title' + ' x' * (N // 2))",
    ),
    "a recording's path against an endpoint template": (
        "from notebook_llm.conformance.recordings import _endpoint_pattern\n"
        "p = _endpoint_pattern('/v1/{model}{api_key}{model}:x')",
        "p.search('/v1/' + 'a' * N)",
    ),
    # --- MCP servers: a tool's output schema over its own structured result (the SDK checked
    # it with jsonschema and Python's re: a backtracking pattern, unbounded $ref branching)
    "an MCP tool's output pattern over its structured result": (
        "import asyncio, types\n"
        "from notebook_llm.api.mcp.connection import ServerConnection\n"
        "c = ServerConnection.__new__(ServerConnection)\n"
        "c.output_schemas = {'t': {'type': 'object', 'properties': {'a': {'type': 'string', "
        "'pattern': '^(a+)+$'}}}}\n"
        "r = types.SimpleNamespace(is_error=False, structured_content={'a': 'a' * N + '!'})",
        "try:\n    asyncio.run(c.check_result('t', r))\nexcept RuntimeError:\n    pass",
    ),
    "an MCP tool's output schema whose $refs branch": (
        "import asyncio, types\n"
        "from notebook_llm.api.mcp.connection import ServerConnection\n"
        "c = ServerConnection.__new__(ServerConnection)\n"
        "defs = {f'A{i}': {'anyOf': [{'$ref': f'#/$defs/A{i+1}'}, {'$ref': f'#/$defs/A{i+1}'}]} "
        "for i in range(40)}\n"
        "defs['A40'] = {'type': 'string', 'pattern': '^x$'}\n"
        "c.output_schemas = {'t': {'$defs': defs, '$ref': '#/$defs/A0'}}\n"
        "r = types.SimpleNamespace(is_error=False, structured_content='y' * 1000)",
        "try:\n    asyncio.run(c.check_result('t', r))\nexcept RuntimeError:\n    pass",
    ),
    # --- notebook content: cells, docstrings, adapter sources
    "a tool's docstring: a Sphinx field with a long run of spaces": (
        "from notebook_llm.api.tool_calling.docstrings import parse_docstring",
        "parse_docstring(':param ' + ' x' * (N // 2))",
    ),
    "a tool's docstring: a Google item with a long run of spaces": (
        "from notebook_llm.api.tool_calling.docstrings import parse_docstring",
        "parse_docstring('Args:\\n    x' + ' ' * N + 'y\\n')",
    ),
    "an adapter's source: require followed by spaces": (
        "from notebook_llm.adapters.lua.standalone import required_libraries",
        "required_libraries('require' + ' ' * N + 'x')",
    ),
    "an adapter's source highlighted: unclosed long strings and comments, attribute names": (
        "from notebook_llm.notebook.widgets.adapter_view import _linear_lua_lexer\n"
        "lex = _linear_lua_lexer()",
        "for t in ('[[a\\n' * (N // 4), '--[[a\\n' * (N // 6), '[=[a\\n' * (N // 5),"
        " '<a' * (N // 8)):\n    list(lex.get_tokens(t))",
    ),
    "a cell's fields: an unclosed brace with a long path": (
        "from notebook_llm.notebook.magics.interpolate import fields, interpolate",
        "fields('{a' + '.a' * (N // 2), {}); interpolate('{' * N, {})",
    ),
    "a styled element of sanitised HTML: a declaration of spaces": (
        "from notebook_llm.notebook.widgets.safe_html import _attribute",
        "_attribute('pre', 'style', 'color:' + ' ' * N + '!')",
    ),
}


def _runs_in_child(setup: str, call: str) -> None:
    code = f"N = {N}\n{setup}\n{call}\nprint('finished')\n"
    out = run_python(code, limit=LIMIT, what=f"\n{textwrap.indent(code, '  ')}\n(superlinear)")
    assert "finished" in out


@pytest.mark.parametrize("name", list(CASES))
def test_finishes_on_a_megabyte_of_adversarial_text(name: str) -> None:
    setup, call = CASES[name]
    _runs_in_child(setup, call)
