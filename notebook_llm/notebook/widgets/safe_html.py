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
3. A fenced code block in one of the languages of :data:`HIGHLIGHT_LEXERS` is highlighted
   by Pygments, with inline styles (no stylesheet is needed, so it shows the same in every
   reader), when it is within that lexer's size bound and the answer's highlighting budget
   (:data:`ANSWER_HIGHLIGHT_BLOCKS`); any other block is shown as plain, escaped text. Pygments'
   lexers are regexes, many backtrack superlinearly, and a regex holds the GIL (Stop and the
   kernel interrupt wait for it): the bounds keep the worst block short.
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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from urllib.parse import unquote

import nh3
import pygments.lexers
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer

#: The schemes a link may have (a relative link has none).
URL_SCHEMES = frozenset({"http", "https", "mailto"})
#: The classes that keep MathJax 2 and 3 out of an output (and everything inside it).
NO_MATH_CLASSES = "tex2jax_ignore mathjax_ignore"
#: The lexers a code block may be highlighted with (Pygments class name), each with the
#: longest block it is given, in characters. A longer block, or one in another language, is
#: shown as plain escaped text. Pygments' lexers are regexes and many backtrack
#: superlinearly on shapes a model can write (C's function rule over ``a``, 5,000 spaces and
#: ``(`` took 4.8 s, C# over 2,500 ``a\n`` 11.7 s, a Makefile of 5,000 characters over a
#: minute); a regex holds the GIL, so nothing can stop it once it runs. Each bound is the
#: largest of 500, 1,000, 2,000, ... 64,000 characters at which every adversarial shape of
#: ``tests/test_highlight_bounds.py`` was highlighted in under :data:`HIGHLIGHT_TARGET_S` on a loaded
#: 2-core machine (``bench/bench_highlight.py`` measures them; ``docs/reliability.md`` has
#: the figures). Left out: Makefile (0.12 s at 1,000 characters, 0.55 s at 2,000, over a
#: minute at 5,000: it grows too fast to trust a bound); any lexer not named here. A lexer
#: that hands parts to another (HTML's scripts and styles, PHP's HTML) has the smaller bound.
HIGHLIGHT_LEXERS: dict[str, int] = {
    "BashLexer": 32_000,
    "CLexer": 1_000,
    "CSharpLexer": 1_000,
    "CppLexer": 500,
    "CssLexer": 4_000,
    "DiffLexer": 32_000,
    "DockerLexer": 16_000,
    "GoLexer": 4_000,
    "HtmlLexer": 2_000,  # measured 8,000; its <script> and <style> are JavaScript's and CSS's
    "IniLexer": 2_000,
    "JavaLexer": 2_000,
    "JavascriptLexer": 2_000,  # measured 4,000; TypeScript (the same rules) 2,000
    "JsonLexer": 64_000,
    "KotlinLexer": 16_000,
    "LuaLexer": 4_000,
    "MarkdownLexer": 1_000,
    "PhpLexer": 2_000,  # measured 64,000; the text outside <?php is HTML's
    "PowerShellLexer": 8_000,
    "PythonLexer": 8_000,
    "RubyLexer": 8_000,
    "RustLexer": 8_000,
    "SLexer": 2_000,
    "SqlLexer": 32_000,
    "SwiftLexer": 16_000,
    "TOMLLexer": 4_000,
    "TypeScriptLexer": 2_000,
    "XmlLexer": 4_000,
    "YamlLexer": 4_000,
}
#: The time the bounds above were chosen for: the worst block at its bound, measured.
HIGHLIGHT_TARGET_S = 0.5
#: Names a fence may give, and the lexer each one means (other names: plain text).
HIGHLIGHT_ALIASES: dict[str, str] = {
    alias: class_name
    for class_name, aliases in {
        "PythonLexer": "python py python3 py3 pyi",
        "JsonLexer": "json jsonc json5",
        "JavascriptLexer": "javascript js mjs cjs node",
        "TypeScriptLexer": "typescript ts",
        "BashLexer": "bash sh shell zsh ksh",
        "SqlLexer": "sql",
        "HtmlLexer": "html htm xhtml",
        "XmlLexer": "xml svg xsd",
        "CssLexer": "css",
        "YamlLexer": "yaml yml",
        "TOMLLexer": "toml",
        "LuaLexer": "lua",
        "CLexer": "c h",
        "CppLexer": "cpp c++ cxx cc hpp",
        "JavaLexer": "java",
        "GoLexer": "go golang",
        "RustLexer": "rust rs",
        "SLexer": "r",
        "MarkdownLexer": "markdown md",
        "DiffLexer": "diff patch udiff",
        "DockerLexer": "dockerfile docker",
        "KotlinLexer": "kotlin kt",
        "SwiftLexer": "swift",
        "PhpLexer": "php",
        "RubyLexer": "ruby rb",
        "PowerShellLexer": "powershell pwsh ps1",
        "CSharpLexer": "csharp cs c#",
        "IniLexer": "ini cfg",
    }.items()
    if class_name in HIGHLIGHT_LEXERS
    for alias in aliases.split()
}
#: Per answer, the highlighting budget in blocks at their bound: a block costs its length over
#: its lexer's bound (a lexer is at worst as slow per character below its bound as at it),
#: and a block that would pass the budget is shown plain. So one answer of many blocks is
#: highlighted in at most about this many times :data:`HIGHLIGHT_TARGET_S`.
ANSWER_HIGHLIGHT_BLOCKS = 4.0

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


