"""An answer is formatted as Markdown only up to a size bound; a longer one is shown whole as
escaped plain text, so no answer a model writes holds the kernel for long.

markdown-it-py is pure Python and linear, but slow on some shapes (``![`` repeated: about
7 s per 100,000 characters on a loaded 2-core machine, 40 times a realistic answer's cost per
character at 25,000). Every answer, reasoning and tool description goes through
:func:`markdown_html`, which formats at most :data:`MARKDOWN_MAX_CHARS` characters. Here the
adversarial shapes run at the bound and at a megabyte in child processes with a wall-clock
limit far above what the bound allows: the verdict is that they end, not how fast.
``bench/bench_markdown.py`` measures the times; ``docs/reliability.md`` has the figures.
"""

from __future__ import annotations

import html
import re
import textwrap

from notebook_llm.api.mcp.servers import ServerStatus
from notebook_llm.core.errors import ErrorCode, LlmError
from notebook_llm.notebook.widgets.final import FinalView, ToolCallInfo
from notebook_llm.notebook.widgets.mcp_view import McpServerTable
from notebook_llm.notebook.widgets.render import ErrorBox, Result
from notebook_llm.notebook.widgets.safe_html import MARKDOWN_MAX_CHARS, PLAIN_PIECE, markdown_html
from tests.child_python import run_python

#: Seconds a child may run: the shapes at the bound take about a minute together on a loaded
#: 2-core machine; a megabyte past the bound is escaped in well under a second.
LIMIT = 600.0

#: A realistic answer, repeated to a length (the bench's baseline).
REALISTIC = """## A heading

Some prose with **bold**, *emphasis*, `code`, and a [link](https://example.com/docs).
Another sentence follows here, with a list:

- first item with `x = 1`
- second item, see https://example.org/page
- third item

```python
def f(x):
    return x * 2
```

> A quote of a sentence or two, written the way answers are.

| a | b |
|---|---|
| 1 | 2 |

"""


