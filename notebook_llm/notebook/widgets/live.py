"""The live pane: one anywidget that receives each delta once and renders Markdown in the browser.

Why: re-sending the open paragraph on every update (the ipywidgets ``Output`` design) sends
many times the answer's bytes. Here the kernel sends each piece of text once, in custom messages
(``widget.send``) coalesced by :class:`~.stream_view.StreamView` to a few a second, and the
front end (``static/live_view.js``) appends it and renders the Markdown itself, with marked
(MIT), and cleans the HTML with DOMPurify (Apache-2.0 or MPL-2.0), both vendored in ``static/``
with their licences. The pane holds the answer's text blocks, the reasoning and the
tool cards in stream order, and the stats line; the Stop button, the Run/Skip question and the
error box stay plain ipywidgets around it.

Protocol, kernel -> front end: one message is a JSON list of ops, applied in order::

    ["+", id, kind]    a new block; kind is "md" (Markdown), "think" (reasoning, plain
                       text shown collapsed on top) or "card" (a tool card's HTML)
    [id, "text"]       append text to block id (to a card: to its arguments, as text)
    ["=", id, "html"]  replace a card's HTML (built and escaped by render.tool_card_html;
                       it holds all the arguments so far, and drops the appended text)
    ["s", "line"]      the stats line (after the bold provider:model label)

marked and DOMPurify (52 KB and 87 KB) do not travel with every view: they are the state of ONE
plain widget model per kernel (:func:`library`), which every pane names in its ``lib`` trait and the front end
reads once per page through the widget manager. No request goes from the browser to the kernel
while a cell runs (such a round trip, answered mid-cell, once left a JupyterLab cell showing
``[*]`` after "Run All"), and a reloaded page gets the libraries back with the kernel's models.
Nothing of the answer is in any widget's state, so no saved notebook or snapshot can hold it.

Keys: text is redacted before it is sent, and a piece is only sent up to a point where no key,
``Bearer`` token or ``key=`` parameter can be cut in two (:class:`RedactedStream`).
"""

from __future__ import annotations

import uuid
from functools import cache
from pathlib import Path
from typing import Any

import anywidget
import ipywidgets as w
import traitlets

from ...core.redaction import redact, redaction_spans
from .sparse import Sparse

STATIC = Path(__file__).parent / "static"
#: Text with no white space is held back until it is this long (a key is never this long), then
#: sent but for its last ``HOLD_TAIL`` characters.
HOLD_MAX = 2000
HOLD_TAIL = 256


@cache
def marked_source() -> str:
    """The vendored marked ESM (read once per kernel process)."""
    return (STATIC / "marked.esm.js").read_text(encoding="utf-8")


@cache
def purify_source() -> str:
    """The vendored DOMPurify ESM (read once per kernel process)."""
    return (STATIC / "dompurify.esm.js").read_text(encoding="utf-8")


class RedactedStream:
    """The text of one block, released in redacted pieces that never cut a secret in two.

    ``redact`` needs a whole key to hide it; a delta may end in the middle of one. So a piece is
    released only up to the last white space that does not end ``bearer`` and white space
    (keys, tokens and ``key=value`` parameters hold no white space); the rest waits for more
    text or for :meth:`take` with ``final``. A run of ``HOLD_MAX`` characters without white
    space (a long line of base64, say) is released but for its last ``HOLD_TAIL`` characters.
    Either way a cut never falls inside something ``redact`` hides
    (:func:`~notebook_llm.core.redaction.redaction_spans`).
    """

    def __init__(self) -> None:
        self._parts: list[str] = []  # everything pushed
        self._tail = ""  # pushed and not yet sent (short: it is sent as it is cut)

    @property
    def raw(self) -> str:
        """Everything pushed so far."""
        return "".join(self._parts)

    def push(self, text: str) -> None:
        self._parts.append(text)
        self._tail += text

    def take(self, final: bool = False) -> str:
        """The redacted text that can be sent now (each character of ``raw`` once)."""
        tail = self._tail
        end = len(tail) if final else self._cut(tail)
        if end <= 0:
            return ""
        self._tail = tail[end:]
        return redact(tail[:end])

    @staticmethod
    def _cut(tail: str) -> int:
        """Where ``tail`` may be cut now (see the class docstring); linear in ``tail``: a run of
        ``bearer`` words is stepped over whole, and the spans are walked once, from the end."""
        end, cut = len(tail), 0
        # the last space and the last newline before ``end``, each searched again only once
        # ``end`` has moved before it (a search from ``end`` each step scanned a text with no
        # newline whole for every "bearer": quadratic)
        last_space, last_newline = len(tail), len(tail)
        while end > 0:
            if last_space >= end:
                last_space = tail.rfind(" ", 0, end)
            if last_newline >= end:
                last_newline = tail.rfind("\n", 0, end)
            space = max(last_space, last_newline)
            if space < 0:
                break
            word_end = space
            while word_end > 0 and tail[word_end - 1].isspace():
                word_end -= 1
            if tail[max(0, word_end - 6) : word_end].lower() != "bearer":
                cut = space + 1
                break
            end = word_end - 6  # a cut in this white space would part "bearer" from its token
        if not cut and len(tail) >= HOLD_MAX:
            cut = len(tail) - HOLD_TAIL
        # moving back out of one match may land inside another (they overlap): walked from
        # the last start down, each span that holds the cut moves it to its start
        for start, stop in sorted(redaction_spans(tail), reverse=True):
            if start < cut < stop:
                cut = start
        return cut


class MarkedLibrary(w.Widget):  # type: ignore[misc]
    """A model with no view whose state is the sources of marked and DOMPurify (see the module
    docstring)."""

    source = traitlets.Unicode("").tag(sync=True)
    purify = traitlets.Unicode("").tag(sync=True)


_LIBRARY: MarkedLibrary | None = None


def library() -> MarkedLibrary:
    """The kernel's one library model (made again if someone closed it)."""
    global _LIBRARY
    if _LIBRARY is None or _LIBRARY.comm is None:
        _LIBRARY = MarkedLibrary(source=marked_source(), purify=purify_source())
    return _LIBRARY


class LivePane(Sparse, anywidget.AnyWidget):
    """The anywidget (see the module docstring); ``send_ops`` sends one batch of ops."""

    _esm = STATIC / "live_view.js"
    #: Which pane a front-end view belongs to (anywidget hands ``initialize`` and ``render``
    #: different proxies of one model).
    key = traitlets.Unicode("").tag(sync=True)
    label = traitlets.Unicode("").tag(sync=True)
    #: The model id of :func:`library`.
    lib = traitlets.Unicode("").tag(sync=True)

    def __init__(self, label: str, **kwargs: Any) -> None:
        lib = library().model_id
        super().__init__(key=uuid.uuid4().hex, label=redact(label), lib=lib, **kwargs)

    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
        state = super().get_state(key, drop_defaults)
        if key is None:  # the ESM and anywidget's id are defaults too, but the front end needs them
            state.update(super().get_state(["_esm", "_anywidget_id"]))
        return state

    def send_ops(self, ops: list[list[Any]]) -> None:
        if ops and self.comm is not None:
            self.send(ops)