#: What is left of the current answer's budget (see :func:`highlight_budget`); outside one,
#: each call has a budget of one block.
_BUDGET: ContextVar[list[float] | None] = ContextVar("notebook_llm_highlight_budget", default=None)


@contextmanager
def highlight_budget(blocks: float = ANSWER_HIGHLIGHT_BLOCKS) -> Iterator[None]:
    """Within the block, :func:`highlight_code` calls share ``blocks`` (one answer's budget)."""
    token = _BUDGET.set([blocks])
    try:
        yield
    finally:
        _BUDGET.reset(token)


@cache
def _lexer(class_name: str) -> Lexer:
    cls = getattr(pygments.lexers, class_name)
    # Markdown's lexer highlights a nested fence with whatever lexer its name finds: off, so
    # nothing outside the allow-list runs.
    options = {"handlecodeblocks": False} if class_name == "MarkdownLexer" else {}
    lexer: Lexer = cls(**options)
    return lexer


def lexer_bound(lang: str) -> tuple[str, int] | None:
    """The lexer (class name) a fence's language means and its bound, or ``None``."""
    class_name = HIGHLIGHT_ALIASES.get(lang.strip().lower())
    if class_name is None:
        return None
    return class_name, HIGHLIGHT_LEXERS[class_name]


def highlight_code(code: str, lang: str) -> str | None:
    """``code`` as a highlighted ``<pre>`` when ``lang`` names a lexer of
    :data:`HIGHLIGHT_LEXERS`, ``code`` is within its bound and the answer's budget has room,
    else ``None`` (markdown-it then writes a plain, escaped ``<pre><code>``)."""
    found = lexer_bound(lang)
    if found is None:
        return None
    class_name, bound = found
    if len(code) > bound:
        return None
    budget = _BUDGET.get() or [1.0]
    cost = len(code) / bound
    if cost > budget[0]:
        return None
    budget[0] -= cost
    css = re.sub(r"[^\w+-]", "", lang.strip().lower())
    body = highlight(code, _lexer(class_name), _FORMATTER)
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


#: Bare URLs and e-mail addresses become links (as in GitHub's Markdown and the live pane),
#: found by linkify-it-py in one word (a run without white space, which no link spans) at a
#: time, each word of at most this many characters (a longer one stays text). linkify-it's
#: patterns backtrack: a 40,000-character word of ``http://a/(`` took 19 s, and its cost grows
#: with the square of the word's length (8,000 characters: 0.2 s; 1,000: about 6 ms).
LINKIFY_MAX_WORD = 1_000
#: Per answer, the sum of the squares of the words' lengths handed to linkify-it (its cost is
#: at worst about that): 32 words at the bound, a fraction of a second; past it the rest of the
#: answer's bare URLs stay text. Prose spends little of it (a short word costs its length
#: squared, a few dozen).
LINKIFY_BUDGET = 32 * LINKIFY_MAX_WORD**2


def _link_tokens(
    state: StateCore, text: str, level: int, budget: list[int], escaped: bool
) -> list[Token]:
    """``text`` as text and link tokens (the links linkify-it finds word by word); none at
    its start when it follows an escape (markdown-it's rule: ``http\\://x`` is no link)."""
    linkify = state.md.linkify
    if linkify is None:  # linkify-it-py is a dependency; markdown-it leaves it optional
        return []
    nodes: list[Token] = []
    last = 0
    for word in _words(text):
        start, end = word
        size = end - start
        if size > LINKIFY_MAX_WORD or size * size > budget[0]:
            continue
        chunk = text[start:end]
        if not any(c in chunk for c in ".:@"):
            continue  # no scheme, host or address: nothing for linkify-it to find
        budget[0] -= size * size
        if not linkify.test(chunk):
            continue
        for link in linkify.match(chunk) or []:
            url = state.md.normalizeLink(link.url)
            if (escaped and start + link.index == 0) or not state.md.validateLink(url):
                continue
            if link.schema:
                shown = state.md.normalizeLinkText(link.text)
            else:  # a bare host: markdown-it's own rule, http:// added and taken off
                shown = state.md.normalizeLinkText("http://" + link.text).removeprefix("http://")
            at = start + link.index
            if at > last:
                nodes.append(_text_token(text[last:at], level))
            opening = Token("link_open", "a", 1, attrs={"href": url}, level=level)
            opening.markup, opening.info = "linkify", "auto"
            closing = Token("link_close", "a", -1, level=level)
            closing.markup, closing.info = "linkify", "auto"
            nodes += [opening, _text_token(shown, level + 1), closing]
            last = start + link.last_index
    if not nodes:
        return []
    if last < len(text):
        nodes.append(_text_token(text[last:], level))
    return nodes