def markdown_shapes(n: int) -> dict[str, str]:
    """Adversarial Markdown of exactly ``n`` characters (a shape repeated, then cut)."""
    half, third = n // 2 + 1, n // 3 + 1
    runs = {f"run of {c!r}": c * n for c in "[]!*_`<&>~\\|#-"}
    built = {
        "image starts": "![" * half,
        "emphasis": "*a" * half,
        "underscores": "_a" * half,
        "strong openers": "**a" * third,
        "mixed emphasis": "*_" * half,
        "open links": "[a](" * (n // 4 + 1),
        "link labels": "[a]" * third,
        "images with open titles": "![a](b " * (n // 7 + 1),
        "open tags": "<a" * half,
        "char references": "&#" * half,
        "entities": "&a" * half,
        "code spans": "`a" * half,
        "backslash escapes": "\\*" * half,
        "nested quotes": (">" * 1000 + " a\n") * (n // 1003 + 1),
        "quote lines": "> " * half,
        "nested lists": "".join(" " * (i % 40) + "- a\n" for i in range(n // 20 + 1)),
        "list of links": "- [" * third,
        "table rows": "|a" * half,
        "headings": "# a\n" * (n // 4 + 1),
        "many urls": "http://example.com/a/b?c=d " * (n // 27 + 1),
        "links and emphasis": "[a *b* _c_](http://x.y/z) **w** " * (n // 32 + 1),
        "realistic answer": REALISTIC * (n // len(REALISTIC) + 1),
    }
    return {name: text[:n] for name, text in {**runs, **built}.items()}


def _plain_body(page: str) -> str:
    """The text of the plain ``<pre>`` of ``page``, unescaped."""
    start = page.index('<pre style="white-space:pre-wrap">') + len(
        '<pre style="white-space:pre-wrap">'
    )
    body = page[start : page.index("</pre>", start)]
    return html.unescape(body.replace("<span>", "").replace("</span>", ""))


HOSTILE = (
    "<script>alert(1)</script> <img src=x onerror=alert(2)> [a](javascript:alert(3)) "
    "![i](https://evil.example/?q=secret) $\\href{javascript:x}{y}$ &amp; &#60;b&#62; "
    "</pre><b>out</b> `code` **bold**\n"
)


def test_an_answer_over_the_bound_is_shown_whole_and_escaped() -> None:
    text = (HOSTILE * (MARKDOWN_MAX_CHARS // len(HOSTILE) + 2))[: MARKDOWN_MAX_CHARS + 1]
    page = markdown_html(text)
    assert "Too large to format" in page
    assert _plain_body(page) == text  # whole: nothing cut, nothing changed
    for tag in ("<script", "<img", "<b>", "<a ", "<strong>", "<code"):
        assert tag not in page, tag
    # the turn's static end and a Result show it the same way
    for shown in (FinalView(text).html(), Result(text)._repr_mimebundle_()["text/html"]):
        assert "Too large to format" in shown
        assert _plain_body(shown) == text
        assert "<script" not in shown
        assert "<img" not in shown
    # a plain (--format text) answer too
    assert _plain_body(FinalView(text, fmt="text").html()) == text


def test_plain_text_full_of_references_is_cleaned_in_linear_pieces() -> None:
    # one text node of 1 MB of "&amp;" cost nh3 seconds (quadratic); in pieces, linear
    text = "&" * 1_000_000
    shown = FinalView(text, fmt="text").html()
    assert _plain_body(shown) == text
    assert shown.count("<span>") == len(text) // PLAIN_PIECE + 1


def _text_nodes(page: str) -> list[str]:
    """The text between the tags of ``page`` (still escaped)."""
    return re.split(r"<[^>]*>", page)


def _shown_text(page: str) -> str:
    return html.unescape("".join(_text_nodes(page)))


def test_every_untrusted_field_reaches_the_sanitizer_in_pieces() -> None:
    # nh3 is quadratic in the "&" of one text node (1,000,000 of them: 15 s, holding the cell).
    # Whatever a model, a tool, a server or an error writes is cut into pieces before it.
    amps = "&" * (PLAIN_PIECE * 25)
    error = LlmError(amps, ErrorCode.SERVER, provider=amps)
    pages = {
        "tool call": FinalView(
            "ok", tools=[ToolCallInfo(amps, amps, result=amps, status="ok", source=amps)]
        ).html(),
        "error box": ErrorBox(error, hint=amps, excerpt=[(1, amps, True)])._repr_mimebundle_()[
            "text/html"
        ],
        "turn with an error": FinalView("", error=ErrorBox(error), footer=amps).html(),
        "mcp table": McpServerTable(
            [ServerStatus(amps, amps, "cmd", amps, "failed", problem=amps, skipped=[amps])]
        ).html(),
    }
    for name, page in pages.items():
        longest = max(node.count("&") for node in _text_nodes(page))
        assert longest <= PLAIN_PIECE, (name, longest)
        assert amps in _shown_text(page), name  # whole, only cut into pieces


def test_an_answer_at_the_bound_is_formatted() -> None:
    text = ("**bold** " * MARKDOWN_MAX_CHARS)[:MARKDOWN_MAX_CHARS]
    page = markdown_html(text)
    assert "Too large" not in page
    assert "<strong>bold</strong>" in page


def _ends_in_child(n: int, expect_plain: bool) -> None:
    code = textwrap.dedent(
        f"""
        from tests.test_markdown_bounds import markdown_shapes
        from notebook_llm.notebook.widgets.safe_html import markdown_html
        for name, text in markdown_shapes({n}).items():
            page = markdown_html(text)
            assert ("Too large to format" in page) == {expect_plain!r}, name
        print("finished")
        """
    )
    out = run_python(code, limit=LIMIT, what=f"Markdown of {n:,} characters")
    assert "finished" in out


def test_adversarial_markdown_at_the_bound_ends() -> None:
    _ends_in_child(MARKDOWN_MAX_CHARS, expect_plain=False)


def test_adversarial_markdown_of_a_megabyte_ends() -> None:
    _ends_in_child(1_000_000, expect_plain=True)
