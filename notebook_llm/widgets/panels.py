"""The blocks of the live view, kernel side: a streamed text block and a tool card.

Neither owns a widget: the :class:`~.live.LivePane` shows them. A :class:`TextBlock` keeps the
raw text and releases it in redacted pieces (:class:`~.live.RedactedStream`), each sent once; a
:class:`ToolCard` keeps a call's name, arguments, status and result and gives its HTML when it
changed. All text passes ``redact``: a block never shows a key.
"""

from __future__ import annotations

from typing import Any

from .live import RedactedStream
from .render import tool_card_html


class TextBlock:
    """One streamed block of the pane: ``kind`` is ``md`` or ``think``."""

    def __init__(self, block_id: int, kind: str = "md") -> None:
        self.id = block_id
        self.kind = kind
        self.stream = RedactedStream()
        #: The block ended: its held-back tail can go at the next flush.
        self.closed = False

    @property
    def text(self) -> str:
        return self.stream.raw

    def append(self, text: str) -> None:
        self.stream.push(text)
        self.closed = False

    def take(self) -> str:
        """The redacted text not sent yet that can be sent now."""
        return self.stream.take(final=self.closed)


class ToolCard:
    """One tool call: name and arguments as they stream, then the status and result."""

    def __init__(self, block_id: int) -> None:
        self.id = block_id
        self.call_id = ""
        self.name = ""
        self.arguments = ""
        self.status = "calling"
        self.result: str | None = None
        self.is_error = False
        self._dirty = True

    def update(self, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(self, key, value)
        self._dirty = True

    def html(self) -> str:
        return tool_card_html(self.name, self.status, self.arguments, self.result, self.is_error)

    def take(self) -> str | None:
        """The card's HTML if it changed since the last call, else ``None``."""
        if not self._dirty:
            return None
        self._dirty = False
        return self.html()
