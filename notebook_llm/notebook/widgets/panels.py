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
    """One tool call: name and arguments as they stream, then the status and result.

    Its HTML goes to the front end when the card changes (a name, a status, a result). The
    argument deltas that stream after that go as text appended to the card's arguments, in
    redacted pieces as a text block's: never the whole card again for each delta (a long
    argument re-sent whole at every flush cost its size squared)."""

    def __init__(self, block_id: int) -> None:
        self.id = block_id
        self.call_id = ""
        self.name = ""
        self.source = ""
        self.arguments = ""
        self.status = "calling"
        self.result: str | None = None
        self.is_error = False
        self._dirty = True
        self._shown = False  # its HTML went out: later argument deltas are appended to it
        self._more = RedactedStream()  # the argument deltas since that HTML

    def update(self, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(self, key, value)
        self._dirty = True

    def add_arguments(self, delta: str, name: str | None = None) -> None:
        """A streamed piece of the arguments (and the tool's name, if not known yet)."""
        self.arguments += delta
        if name and not self.name:
            self.name = name
            self._dirty = True
        if self._shown and not self._dirty:
            self._more.push(delta)

    def html(self) -> str:
        return tool_card_html(
            self.name or "…", self.status, self.arguments, self.result, self.is_error, self.source
        )

    def take(self, final: bool = False) -> tuple[str | None, str]:
        """The card's HTML if it changed since the last call (it holds all the arguments), else
        ``None`` and the argument text to append that can be sent now (``final``: all of it)."""
        if self._dirty:
            self._dirty = False
            self._shown = True
            self._more = RedactedStream()
            return self.html(), ""
        return None, self._more.take(final=final)
