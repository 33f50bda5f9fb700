"""Untrusted Markdown to self-contained, sanitized HTML: the static end of a turn.

An answer (and a provider's error message, a tool's result) is untrusted: a prompt-injected
model writes whatever it is told to. JupyterLab shows the outputs of a cell the user ran as
*trusted*, without its own sanitizer, so what this module returns must be safe by itself:

1. ``markdown-it-py`` (CommonMark, plus tables, strikethrough and bare URLs as links, as in
   GitHub's Markdown and the live pane) turns Markdown into HTML with raw HTML off (``<b>`` in an answer shows as text) and every link target checked by
   :func:`safe_link` (relative, ``http``, ``https`` or ``mailto``, however it is spelled).
2. An image becomes a link to it (``image: alt``): a browser fetches a remote image as soon as
   it is shown, and a URL an answer chose can carry what the answer knows (a prompt-injected
   answer leaking the conversation). Nothing is fetched until the reader clicks.
3. A fenced code block with a language Pygments knows is highlighted, with inline styles
   (no stylesheet is needed, so it shows the same in every reader).
4. ``nh3`` (ammonia) cleans the result with an explicit allow-list of tags, attributes, classes
   and style values: whatever the steps above let through by mistake, no script, event
   handler, ``javascript:``/``data:`` URL, image, form or CSS ``url()`` survives.
5. :func:`isolated` wraps it in a ``div`` whose classes tell MathJax (2: ``tex2jax_ignore``,
   3: ``mathjax_ignore``) not to typeset inside: JupyterLab, Notebook 7 and nbconvert's HTML
   run MathJax over HTML outputs too, and TeX can carry a link or a style out
   (``$\\href{javascript:...}{x}$``, ``\\style``, ``\\class``, ``\\unicode``...). Math in an
   answer shows as its TeX source, as it does on GitHub and in VS Code.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

import nh3
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

#: The schemes a link may have (a relative link has none).
URL_SCHEMES = frozenset({"http", "https", "mailto"})
#: The classes that keep MathJax 2 and 3 out of an output (and everything inside it).
NO_MATH_CLASSES = "tex2jax_ignore mathjax_ignore"
#: Longer code blocks are shown unhighlighted: Pygments takes about a second per megabyte.
HIGHLIGHT_MAX_CHARS = 100_000

_SCHEME = re.compile(r"([a-z][a-z0-9+.-]*):")
_CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f]")


#: How many rounds of decoding a link target may need; one that still changes after that is
#: refused (a target nested 10,000 deep would otherwise cost 10,000 passes over it).
DECODE_ROUNDS = 4


def safe_link(url: str) -> bool:
    """Whether a link may point at ``url``: relative, or ``http``/``https``/``mailto`` once it
    is percent-decoded and its character references decoded (again, up to ``DECODE_ROUNDS``
    times) and stripped of control characters and spaces, as a browser strips them.
    markdown-it hands it over with backslash escapes and references decoded once; nh3 checks
    the scheme again on the HTML."""
    for _ in range(DECODE_ROUNDS):
        decoded = html.unescape(unquote(url))
        if decoded == url:
            scheme = _SCHEME.match(_CONTROL_OR_SPACE.sub("", url).lower())
            return scheme is None or scheme.group(1) in URL_SCHEMES
        url = decoded
    return False


_FORMATTER = HtmlFormatter(noclasses=True, nobackground=True, nowrap=True)
#: The box of a highlighted block: Pygments' default colours are for a light background, so the
#: box brings its own (readable in a dark theme too).
_CODE_BOX = "background:#f8f8f8;color:#1f1f1f;padding:6px 8px;border-radius:4px;line-height:125%"


def highlight_code(code: str, lang: str) -> str | None:
    """``code`` as a highlighted ``<pre>`` when Pygments knows ``lang`` (any alias), else
    ``None`` (markdown-it then writes a plain, escaped ``<pre><code>``)."""
    name = lang.strip().lower()
    if not name or len(code) > HIGHLIGHT_MAX_CHARS:
        return None
    try:
        lexer = get_lexer_by_name(name)
    except ClassNotFound:
        return None
    css = re.sub(r"[^\w+-]", "", name)
    body = highlight(code, lexer, _FORMATTER)
    return f'<pre style="{_CODE_BOX}"><code class="language-{css}">{body}</code></pre>'


def _image_as_link(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """``![alt](src)`` as ``<a href="src">image: alt</a>`` (see the module docstring)."""
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = self.renderInlineAsText(token.children or [], options, env)
    href = f' href="{html.escape(src)}"' if src else ""
    return f"<a{href}>image: {html.escape(alt or src)}</a>"


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": True, "highlight": _highlight_option})
    md.enable(["table", "strikethrough", "linkify"])  # as GitHub and the live pane (marked)
    md.validateLink = safe_link  # type: ignore[method-assign]
    md.add_render_rule("image", _image_as_link)
    return md


def _highlight_option(code: str, lang: str, attrs: str) -> str:
    return highlight_code(code, lang) or ""  # "": markdown-it writes the plain block


_MD = _markdown()

# What may be in the HTML, and nothing else. Classes and styles are filtered value by value
# (_attribute), links by scheme (nh3, after markdown-it's validateLink).
_TAGS = {
    "p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "pre", "code", "blockquote",
    "em", "strong", "b", "i", "del", "s", "a", "br", "hr", "table", "thead", "tbody", "tr",
    "th", "td", "span", "div", "details", "summary", "sup", "sub",
}  # fmt: skip
_ATTRIBUTES = {
    "*": set(),  # no attribute on every tag (nh3 would allow lang and title)
    "a": {"href", "title"},
    "ol": {"start"},
    "th": {"style"},
    "td": {"style"},
    "div": {"class", "style"},
    "span": {"class", "style"},
    "pre": {"style"},
    "code": {"class"},
    "details": {"class"},
}
_CLASS = re.compile(
    r"notebook-llm-[a-z]+(?:-[a-z]+)*|language-[\w+-]+|tex2jax_ignore|mathjax_ignore"
)
# A declaration's value: colours, lengths, keywords. No "(" (no url(), var(), expression()),
# no backslash or quote (no CSS escapes or strings). Checked by hand (_declaration_ok): the
# regex for it had white space in two adjacent quantifiers and backtracked quadratically.
_PROPERTY_NAME = re.compile(r"[a-z-]+")
_VALUE_PUNCTUATION = frozenset("#_ .,%-")
_STYLE_PROPERTIES = {
    "color", "background", "background-color", "font-weight", "font-style", "font-size",
    "text-decoration", "text-align", "border", "border-left", "border-radius", "padding",
    "margin", "margin-top", "white-space", "opacity", "line-height",
}  # fmt: skip


def _attribute(tag: str, name: str, value: str) -> str | None:
    if name == "class":
        kept = [c for c in value.split() if _CLASS.fullmatch(c)]
        return " ".join(kept) or None
    if name == "style":
        declarations = [d for d in value.split(";") if d.strip()]
        return value if all(_declaration_ok(d) for d in declarations) else None
    return value


def _declaration_ok(declaration: str) -> bool:
    """``name: value`` with a lower-case property name and a value of plain characters."""
    name, colon, value = declaration.partition(":")
    value = value.strip()
    return (
        bool(colon and value)
        and _PROPERTY_NAME.fullmatch(name.strip()) is not None
        and all(ch in _VALUE_PUNCTUATION or ch.isalnum() for ch in value)
    )


_CLEANER = nh3.Cleaner(
    tags=_TAGS,
    clean_content_tags={"script", "style"},
    attributes=_ATTRIBUTES,
    attribute_filter=_attribute,
    url_schemes=set(URL_SCHEMES),
    filter_style_properties=_STYLE_PROPERTIES,
    link_rel="noopener noreferrer",
    set_tag_attribute_values={"a": {"target": "_blank"}},
    strip_comments=True,
)


def clean(fragment: str) -> str:
    """``fragment`` through the allow-list (see the module docstring)."""
    return _CLEANER.clean(fragment)


def markdown_html(markdown: str) -> str:
    """Untrusted Markdown as sanitized HTML (steps 1-4 of the module docstring)."""
    return clean(_MD.render(markdown))


def isolated(fragment: str, kind: str = "final") -> str:
    """``fragment`` in a ``div.notebook-llm-{kind}`` that MathJax does not typeset (step 5).

    The fragment must be sanitized already (no ``mathjax_process`` class can be inside: the
    allow-list has none, so nothing re-enables typesetting below the wrapper)."""
    return f'<div class="notebook-llm-{kind} {NO_MATH_CLASSES}">{fragment}</div>'


def escape(text: Any) -> str:
    """``text`` as HTML text (``&``, ``<``, ``>`` and quotes escaped)."""
    return html.escape(str(text), quote=True)
