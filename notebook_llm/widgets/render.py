"""Static renderings: the final answer bundle, the error box and the stats line.

Everything here returns plain data (strings and mime bundles); nothing needs a widget front end,
so these are what nbconvert, nbval and terminals see. Every string passes through ``redact``.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ErrorCode, LlmError
from ..secrets import redact
from .adapter_view import excerpt_html, excerpt_text

STOPPED_MARK = "[stopped]"
#: Shown instead of an answer when the model answered nothing (finish stop, no text).
EMPTY_ANSWER = "(empty answer)"
#: Shown in the footer of a finished stream whose provider sent no token counts.
USAGE_NOT_REPORTED = "usage not reported"


@dataclass
class ViewStats:
    """What the footer shows. Times are seconds; ``None`` means not known (yet)."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    estimated: bool = True
    latency: float | None = None
    tokens_per_s: float | None = None
    cost: float | None = None
    status: str = "streaming"

    def line(self) -> str:
        """One-line text summary, e.g. ``12 in · 40 out (8 reasoning) · first token 0.31 s``.

        A finished stream without a usage report says so (no zeros, no estimate, no cost)."""
        if self.estimated and self.status != "streaming":
            parts = [USAGE_NOT_REPORTED]
        else:
            parts = [
                f"{self.input_tokens} in" if not self.estimated else "",
                f"{'~' if self.estimated else ''}{self.output_tokens} out",
            ]
        if self.reasoning_tokens:
            parts[-1] += f" ({self.reasoning_tokens} reasoning)"
        if self.latency is not None:
            parts.append(f"first token {self.latency:.2f} s")
        if self.tokens_per_s is not None:
            parts.append(f"{self.tokens_per_s:.0f} tok/s")
        if self.cost is not None and not self.estimated:
            parts.append(f"${self.cost:.4f}" if self.cost < 1 else f"${self.cost:.2f}")
        return " · ".join(p for p in parts if p)


class Result:
    """The final answer as a display object: ``text/markdown`` and ``text/plain``.

    Deterministic for a deterministic provider (no timings, no ids), so notebooks that display it
    compare equal under nbval.
    """

    def __init__(
        self, text: str, *, stopped: bool = False, fmt: str = "markdown", reasoning: str = ""
    ) -> None:
        self.text = redact(text)
        self.stopped = stopped
        self.fmt = fmt
        #: Shown in a collapsed ``<details>`` above the Markdown answer (saved notebooks keep it).
        self.reasoning = redact(reasoning.strip())

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        plain = self.text + (f"\n{STOPPED_MARK}" if self.stopped else "")
        if self.fmt == "text":
            return {"text/plain": plain}
        markdown = escape_raw_html(self.text) + (f"\n\n*{STOPPED_MARK}*" if self.stopped else "")
        if self.reasoning:
            markdown = f"{reasoning_details(self.reasoning)}\n\n{markdown}"
        return {"text/markdown": markdown, "text/plain": plain}

    def __repr__(self) -> str:
        return self.text


