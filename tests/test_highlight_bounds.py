"""Code blocks in an answer are highlighted by an allow-list of Pygments lexers, each within
a size bound, so that no block a model writes holds the kernel.

Pygments' lexers are regexes, and many backtrack superlinearly (C's function rule over ``a``,
spaces and ``(`` is cubic; C#, R, INI, Makefile and others took seconds to minutes on a few
thousand characters). A regex holds the GIL, so Stop and the kernel interrupt cannot reach it:
the only defence is not to run a lexer on more than it handles quickly. Each allowed lexer runs
here on adversarial shapes (long runs of one character, nested quotes and brackets,
unterminated strings and comments, backslashes, mixed text) cut at its bound, through
:func:`highlight_code`, in a child process with a wall-clock limit far above what the bound
allows (the bound was chosen for a quarter of a second per block on a loaded machine): the
verdict is that it ends, not how fast. ``bench/bench_highlight.py`` measures the times and
chooses the bounds; ``docs/reliability.md`` has the figures.
"""

from __future__ import annotations

import random
import textwrap
from pathlib import Path

import pytest

from notebook_llm.notebook.widgets.safe_html import (
    ANSWER_HIGHLIGHT_BLOCKS,
    HIGHLIGHT_ALIASES,
    HIGHLIGHT_LEXERS,
    highlight_code,
    markdown_html,
)
from tests.child_python import run_python

#: Seconds the child running one lexer's shapes may take. At the bound each shape takes at
#: most about 0.25 s on a loaded 2-core machine (about 80 shapes); a lexer run past a bound
#: that suits it takes minutes to hours.
LIMIT = 240.0
ROOT = Path(__file__).resolve().parents[1]


