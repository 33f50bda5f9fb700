"""The static end of a turn: ONE display that replaces the live view when the stream ends.

A saved notebook is read without a kernel (GitHub, nbviewer, nbconvert, JupyterLab the next
morning), where widget views can only show "Loading widget…" or "Error displaying widget". So
once a stream ends, the live view's output is replaced in place (through its ``display_id``) by
:class:`FinalView`: a ``text/markdown`` + ``text/plain`` bundle holding, in this order, the
reasoning once (a collapsed ``<details>``), each tool call as a card (name, arguments, result or
error, skipped or not), the answer, an error box if the turn failed, and one footer line
(provider:model, finish, tokens, cost). No timings: the bundle is deterministic for a
deterministic provider, so nbval compares it.

Why Markdown with HTML islands (rather than ``text/html``): the answer is Markdown and every
reader renders ``text/markdown``; the cards and the footer are HTML blocks written on ONE line
(newlines inside ``<pre>`` as ``&#10;``) so that no blank line in an argument or a result can end
the HTML block and spill the rest into Markdown. Every string passes through ``redact``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..pricing import format_cost
from ..protocol import TokenUsage
from ..secrets import redact
from .render import (
    EMPTY_ANSWER,
    STOPPED_MARK,
    USAGE_NOT_REPORTED,
    ErrorBox,
    escape_raw_html,
    reasoning_details,
)

FOOTER_STYLE = "opacity:.75;font-size:90%"


@dataclass
class ToolCallInfo:
    """One tool call as the final view shows it."""

    name: str
    arguments: str
    result: str | None = None
    status: str = "called"  # "ok", "error", "skipped", or "called" (never run)
    is_error: bool = False


def _one_line(text: str) -> str:
    """HTML-escaped, with newlines as entities: safe inside a one-line HTML block."""
    return html.escape(redact(text)).replace("\r", "").replace("\n", "&#10;")


def card_html(call: ToolCallInfo) -> str:
    """A tool-call card as one line of HTML (see the module docstring)."""
    color = {"ok": "#2a7", "error": "#d33", "skipped": "#888"}.get(call.status, "#47c")
    status = {"called": "not run"}.get(call.status, call.status)
    pre = "margin:2px 0;white-space:pre-wrap"
    out = (
        '<div class="notebook-llm-tool" style="border:1px solid #8885;border-radius:4px;'
        'padding:4px 8px;margin:2px 0">'
        f"<div>🔧 <b>{_one_line(call.name or '?')}</b> "
        f'<span style="color:{color}">{html.escape(status)}</span></div>'
        f'<pre style="{pre}">{_one_line(call.arguments)}</pre>'
    )
    if call.result is not None:
        style = f"color:#d33;{pre}" if call.is_error else pre
        out += f'<pre style="{style}">→ {_one_line(call.result)}</pre>'
    return out + "</div>"


def card_text(call: ToolCallInfo) -> str:
    status = {"called": "not run"}.get(call.status, call.status)
    line = f"[tool {call.name or '?'}({call.arguments}) {status}]"
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
) -> str:
    """``provider:model · finish · 12 in · 40 out (8 reasoning) · $0.0001`` (no timings).

    A finished answer whose provider sent no token counts gets "usage not reported": no zeros
    and no cost. A failed or stopped turn just has no counts (nothing more to say)."""
    parts = [label, status]
    if usage is None:
        if finished:
            parts.append(USAGE_NOT_REPORTED)
    else:
        out = f"{usage.output_tokens} out"
        if usage.reasoning_tokens:
            out += f" ({usage.reasoning_tokens} reasoning)"
        parts += [f"{usage.input_tokens} in", out]
        if cost is not None:
            parts.append(format_cost(cost))
    return redact(" · ".join(parts))


class FinalView:
    """The static bundle (see the module docstring). ``fmt``: ``markdown``, ``text`` or
    ``code`` (shown like markdown); a JSON answer is shown as a fenced ``json`` block."""

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

    def _answer_markdown(self) -> str:
        if self.empty:
            return f"*{EMPTY_ANSWER}*"
        if not self.text:
            return ""
        if self.fmt == "text":
            return f'<pre style="white-space:pre-wrap">{_one_line(self.text)}</pre>'
        return escape_raw_html(self.text)

    def markdown(self) -> str:
        blocks: list[str] = []
        if self.reasoning:
            blocks.append(reasoning_details(self.reasoning))
        blocks += [card_html(call) for call in self.tools]
        answer = self._answer_markdown()
        if answer:
            blocks.append(answer)
        if self.stopped:
            blocks.append(f"*{STOPPED_MARK}*")
        if self.error is not None:
            blocks.append(self.error.html().replace("\n", " "))
        if self.footer:
            blocks.append(
                f'<div class="notebook-llm-footer" style="{FOOTER_STYLE}">'
                f"{html.escape(self.footer)}</div>"
            )
        return "\n\n".join(blocks) + "\n"

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
        return {"text/markdown": self.markdown(), "text/plain": self.plain()}

    def __repr__(self) -> str:
        return self.plain()