def _text_token(content: str, level: int) -> Token:
    return Token("text", "", 0, content=content, level=level)


#: A word: one class, linear.
_WORD = re.compile(r"\S+")


def _words(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each run of characters that are not white space."""
    return (m.span() for m in _WORD.finditer(text))


def _linkify(state: StateCore) -> None:
    """markdown-it's ``linkify`` core rule, with linkify-it run word by word within
    :data:`LINKIFY_MAX_WORD` and :data:`LINKIFY_BUDGET`. Written here because markdown-it-py's
    rules hand linkify-it whole texts (its inline rule slices the rest of the source at each
    ``://``, its core rule copies the token list for each text it links: both quadratic) and
    linkify-it's patterns backtrack over long words."""
    budget = [LINKIFY_BUDGET]
    for inline in state.tokens:
        if inline.type != "inline" or not inline.children:
            continue
        children: list[Token] = []
        in_link = 0
        for i, token in enumerate(inline.children):
            in_link += token.type == "link_open"
            in_link -= token.type == "link_close"
            nodes = []
            if token.type == "text" and not in_link:
                escaped = i > 0 and inline.children[i - 1].type == "text_special"
                nodes = _link_tokens(state, token.content, token.level, budget, escaped)
            children.extend(nodes or [token])
        inline.children = children


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": True, "highlight": _highlight_option})
    md.enable(["table", "strikethrough", "linkify"])  # as GitHub and the live pane (marked)
    # Bare links by our core rule only (see _linkify): not markdown-it's inline rule
    md.inline.ruler.disable("linkify")
    md.core.ruler.at("linkify", _linkify)
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


#: The longest text formatted as Markdown, in characters; a longer one is shown whole as
#: escaped plain text under a one-line note. markdown-it-py is linear but slow: measured by
#: ``bench/bench_markdown.py`` on a loaded 2-core machine, 100,000 characters of its worst
#: shape (``![`` repeated) took about 7 s, of a realistic answer under 1 s, and twice the length
#: about twice the time (no shape grew faster). A model writes a longer answer rarely (about
#: 25,000 tokens), and then reading it whole matters more than its formatting.
MARKDOWN_MAX_CHARS = 100_000


#: Untrusted text is escaped in pieces of this many characters, each in its own ``<span>``:
#: nh3 (html5ever) is quadratic in the number of ``&`` in one text node (``&amp;``, ``&#38;``
#: and ``& `` alike; 250,000 of them 1.2 s, 1,000,000 15 s on a quiet machine), and linear over
#: many short nodes. ``<`` and ``>`` are linear.
PLAIN_PIECE = 4_096


def text_html(text: str) -> str:
    """Untrusted ``text`` as HTML text (an element's content, never an attribute): escaped
    (quotes too, as ``html.escape`` does, so output that is not cleaned stays as it was), and
    when longer than :data:`PLAIN_PIECE`, cut into ``<span>`` pieces so that :func:`clean`
    stays linear on it. Every string a model, a tool, a server or a provider's error wrote
    reaches HTML that :func:`clean` reads through this (or through :func:`markdown_html`, whose
    text is bounded by :data:`MARKDOWN_MAX_CHARS`)."""
    if len(text) <= PLAIN_PIECE:
        return html.escape(text)
    return "".join(
        f"<span>{html.escape(text[i : i + PLAIN_PIECE])}</span>"
        for i in range(0, len(text), PLAIN_PIECE)
    )


def plain_html(text: str) -> str:
    """``text`` whole as escaped HTML text (:func:`text_html`) in a ``<pre>`` that wraps."""
    return f'<pre style="white-space:pre-wrap">{text_html(text)}</pre>'


def too_large_html(text: str) -> str:
    """``text`` whole, as escaped plain text, under a note that it was too large to format."""
    return (
        f"<p><em>Too large to format as Markdown ({len(text):,} characters, over "
        f"{MARKDOWN_MAX_CHARS:,}): shown as plain text.</em></p>{plain_html(text)}"
    )


def markdown_html(markdown: str) -> str:
    """Untrusted Markdown as sanitized HTML (steps 1-4 of the module docstring); past
    :data:`MARKDOWN_MAX_CHARS`, as plain text (:func:`too_large_html`)."""
    if len(markdown) > MARKDOWN_MAX_CHARS:
        return clean(too_large_html(markdown))
    with highlight_budget():
        return clean(_MD.render(markdown))


def isolated(fragment: str, kind: str = "final") -> str:
    """``fragment`` in a ``div.notebook-llm-{kind}`` that MathJax does not typeset (step 5).

    The fragment must be sanitized already (no ``mathjax_process`` class can be inside: the
    allow-list has none, so nothing re-enables typesetting below the wrapper)."""
    return f'<div class="notebook-llm-{kind} {NO_MATH_CLASSES}">{fragment}</div>'