class JsonResult:
    """A parsed JSON answer: ``application/json`` and pretty ``text/plain``."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        plain = redact(json.dumps(self.value, indent=2, ensure_ascii=False, sort_keys=False))
        data: dict[str, Any] = {"text/plain": plain}
        if isinstance(self.value, dict | list):
            data["application/json"] = json.loads(plain)
        return data


# A fenced code block: its opening fence starts the line, and a backtick fence's info string
# has no backtick (CommonMark: then it is no fence). Where it ends is CommonMark's rule. Where a
# renderer disagrees (a container, a link title, math, a table that holds the fence line), it
# reads the block as prose, which _code_block makes harmless.
_FENCE_OPEN = re.compile(r"^(?:(`{3,})[^`]*|(~{3,}).*)$", re.DOTALL)
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
# What would act if a renderer read a code block as prose: raw HTML, an image, a link target.
_NOT_INERT = re.compile(r"<|!\[|\]\(|\]:")
# What may be a code span. Its text is never passed on as Markdown (see _code_html), so a span
# this finds where Markdown sees none only changes how the text looks, never what it does.
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", re.DOTALL)
_AUTOLINK = re.compile(r"<(?:https?|mailto):[^<>\s]*>", re.IGNORECASE)
# A link's destination: after any "](" or "]:" (a reference definition's label may span lines
# or hold "\]"), on the same line or the next.
_LINK_DEST = re.compile(r"(\](?:\(|:)\s*<?)([^\s)>]*)")
_SCHEME = re.compile(r"([a-z][a-z0-9+.-]*):")
# A backslash escape of ASCII punctuation, which a renderer removes from a link destination.
_BACKSLASH_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
# An image (``![alt](url)``, ``![alt][ref]``) not already escaped: an even run of backslashes
# before its ``!`` (``\\![`` is a backslash, then an image).
_IMAGE = re.compile(r"(?<!\\)((?:\\\\)*)!\[")


def safe_url(url: str) -> bool:
    """Whether a link may point at ``url``: relative, or ``http``/``https``/``mailto`` once its
    backslash escapes and character references are decoded (again and again: a renderer may
    decode once, the browser once more) and control characters and spaces dropped (what a
    browser does). The rule ``safeUrl`` in ``static/live_view.js`` applies to links (it also
    lets an image be a ``data:image/...`` URL, which this does not)."""
    previous = None
    while previous != url:
        previous, url = url, html.unescape(_BACKSLASH_ESCAPE.sub(r"\1", url))
    plain = re.sub(r"[\x00-\x20\x7f]", "", url).lower()
    scheme = _SCHEME.match(plain)
    return scheme is None or scheme.group(1) in ("http", "https", "mailto")


def _safe_link(m: re.Match[str]) -> str:
    return m.group(1) + (m.group(2) if safe_url(m.group(2)) else "#")


def _references(text: str) -> str:
    """``text`` with every character but letters, digits and spaces as a character reference:
    inert as Markdown, as HTML and as an attribute value."""
    return "".join(c if c.isalnum() or c == " " else f"&#{ord(c)};" for c in text)


def _code_block(lines: list[str], fence: str, closed: bool) -> str:
    """A fenced code block (``closed``: its last line is the closing fence), kept as it is when
    it would be harmless read as prose (no ``<``, ``![``, ``](`` or ``]:``), else as one line of
    ``<pre><code>`` with its text as character references: inert however a renderer reads that
    line (it loses the fence's highlighting)."""
    text = "".join(lines)
    if not _NOT_INERT.search(text):
        return text
    words = lines[0].strip().lstrip(fence[0]).split()
    info = re.sub(r"[^\w+-]", "", words[0]) if words else ""
    body = lines[1:-1] if closed else lines[1:]
    css = f' class="language-{info}"' if info else ""
    end = "\n" if text.endswith("\n") else ""
    return f"<pre><code{css}>{_references(''.join(body))}</code></pre>{end}"


def _inert(text: str) -> str:
    # An image becomes "!" and a link to it: the browser would fetch a remote one as soon as it
    # is shown, and a URL an answer chose can carry what the answer knows (a prompt-injected
    # answer leaking the conversation). The live pane does the same (static/live_view.js).
    return _IMAGE.sub(r"\1\\![", text.replace("<", "&lt;"))


def _escape_prose(text: str) -> str:
    out, pos = [], 0
    for m in _AUTOLINK.finditer(text):
        out += [_inert(text[pos : m.start()]), m.group(0)]
        pos = m.end()
    out.append(_inert(text[pos:]))
    return _LINK_DEST.sub(_safe_link, "".join(out))


def _code_html(m: re.Match[str]) -> str:
    """A code span as ``<code>`` with every character but letters, digits and spaces written
    as a character reference: it shows as Markdown would show the span, and if Markdown would
    not have read a span there (a backtick in a link target, a heading, after ``\\``), it is
    still only text: no ``<``, no ``![``, no backtick that could pair with another."""
    ticks = len(m.group(1))
    body = m.group(0)[ticks:-ticks].replace("\r\n", " ").replace("\n", " ")
    if len(body) > 2 and body[0] == " " and body[-1] == " " and body.strip():
        body = body[1:-1]  # CommonMark strips one space on each side
    return f"<code>{_references(body)}</code>"


def reasoning_details(reasoning: str) -> str:
    """The reasoning as a collapsed ``<details>`` block of quoted Markdown (raw HTML as text)."""
    quoted = escape_raw_html(reasoning).replace("\n", "\n> ")
    return f"<details><summary>Reasoning</summary>\n\n> {quoted}\n\n</details>"


def escape_raw_html(markdown: str) -> str:
    """``markdown`` made inert for a trusted renderer: raw HTML shows as text (every ``<``
    becomes ``&lt;``), a link target that is not relative, ``http``, ``https`` or ``mailto``
    (:func:`safe_url`) becomes ``#``, and an image becomes a link to it (``\\![alt](url)``:
    nothing is fetched until the reader clicks). ``<https://...>`` autolinks are kept; code
    spans become ``<code>`` with their text as character references (:func:`_code_html`); a
    fenced block is kept when it would be harmless read as prose, else written the same way
    (:func:`_code_block`).

    Why by hand: an answer is untrusted, and JupyterLab renders the outputs of a cell the user
    ran as *trusted*, without its sanitizer, so an ``<img onerror=...>`` in an answer would run.
    No Markdown library rewrites Markdown source (they render it); this keeps the answer's
    Markdown for every reader (GitHub, nbviewer, nbconvert). It never relies on finding code
    exactly as a renderer would (a review found a dozen ways they differ): what it leaves as
    it is would be harmless read as prose, and what it takes for code is written out as
    references."""
    out: list[str] = []
    fence = ""
    prose: list[str] = []
    block: list[str] = []

    def flush() -> None:
        if prose:
            text = "".join(prose)
            pos = 0
            for m in _CODE_SPAN.finditer(text):
                out.extend([_escape_prose(text[pos : m.start()]), _code_html(m)])
                pos = m.end()
            out.append(_escape_prose(text[pos:]))
            prose.clear()

    # Markdown's line endings only (str.splitlines also splits at \f, \x1c, \u2028...: a fence
    # "opened" there would be kept where a renderer reads one line of prose).
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for n, line in enumerate(lines):
        line += "\n" if n < len(lines) - 1 else ""
        bare = line.rstrip("\n")
        if fence:
            block.append(line)
            m = _FENCE_CLOSE.match(bare)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                out.append(_code_block(block, fence, closed=True))
                block.clear()
                fence = ""
            continue
        m = _FENCE_OPEN.match(bare)
        if m:
            flush()
            fence = m.group(1) or m.group(2)
            block.append(line)
        elif not line.strip():  # a blank line ends any code span
            flush()
            out.append(line)
        else:
            prose.append(line)
    flush()
    if block:  # a fence never closed: the block runs to the end
        out.append(_code_block(block, fence, closed=False))
    return "".join(out)


_FENCE = re.compile(r"^\s*(```|~~~)[^\n]*\n(.*?)\n?\1\s*$", re.DOTALL)
_INNER_FENCE = re.compile(r"(```|~~~)[^\n]*\n(.*?)\n\1", re.DOTALL)


def strip_fences(text: str) -> str:
    """The body of a fenced answer (```json ... ```); the first fenced block if there is prose
    around it; else the text stripped."""
    m = _FENCE.match(text)
    if m:
        return m.group(2)
    m = _INNER_FENCE.search(text)
    return m.group(2) if m else text.strip()


def parse_json_answer(text: str) -> Any:
    """Parse an answer as JSON (fences stripped); raises ``LlmError(MALFORMED_RESPONSE)``."""
    body = strip_fences(text)
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise LlmError(
            f"the answer is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            ErrorCode.MALFORMED_RESPONSE,
        ) from None


_HINTS = {
    "AUTH": "check that the key is valid for this provider (%llm key PROVIDER to set another)",
    "QUOTA": "the account has no credit or quota left; check billing with the provider",
    "RATE_LIMIT": "too many requests; wait a little and run the cell again",
    "NOT_FOUND": "check the model name: %llm models PROVIDER lists them",
    "NO_ADAPTER": "%llm providers lists the providers you can use",
    "CONTEXT_WINDOW_EXCEEDED": "shorten the prompt or the conversation (%llm reset)",
    "TIMEOUT": "the provider did not answer in time; run the cell again",
    "TRANSPORT": "the provider could not be reached; check the network or the base URL",
    "UNSUPPORTED_REASONING_EFFORT": "drop --reasoning or pick an effort the model offers",
}


class ErrorBox:
    """A short, readable error: code, provider, message and what to do. No traceback."""

    def __init__(
        self,
        err: LlmError,
        hint: str | None = None,
        excerpt: Sequence[tuple[int, str, bool]] = (),
    ) -> None:
        self.code = err.code
        self.provider = err.provider
        self.message = redact(err.message)
        hint = redact(hint or _HINTS.get(err.code, ""))
        self.hint = "" if hint and hint in self.message else hint
        #: An adapter error's script lines around its Lua line (adapter_view.adapter_excerpt).
        self.excerpt = [(n, redact(t), hit) for n, t, hit in excerpt]

    def text(self) -> str:
        where = f" ({self.provider})" if self.provider else ""
        lines = [f"LLM error {self.code}{where}: {self.message}", *excerpt_text(self.excerpt)]
        if self.hint:
            lines.append(f"What to do: {self.hint}")
        return "\n".join(lines)

    def html(self) -> str:
        e = html.escape
        where = f" &middot; {e(self.provider)}" if self.provider else ""
        hint = f"<div><b>What to do:</b> {e(self.hint)}</div>" if self.hint else ""
        return (
            '<div class="notebook-llm-error" style="border-left:4px solid #d33;padding:4px 8px;'
            'background:rgba(221,51,51,.08)">'
            f"<div><b>{e(self.code)}</b>{where}</div><div>{e(self.message)}</div>"
            f"{excerpt_html(self.excerpt)}{hint}</div>"
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/html": self.html(), "text/plain": self.text()}

    def __str__(self) -> str:  # display() outside IPython prints str(obj)
        return self.text()

    __repr__ = __str__


def tool_card_html(
    name: str, status: str, arguments: str, result: str | None, is_error: bool
) -> str:
    """One tool call card: name, status, the arguments as they stream, then the result."""
    e = html.escape
    color = {"ok": "#2a7", "error": "#d33", "skipped": "#888"}.get(status, "#47c")
    out = (
        '<div class="notebook-llm-tool" style="border:1px solid rgba(128,128,128,.35);'
        'border-radius:4px;padding:4px 8px;margin:2px 0">'
        f"<div>🔧 <b>{e(redact(name) or '…')}</b> "
        f'<span style="color:{color}">{e(status)}</span></div>'
        f'<pre style="margin:2px 0;white-space:pre-wrap">{e(redact(arguments))}</pre>'
    )
    if result is not None:
        style = "color:#d33;" if is_error else ""
        out += f'<pre style="{style}margin:2px 0;white-space:pre-wrap">→ {e(redact(result))}</pre>'
    return out + "</div>"