def shapes(n: int) -> dict[str, str]:
    """Adversarial texts of exactly ``n`` characters (a shape repeated or padded, then cut)."""
    rnd = random.Random(7)
    mixed = "".join(rnd.choice("abc xyz 012 \"'`\\/*#<>{}[]()$@:;.,=-+!?\n\t") for _ in range(n))
    half, third, quarter = n // 2 + 1, n // 3 + 1, n // 4 + 1
    runs = {f"run of {c!r}": c * n for c in "a \n\"'`\\([{<>#-*./0$@:=+|&!%^~?;,_é"}
    built = {
        "spaces and tabs": " \t" * half,
        "CRLF lines": "\r\n" * half,
        "unterminated double quote": '"' + "a" * n,
        "unterminated single quote": "'" + "a" * n,
        "unterminated triple quote": '"""' + "a " * half,
        "unterminated block comment": "/*" + "a" * n,
        "unterminated HTML comment": "<!--" + "a" * n,
        "escaped double quotes": '"' + '\\"' * half,
        "escaped single quotes": "'" + "\\'" * half,
        "backslash escapes": '"' + "\\a" * half,
        "backslash newlines": "\\\n" * half,
        "nested quotes": "\"'`" * third,
        "nested brackets": "([{<" * quarter,
        "closing brackets": ")]}>" * quarter,
        "command substitutions": "$(" * half,
        "parameter expansions": "${" * half,
        "words and spaces": "a " * half,
        "words and newlines": "a\n" * half,
        "indented words": "    a\n" * (n // 6 + 1),
        "exponent": "1" + "e" * n,
        "hex digits": "0x" + "f" * n,
        "dotted numbers": "1." * half,
        "dotted names": "a." * half,
        "scoped names": "::a" * third,
        "tag with attributes": "<a " + "b=c " * quarter,
        "open tags": "<a" * half,
        "entities": "&a" * half,
        "keys with colons": "a: " * third,
        "list items": "- " * half,
        "comment lines": "# a\n" * quarter,
        "line comments": "// a\n" * (n // 5 + 1),
        "spaces then a letter": " " * (n - 1) + "a",
        "name, spaces, paren": "a" + " " * (n - 2) + "(",
        "name, newlines, paren": "a" + "\n" * (n - 2) + "(",
        "words then a paren": "a " * (half - 1) + "(",
        "keyword and spaces": "def" + " " * n,
        "quote and spaces": '"' + " " * n,
        "space paren": " (" * half,
        "decorators": "@a" * half,
        "heredoc starts": "<<" * half,
        "variables": "$a" * half,
        "pointer stars": "* " * half,
        "string lines": '"' + "a\n" * half,
        "assignments": "a=" * half,
        "section headers": "[a]\n" * quarter,
        "mixed printable": mixed,
        # what HTML hands to JavaScript and CSS, PHP to HTML
        "script: escaped quotes": "<script>" + '"' + '\\"' * half,
        "script: dotted names": "<script>" + "a." * half,
        "style: escaped quotes": "<style>" + "'" + "\\'" * half,
        "php: open tags": "<?php ?>" + "<a" * half,
    }
    return {name: text[:n] for name, text in {**runs, **built}.items()}


def test_each_allowed_lexer_is_named_and_other_names_are_plain() -> None:
    assert set(HIGHLIGHT_ALIASES.values()) == set(HIGHLIGHT_LEXERS)
    for alias in ("python", "json", "js", "typescript", "bash", "sql", "html", "yaml", "c"):
        assert highlight_code("x", alias) is not None, alias
    # a Pygments lexer that is not on the list (and a made-up name) shows plain
    for alias in ("nosuchlang", "perl", "haskell", "ocaml", "console", "jinja", "text"):
        assert highlight_code("x", alias) is None, alias
    html = markdown_html("```perl\nmy $x = 1;\n```")
    assert "<pre><code" in html
    assert "<span" not in html


def test_a_block_past_its_bound_is_plain() -> None:
    for alias in ("python", "c", "markdown"):
        bound = HIGHLIGHT_LEXERS[HIGHLIGHT_ALIASES[alias]]
        assert highlight_code("a" * bound, alias) is not None
        assert highlight_code("a" * (bound + 1), alias) is None
        html = markdown_html(f"```{alias}\n{'a' * (bound + 1)}\n```")
        assert "<span" not in html
        assert "a" * (bound + 1) in html


def test_an_answer_highlights_within_its_budget() -> None:
    bound = HIGHLIGHT_LEXERS["PythonLexer"]
    block = "```python\n" + "x = 1\n" * (bound // 6) + "```\n\n"
    n = int(ANSWER_HIGHLIGHT_BLOCKS) + 3
    html = markdown_html(block * n)
    highlighted = html.count("<pre style=")  # a highlighted block's box; a plain one has none
    assert highlighted == int(ANSWER_HIGHLIGHT_BLOCKS)  # the rest are plain
    assert html.count("<pre") == n
    # each answer has its own budget
    assert markdown_html(block).count("<pre style=") == 1


def test_markdown_blocks_do_not_reach_other_lexers() -> None:
    # Pygments' Markdown lexer highlights a nested fence with whatever lexer its name finds
    inner = "```markdown\n~~~perl\nmy $x = 1;\n~~~\n```"
    html = markdown_html(inner)
    assert "my $x = 1;" in html.replace("<span>", "")
    assert "$x" in html
    assert 'color:#19177C">$x' not in html


def _ends_in_child(class_name: str) -> None:
    alias = next(a for a, c in HIGHLIGHT_ALIASES.items() if c == class_name)
    code = textwrap.dedent(
        f"""
        from tests.test_highlight_bounds import shapes
        from notebook_llm.notebook.widgets.safe_html import HIGHLIGHT_LEXERS, highlight_code
        bound = HIGHLIGHT_LEXERS[{class_name!r}]
        for name, text in shapes(bound).items():
            assert highlight_code(text, {alias!r}) is not None, name
        print("finished")
        """
    )
    out = run_python(code, limit=LIMIT, what=f"{class_name} at its bound (superlinear)")
    assert "finished" in out


@pytest.mark.parametrize("class_name", sorted(HIGHLIGHT_LEXERS))
def test_every_allowed_lexer_ends_on_adversarial_blocks_at_its_bound(class_name: str) -> None:
    _ends_in_child(class_name)


# --- adapter sources (`%adapter show`, the adapter views): Pygments' Lua lexer made linear

LUA_FILES = sorted([*(ROOT / "adapters").rglob("*.lua"), *(ROOT / "notebook_llm").rglob("*.lua")])


def lua_shapes(n: int) -> dict[str, str]:
    """The shapes that made Pygments' Lua lexer quadratic, and the generic ones, at ``n``."""
    built = {
        "attribute-like names on one line": "<a" * n,
        "names before an unclosed attribute": "a< b" * n,
        "unclosed long strings": "[[a\n" * n,
        "unclosed long comments": "--[[a\n" * n,
        "unclosed level-1 strings": "[=[a\n" * n,
        "long string with wrong closers": "[==[" + "]=]" * n,
        "names and spaces before <": ("a <" + " " * 100) * n,
    }
    return {**shapes(n), **{name: text[:n] for name, text in built.items()}}


def test_the_lua_lexer_reads_the_built_in_sources_as_pygments_does() -> None:
    from pygments.lexers import LuaLexer
    from pygments.token import Error

    from notebook_llm.notebook.widgets.adapter_view import _linear_lua_lexer

    linear = _linear_lua_lexer()
    assert linear is not None  # the three rules it replaces are Pygments' current ones
    assert len(LUA_FILES) >= 10
    for path in LUA_FILES:
        source = path.read_text()
        ours = list(linear.get_tokens(source))
        assert not [t for t, _ in ours if t in Error], path
        theirs = list(LuaLexer().get_tokens(source))
        if not [t for t, _ in theirs if t in Error]:
            assert ours == theirs, path
        # else Pygments read a comparison (`c <= 1 ... >`) as an attribute, with errors
    # an attribute is still one; an unclosed long string runs to the end (as in Lua)
    tokens = list(linear.get_tokens("local x <const> = [[a\nb = 1"))
    assert ("Token.Name.Variable", "x") in [(str(t), v) for t, v in tokens]
    assert tokens[-1][1].startswith("[[a\nb = 1") or tokens[-2][1].startswith("[[a\nb = 1")


def test_adapter_sources_are_highlighted_up_to_the_bound() -> None:
    from notebook_llm.notebook.widgets.adapter_view import LUA_HIGHLIGHT_MAX_CHARS, highlight_lua

    for path in sorted((ROOT / "adapters").glob("*.lua")):
        assert "<span" in (highlight_lua(path.read_text()) or ""), path
    assert highlight_lua("x = 1\n" * (LUA_HIGHLIGHT_MAX_CHARS // 6)) is not None
    assert highlight_lua("x" * (LUA_HIGHLIGHT_MAX_CHARS + 1)) is None


def test_adversarial_lua_at_the_bound_ends() -> None:
    code = textwrap.dedent(
        """
        from tests.test_highlight_bounds import lua_shapes
        from notebook_llm.notebook.widgets.adapter_view import LUA_HIGHLIGHT_MAX_CHARS, highlight_lua
        for name, text in lua_shapes(LUA_HIGHLIGHT_MAX_CHARS).items():
            assert highlight_lua(text) is not None, name
        print("finished")
        """
    )
    out = run_python(code, limit=LIMIT, what="Lua at its bound (superlinear)")
    assert "finished" in out
