"""The blocks of the live view: a streaming text panel that freezes finished parts, and a tool card.

How the bytes stay linear in the answer: a :class:`TextPanel` keeps finished paragraphs (cut at
blank lines outside code fences) in frozen ``Output`` widgets that are sent once; only the open
tail is re-sent on a sync. A tail longer than ``LINE_FREEZE`` is cut too: at a line end, inside
a code block by closing and reopening the fence, or at a space in one long paragraph, so the
tail stays short whatever the answer. Frozen segments are grouped ``GROUP_SIZE`` to a ``VBox``
so no ``children`` list grows without bound. :func:`plan_cut` decides where to cut.

All text passes ``redact``: a panel never shows a key.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from ..secrets import redact
from .render import tool_card_html
from .sparse import SparseLayout, SparseOutput, SparseVBox, html_widget

#: Open text shorter than this is never cut; a cut is at the last blank line outside fences.
MIN_FREEZE = 200
#: Above this, a line end (outside or inside a fence) or a space is an acceptable cut too.
LINE_FREEZE = 2000
GROUP_SIZE = 16


def plan_cut(text: str) -> tuple[int, str, str]:
    """Where ``text`` may be cut into a frozen part and an open tail: ``(position, suffix for the
    frozen part, prefix for the new tail)``; position 0 means not yet.

    Preferred: the last blank line outside code fences. Once the tail is longer than
    ``LINE_FREEZE``: the last line end outside a fence; inside a long code block, the last line
    end in it, closing the fence on the frozen part and reopening it on the tail; in a long
    paragraph without line breaks, the last space. So the tail, which is re-sent on each flush,
    stays short and the bytes sent grow linearly with the answer.
    """
    if len(text) < MIN_FREEZE:
        return 0, "", ""
    in_fence = False
    fence_open = ""
    fence_close = ""
    fence_body_start = 0
    last_fence_line = 0
    last_blank = 0
    last_line = 0
    pos = 0
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip()
        pos += len(line)
        if stripped.startswith(("```", "~~~")):
            if in_fence:
                in_fence = False
            else:
                in_fence = True
                fence_open = line if line.endswith("\n") else line + "\n"
                fence_close = stripped[:3] + "\n"
                fence_body_start = pos
                last_fence_line = 0
            if not in_fence and line.endswith("\n"):
                last_line = pos
            continue
        if not line.endswith("\n"):
            continue
        if in_fence:
            last_fence_line = pos
            continue
        last_line = pos
        if not stripped:
            last_blank = pos
    if last_blank >= MIN_FREEZE:
        return last_blank, "", ""
    if len(text) < LINE_FREEZE:
        return 0, "", ""
    if in_fence:
        if last_fence_line > fence_body_start and last_fence_line >= MIN_FREEZE:
            return last_fence_line, fence_close, fence_open
        return (last_line, "", "") if last_line >= MIN_FREEZE else (0, "", "")
    if last_line >= MIN_FREEZE:
        return last_line, "", ""
    space = text.rfind(" ", MIN_FREEZE)
    return (space + 1, "", "") if space > 0 else (0, "", "")


def plain_cut(text: str) -> tuple[int, str, str]:
    """Plain text has no fences: the last line end, or the last space in a long line."""
    if len(text) < MIN_FREEZE:
        return 0, "", ""
    end = text.rfind("\n")
    if end + 1 >= MIN_FREEZE:
        return end + 1, "", ""
    if len(text) >= LINE_FREEZE:
        space = text.rfind(" ", MIN_FREEZE)
        if space > 0:
            return space + 1, "", ""
    return 0, "", ""


class TextPanel:
    """Streaming text shown with one mime type (``text/markdown`` or ``text/plain``)."""

    def __init__(self, mime: str = "text/markdown", layout: w.Layout | None = None) -> None:
        self.mime = mime
        #: One layout for all the panel's boxes (none of them is ever hidden or resized).
        self._layout = layout or SparseLayout()
        self.parts: list[str] = []
        self._open = ""
        #: Shown before the open text: a reopened code fence after a cut inside a code block.
        self._prefix = ""
        self._shown = ""
        self._groups: list[w.VBox] = []
        self._tail = SparseOutput(layout=self._layout)
        self.widget = SparseVBox([self._tail], layout=self._layout)

    @property
    def text(self) -> str:
        return "".join(self.parts) + self._open

    def append(self, text: str) -> None:
        self._open += text

    def _output(self, text: str) -> tuple[dict[str, Any], ...]:
        if not text:
            return ()
        return ({"output_type": "display_data", "data": {self.mime: redact(text)}, "metadata": {}},)

    def sync(self) -> None:
        shown = self._prefix + self._open
        cut, suffix, reopen = plan_cut(shown) if self.mime == "text/markdown" else plain_cut(shown)
        real_cut = cut - len(self._prefix)
        if cut and real_cut > 0:
            self.parts.append(self._open[:real_cut])
            self._open = self._open[real_cut:]
            self._prefix = reopen
            segment = SparseOutput(outputs=self._output(shown[:cut] + suffix), layout=self._layout)
            if not self._groups or len(self._groups[-1].children) >= GROUP_SIZE:
                self._groups.append(SparseVBox([segment], layout=self._layout))
                self.widget.children = (*self._groups, self._tail)
            else:
                group = self._groups[-1]
                group.children = (*group.children, segment)
        self._show_tail()

    def release(self) -> None:
        """Empty every segment (see :meth:`StreamView.close`)."""
        for group in self._groups:
            for segment in group.children:
                if isinstance(segment, w.Output):
                    segment.outputs = ()
        self._tail.outputs = ()

    def _show_tail(self) -> None:
        display = self._prefix + self._open
        if display != self._shown:
            self._shown = display
            self._tail.outputs = self._output(display)


class ToolCard:
    """One tool call: name and arguments as they stream, then the status and result."""

    def __init__(self, layout: w.Layout | None = None) -> None:
        self.call_id = ""
        self.name = ""
        self.arguments = ""
        self.status = "calling"
        self.result: str | None = None
        self.is_error = False
        self.widget = html_widget(layout)
        self._dirty = True

    def update(self, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(self, key, value)
        self._dirty = True

    def sync(self) -> None:
        if self._dirty:
            self._dirty = False
            self.widget.value = tool_card_html(
                self.name, self.status, self.arguments, self.result, self.is_error
            )
