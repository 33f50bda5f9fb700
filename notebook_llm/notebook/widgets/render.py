"""Static renderings: the final answer bundle, the error box and the stats line.

Everything here returns plain data (strings and mime bundles); nothing needs a widget front end,
so these are what nbconvert, nbval and terminals see. Every string passes through ``redact``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...core.errors import ErrorCode, LlmError
from ...core.redaction import redact
from ...engine.pricing import format_cost
from .adapter_view import excerpt_html, excerpt_text
from .safe_html import NO_MATH_CLASSES, clean, isolated, markdown_html, text_html

STOPPED_MARK = "[stopped]"
#: Shown instead of an answer when the model answered nothing (finish stop, no text).
EMPTY_ANSWER = "(empty answer)"
#: Shown in the footer of a finished stream whose provider sent no token counts.
USAGE_NOT_REPORTED = "usage not reported"


def estimated_tokens(deltas: int, chars: int) -> int:
    """Output tokens before (or without) the provider's count: a delta is at least one token,
    and a token is about four characters of English (a server that sends several tokens per
    delta, as the mock does, would otherwise show a fraction of its rate)."""
    return max(deltas, -(-chars // 4))


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
            parts.append(format_cost(self.cost))
        return " · ".join(p for p in parts if p)


class Result:
    """The final answer as a display object: sanitized ``text/html`` and ``text/plain`` (see
    :mod:`.safe_html`; ``fmt="text"``: ``text/plain`` only).

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
        body = markdown_html(self.text)
        if self.stopped:
            body += f"<p><em>{STOPPED_MARK}</em></p>"
        if self.reasoning:
            body = reasoning_html(self.reasoning) + body
        return {"text/html": isolated(clean(body)), "text/plain": plain}

    def __repr__(self) -> str:
        return self.text


def reasoning_html(reasoning: str) -> str:
    """The reasoning as a collapsed ``<details>`` holding it as sanitized Markdown."""
    return (
        '<details class="notebook-llm-reasoning"><summary>Reasoning</summary>'
        f"<blockquote>{markdown_html(reasoning)}</blockquote></details>"
    )


_FENCES = ("```", "~~~")


def strip_fences(text: str) -> str:
    """The body of a fenced answer (```json ... ```); the first fenced block if there is prose
    around it; else the text stripped.

    Scanned with ``str.find`` (the answer is untrusted): the regexes this replaces backtracked
    quadratically on long answers with many fence marks and no closing fence."""
    whole = _whole_fence(text)
    if whole is not None:
        return whole
    first = _first_fence(text)
    return first if first is not None else text.strip()


def _whole_fence(text: str) -> str | None:
    """The body when all of ``text`` (but white space around it) is one fenced block: a fence
    line, the body, the same fence (the newline before it is not part of the body)."""
    start = len(text) - len(text.lstrip())
    fence = text[start : start + 3]
    if fence not in _FENCES:
        return None
    newline = text.find("\n", start + 3)
    if newline < 0:
        return None
    body_start = newline + 1
    closing = len(text.rstrip()) - 3
    if closing < body_start or text[closing : closing + 3] != fence:
        return None
    if closing > body_start and text[closing - 1] == "\n":
        closing -= 1
    return text[body_start:closing]


def _first_fence(text: str) -> str | None:
    """The body of the first fenced block in ``text``: a fence, the rest of its line, the body,
    a newline and the same fence. A fence kind with no closing line after its first opening has
    none after a later one either, so each kind is looked for once: linear in the text."""
    failed: set[str] = set()
    pos = 0
    while True:
        found = [(text.find(f, pos), f) for f in _FENCES if f not in failed]
        found = [(at, f) for at, f in found if at >= 0]
        if not found:
            return None
        at, fence = min(found)
        newline = text.find("\n", at + 3)
        if newline < 0:
            return None
        closing = text.find("\n" + fence, newline + 1)
        if closing >= 0:
            return text[newline + 1 : closing]
        failed.add(fence)
        pos = at + 1


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


ERROR_STYLE = "border-left:4px solid #d33;padding:4px 8px;background:#dd333314"


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
        """The box as HTML, every string escaped (a message is untrusted: a provider's). Also
        shown by the live view's error widget, so it is complete by itself."""
        e = text_html
        where = f" &middot; {e(self.provider)}" if self.provider else ""
        hint = f"<div><b>What to do:</b> {e(self.hint)}</div>" if self.hint else ""
        return (
            f'<div class="notebook-llm-error {NO_MATH_CLASSES}" style="{ERROR_STYLE}">'
            f"<div><b>{e(self.code)}</b>{where}</div>"
            f'<div style="white-space:pre-wrap">{e(self.message)}</div>{excerpt_html(self.excerpt)}{hint}</div>'
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/html": isolated(clean(self.html()), "output"), "text/plain": self.text()}

    def __str__(self) -> str:  # display() outside IPython prints str(obj)
        return self.text()

    __repr__ = __str__


def tool_card_html(
    name: str,
    status: str,
    arguments: str,
    result: str | None,
    is_error: bool,
    source: str = "",
) -> str:
    """One tool call card, the live view's and the final view's: name (and where the tool
    lives: ``mcp:SERVER``), status, the arguments (as they stream, in the live view), then the
    result. Every string is redacted and escaped in pieces (:func:`.safe_html.text_html`: the
    final view's HTML goes through nh3)."""

    def e(text: str) -> str:
        return text_html(redact(text))

    color = {"ok": "#2a7", "error": "#d33", "skipped": "#888"}.get(status, "#47c")
    pre = "margin:2px 0;white-space:pre-wrap"
    out = (
        '<div class="notebook-llm-tool" style="border:1px solid #8885;border-radius:4px;'
        'padding:4px 8px;margin:2px 0">'
        f"<div>🔧 <b>{e(name)}</b> "
        + (f'<span style="opacity:.7">{e(source)}</span> ' if source else "")
        + f'<span style="color:{color}">{e(status)}</span></div>'
        f'<pre style="{pre}">{e(arguments)}</pre>'
    )
    if result is not None:
        style = f"color:#d33;{pre}" if is_error else pre
        out += f'<pre style="{style}">→ {e(result)}</pre>'
    return out + "</div>"
