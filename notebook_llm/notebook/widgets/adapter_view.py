"""How adapters look in a notebook: a Lua error with its line in context, adapter tables, and
a conformance report, each as one :class:`Rich` output (``text/html`` + ``text/plain``, both
redacted). Used by ``%%adapter`` / ``%adapter`` and the adapter playground; nothing here
runs an adapter or knows about magics.

:func:`report_html` is the HTML twin of :func:`notebook_llm.conformance.report.render_text`:
both take a fixture's state from :func:`~notebook_llm.conformance.report.fixture_state`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from functools import cache
from typing import Any

from ...adapters.lua.lines import excerpt, lua_line_of
from ...core.errors import ErrorCode, LlmError
from ...core.redaction import redact
from .safe_html import isolated, text_html

__all__ = [
    "Rich",
    "adapter_excerpt",
    "error_view",
    "excerpt_html",
    "excerpt_text",
    "highlight_lua",
    "html_table",
    "report_html",
    "text_table",
]


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """``rows`` under ``headers`` as aligned plain-text columns (two spaces apart, no trailing
    blanks): the one text-table writer of ``%adapter list`` and ``%llm providers``."""
    table = [list(headers), *(list(r) for r in rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table
    )


class Rich:
    """A displayable with ``text/html`` and a ``text/plain`` fallback (both redacted)."""

    def __init__(self, plain: str, html_text: str | None = None) -> None:
        self.plain = redact(plain)
        self.html = redact(html_text) if html_text is not None else None

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        out = {"text/plain": self.plain}
        if self.html is not None:
            # Kept out of MathJax: an adapter's error or a provider's text may hold TeX that
            # carries a link or a style (see safe_html.isolated).
            out["text/html"] = isolated(self.html, "output")
        return out

    def __repr__(self) -> str:
        return self.plain


#: The longest adapter source highlighted, in characters (a longer one is shown plain). The
#: lexer of :func:`_linear_lua_lexer` is linear but costs about 11 us a character on its
#: worst shape (``<a`` repeated: 0.77 s at 64,000 on a loaded 2-core machine, 2.9 s at
#: 256,000); the built-in adapters are up to 13,500 characters, their libraries up to 42,000.
LUA_HIGHLIGHT_MAX_CHARS = 64_000


@cache
def _linear_lua_lexer() -> Any:
    """Pygments' Lua lexer with its three superlinear rules made linear; the same tokens on
    the built-in adapters (``tests/test_highlight_bounds.py`` compares them).

    Pygments' own lexer is quadratic on shapes a drafted adapter may carry from a hostile
    body: a name's lookahead for an attribute (``<.+?>``) scans the rest of its line at each
    name (8,000 characters of ``<a`` on one line: 0.84 s, 16,000: 3.1 s), and an unclosed long
    string or comment (``[[``, ``[=[``, ``--[[``) scans to the end of the source at each one
    (16,000 characters of ``--[[a`` lines: 2.2 s). Here an attribute is ``< name >`` (all Lua
    allows), and a long string or comment not closed runs to the end, as in Lua (an unclosed
    one is an error there), so each is scanned once."""
    from pygments.lexers import LuaLexer
    from pygments.token import Comment, Name, String

    replaced = {
        r"(?:--\[(?P<level>=*)\[[\w\W]*?\](?P=level)\])": (
            r"--\[(=*)\[[\w\W]*?(?:\]\1\]|\Z)",
            Comment.Multiline,
        ),
        r"(?s)\[(=*)\[.*?\]\1\]": (r"(?s)\[(=*)\[.*?(?:\]\1\]|\Z)", String),
        r"[A-Za-z_]\w*(?=\s*<.+?>)": (r"[A-Za-z_]\w*(?=\s*<\s*[^\W\d]\w*\s*>)", Name.Variable),
    }
    tokens: dict[str, list[Any]] = {}
    found = set()
    for state, rules in LuaLexer.tokens.items():
        tokens[state] = []
        for rule in rules:
            if isinstance(rule, tuple) and isinstance(rule[0], str) and rule[0] in replaced:
                found.add(rule[0])
                pattern, kind = replaced[rule[0]]
                rule = (pattern, kind, *rule[2:])
            tokens[state].append(rule)
    if found != set(replaced):  # a Pygments release changed the rules: plain text then
        return None
    return type("LinearLuaLexer", (LuaLexer,), {"tokens": tokens})()


def highlight_lua(source: str) -> str | None:
    """Source as highlighted HTML (inline styles), or ``None`` (shown plain) without pygments,
    past :data:`LUA_HIGHLIGHT_MAX_CHARS`, or when Pygments' Lua rules are not the ones
    :func:`_linear_lua_lexer` made linear."""
    if len(source) > LUA_HIGHLIGHT_MAX_CHARS:
        return None
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
    except ImportError:  # pragma: no cover - pygments comes with IPython
        return None
    lexer = _linear_lua_lexer()
    if lexer is None:
        return None
    return str(highlight(source, lexer, HtmlFormatter(noclasses=True, linenos="inline")))


def error_view(err: LlmError, source: str | None, *, note: str = "", context: int = 3) -> Rich:
    """An adapter error: code, adapter, hook, message and the Lua line with context around it."""
    line = lua_line_of(err)
    where = ", ".join(
        f"{k} {v}" for k, v in (("adapter", err.adapter), ("hook", err.hook), ("line", line)) if v
    )
    head = f"{err.code}: {err.message}" + (f" ({where})" if where else "")
    plain = [head]
    rows = excerpt(source, line, context) if source is not None and line is not None else []
    plain += excerpt_text(rows)
    if note:
        plain.append(note)
    body = (
        '<div style="border-left:4px solid #c00;padding:4px 8px">'
        f"<b>{html.escape(head)}</b>"
        + excerpt_html(rows)
        + (f"<div><i>{html.escape(note)}</i></div>" if note else "")
        + "</div>"
    )
    return Rich("\n".join(plain), body)


#: Errors that name a line of an adapter script (a compile error, a failing or runaway hook).
_SCRIPT_ERRORS = frozenset(
    {
        ErrorCode.ADAPTER_ERROR,
        ErrorCode.ADAPTER_TIMEOUT,
        ErrorCode.ADAPTER_MEMORY,
        ErrorCode.INVALID_ADAPTER,
    }
)


def adapter_excerpt(engine: Any, err: LlmError, context: int = 2) -> list[tuple[int, str, bool]]:
    """The lines of the failing adapter's script around an error's Lua line, for the error box
    of a turn (a runtime error shown as a compile error is); none when the error names no line
    or the adapter has no source."""
    if err.code not in _SCRIPT_ERRORS or not err.adapter or err.lua_line is None:
        return []
    try:
        source = getattr(engine.adapter(err.adapter), "source", None)
    except LlmError:
        return []
    return excerpt(source, err.lua_line, context) if isinstance(source, str) else []


def excerpt_text(rows: Sequence[tuple[int, str, bool]]) -> list[str]:
    """Lines of a script around an error (from :func:`notebook_llm.adapters.lua.lines.excerpt`) as text,
    the error's line marked with ``>``."""
    return [f"{'>' if hit else ' '} {n:4} | {text}" for n, text, hit in rows]


def excerpt_html(rows: Sequence[tuple[int, str, bool]]) -> str:
    """The same lines as a ``<pre>``, the error's line highlighted ("" for no lines)."""
    if not rows:
        return ""
    divs = "".join(
        f'<div style="{"background:#fdd;font-weight:bold" if hit else ""}">'
        f'<span style="color:#888">{n:4} </span>{text_html(text) or "&nbsp;"}</div>'
        for n, text, hit in rows
    )
    return f'<pre style="margin:4px 0">{divs}</pre>'


#: Every cell of our tables reads from the left: JupyterLab right-aligns the cells of an HTML
#: output's tables (``:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon td``), which suits
#: numbers, not event names and JSON.
_LEFT = "style='text-align:left'"


def html_table(headers: list[str], rows: list[list[str]]) -> str:
    """``rows`` under ``headers`` as an HTML table (cells escaped), read from the left."""
    head = "".join(f"<th {_LEFT}>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td {_LEFT}>{html.escape(c)}</td>" for c in row) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def report_html(report: Any) -> str:
    """A :class:`~notebook_llm.conformance.CheckReport` as HTML tables."""
    from ...conformance import event_rows, summarize
    from ...conformance.report import fixture_state, verdict_line

    color = "#070" if report.passed else "#c00"
    parts = [f"<h4 style='color:{color}'>{html.escape(verdict_line(report))}</h4>"]
    if report.load_error is not None:
        parts.append(f"<pre>{html.escape(str(report.load_error))}</pre>")
    parts.extend(f"<div>note: {html.escape(n)}</div>" for n in report.notes)
    for f in report.fixtures:
        state = fixture_state(f)
        parts.append(
            f"<details {'open' if not f.ok or f.warnings else ''}><summary><b>[{state}]</b> "
            f"{html.escape(f.fixture)} ({f.framing}, HTTP {f.status}) - "
            f"{html.escape(summarize(f.completion))}</summary>"
        )
        verdict = "passes" if f.verdict is None else f"rule {f.rule} at event #{f.position}"
        parts.append(f"<div>validate_stream: {html.escape(verdict)}</div>")
        parts.extend(f"<div style='color:#c00'>{html.escape(p)}</div>" for p in f.problems)
        parts.extend(f"<div style='color:#a60'>warning: {html.escape(w)}</div>" for w in f.warnings)
        parts.extend(f"<div>log {html.escape(lv)}: {html.escape(m)}</div>" for lv, m in f.logs)
        rows = [[str(p), t, i, d] for p, t, i, d in event_rows(f.events)]
        parts.append(html_table(["#", "event", "index", "detail"], rows) + "</details>")
    for r in report.requests:
        state = "ok" if r.ok else "FAIL"
        parts.append(
            f"<details><summary><b>[{state}]</b> request {html.escape(r.case)}: "
            f"{html.escape(r.description)}</summary>"
        )
        if r.error is not None:
            parts.append(f"<pre style='color:#c00'>{html.escape(str(r.error))}</pre></details>")
            continue
        hdrs = "\n".join(f"{k}: {v}" for k, v in r.headers.items())
        parts.append(
            f"<pre>{html.escape(r.method)} {html.escape(r.url)}\n{html.escape(hdrs)}\n\n"
            f"{html.escape(r.body_json())}</pre></details>"
        )
    return "".join(parts)
