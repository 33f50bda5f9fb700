"""The static end of a turn: ONE display that replaces the live view when the stream ends.

A saved notebook is read without a kernel (GitHub, nbviewer, nbconvert, VS Code, JupyterLab the
next morning), where widget views can only show "Loading widget…" or "Error displaying widget".
So once a stream ends, the live view's output is replaced in place (through its ``display_id``)
by :class:`FinalView`, holding, in this order, the reasoning once (a collapsed ``<details>``),
each tool call as a card (name, arguments, result or error, skipped or not), the answer, an
error box if the turn failed, and one footer line (provider:model, finish, tokens, cost). No
timings: the bundle is deterministic for a deterministic provider, so nbval compares it.

Its MIME types are ``text/html`` and ``text/plain``, nothing else:

- ``text/html`` is rendered here, once, from the untrusted Markdown and cleaned by an
  allow-list (:mod:`.safe_html`): no reader re-reads the answer as Markdown. With
  ``text/markdown`` each reader ran its own Markdown renderer (marked in JupyterLab, mistune in
  nbconvert, markdown-it in VS Code, GitHub's own), each with its own idea of where raw HTML
  and code end, and each showed something else; with sanitized HTML they all show the same
  elements. It is self-contained: inline styles, no stylesheet, script, image or font.
- MathJax is kept out (``tex2jax_ignore mathjax_ignore`` on the wrapper): JupyterLab, Notebook
  7 and nbconvert typeset HTML outputs too, and TeX can carry a link or a style
  (``\\href``, ``\\style``). Math shows as its source, as GitHub and VS Code show it.
- ``text/plain`` is the answer as it came (redacted), for terminals, ``nbval`` and readers that
  show no HTML.

Every string passes through ``redact``, and every string that is not Markdown is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...core.protocol import TokenUsage
from ...core.redaction import redact
from ...engine.pricing import format_cost
from .render import (
    EMPTY_ANSWER,
    STOPPED_MARK,
    USAGE_NOT_REPORTED,
    ErrorBox,
    reasoning_html,
    tool_card_html,
)
from .safe_html import clean, isolated, markdown_html, plain_html, text_html

FOOTER_STYLE = "opacity:.75;font-size:90%"


@dataclass
class ToolCallInfo:
    """One tool call as the final view shows it."""

    name: str
    arguments: str
    result: str | None = None
    status: str = "called"  # "ok", "error", "skipped", or "called" (never run)
    is_error: bool = False
    #: Where the tool lives: empty for a Python function, ``mcp:SERVER`` for an MCP tool.
    source: str = ""


def card_html(call: ToolCallInfo) -> str:
    """A tool-call card as HTML (the live view's card, :func:`.render.tool_card_html`)."""
    status = {"called": "not run"}.get(call.status, call.status)
    return tool_card_html(
        call.name or "?", status, call.arguments, call.result, call.is_error, call.source
    )


def card_text(call: ToolCallInfo) -> str:
    status = {"called": "not run"}.get(call.status, call.status)
    where = f" {call.source}" if call.source else ""
    line = f"[tool {call.name or '?'}({call.arguments}) {status}{where}]"
    if call.result is not None:
        line += f"\n  → {call.result}"
    return redact(line)


def footer_line(
    label: str,
    status: str,
    usage: TokenUsage | None,
    cost: float | None = None,
    *,
    finished: bool = True,
    estimated_output: int | None = None,
) -> str:
    """``provider:model · finish · 12 in · 40 out (8 reasoning) · $0.0001`` (no timings).

    A finished answer whose provider sent no token counts gets "usage not reported": no zeros
    and no cost. A turn that did not finish (stopped, failed) keeps what the live view counted:
    ``estimated_output``, shown as ``~N out`` where the provider's own count is missing or
    smaller (it counts at the end, which a stopped stream never reaches)."""
    parts = [label, status]
    approximate = not finished and estimated_output is not None and estimated_output > 0
    if usage is None:
        if finished:
            parts.append(USAGE_NOT_REPORTED)
        elif approximate:
            parts.append(f"~{estimated_output} out")
    else:
        shown = usage.output_tokens
        if approximate and estimated_output is not None and estimated_output > shown:
            out = f"~{estimated_output} out"
        else:
            out = f"{shown} out"
        if usage.reasoning_tokens:
            out += f" ({usage.reasoning_tokens} reasoning)"
        parts += [f"{usage.input_tokens} in", out]
        if cost is not None:
            parts.append(format_cost(cost))
    return redact(" · ".join(parts))


class FinalView:
    """The static bundle (see the module docstring). ``fmt``: ``markdown``, ``text`` (shown as
    it is, in a ``<pre>``) or ``code`` (shown like markdown); a JSON answer is shown as a
    fenced ``json`` block."""

    def __init__(
        self,
        text: str,
        *,
        reasoning: str = "",
        tools: Sequence[ToolCallInfo] = (),
        footer: str = "",
        stopped: bool = False,
        error: ErrorBox | None = None,
        fmt: str = "markdown",
    ) -> None:
        self.text = redact(text)
        self.reasoning = redact(reasoning.strip())
        self.tools = list(tools)
        self.footer = footer
        self.stopped = stopped
        self.error = error
        self.fmt = fmt

    @property
    def empty(self) -> bool:
        """A finished turn whose model answered nothing: said so, never a blank output."""
        return not (self.text or self.tools or self.stopped or self.error is not None)

    def _answer_html(self) -> str:
        if self.empty:
            return f"<p><em>{EMPTY_ANSWER}</em></p>"
        if not self.text:
            return ""
        if self.fmt == "text":
            return plain_html(self.text)  # redacted in __init__
        return markdown_html(self.text)

    def html(self) -> str:
        """The ``text/html`` of the bundle: sanitized, self-contained, not typeset."""
        blocks: list[str] = []
        if self.reasoning:
            blocks.append(reasoning_html(self.reasoning))
        blocks += [card_html(call) for call in self.tools]
        blocks.append(self._answer_html())
        if self.stopped:
            blocks.append(f"<p><em>{STOPPED_MARK}</em></p>")
        if self.error is not None:
            blocks.append(self.error.html())
        if self.footer:
            blocks.append(
                f'<div class="notebook-llm-footer" style="{FOOTER_STYLE}">{text_html(redact(self.footer))}</div>'
            )
        return isolated(clean("".join(blocks)))

    def plain(self) -> str:
        lines: list[str] = []
        if self.reasoning:
            lines.append("[reasoning] " + self.reasoning)
        lines += [card_text(call) for call in self.tools]
        if self.text:
            lines.append(self.text)
        elif self.empty:
            lines.append(EMPTY_ANSWER)
        if self.stopped:
            lines.append(STOPPED_MARK)
        if self.error is not None:
            lines.append(self.error.text())
        if self.footer:
            lines.append(f"-- {self.footer}")
        return "\n".join(lines)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/html": self.html(), "text/plain": self.plain()}

    def __repr__(self) -> str:
        return self.plain()
