"""The live stream view: an ipywidgets tree fed with stream events, updated at most ~20×/s.

Layout (one ``VBox``)::

    [Reasoning ▸]               Accordion, collapsed; shown once reasoning arrives
    text panel / tool card ...  in stream order, across the steps of a tool loop
    [error box]                 hidden unless the stream ends with an error
    footer: provider:model · status · tokens · first token · tok/s · cost   [Stop]

How the bytes stay linear in the answer: :meth:`StreamView.handle` only updates Python state;
:meth:`StreamView.maybe_flush` syncs at most ``max_rate`` times a second, and only what changed.
A text panel keeps finished paragraphs (cut at blank lines outside code fences) in frozen
``Output`` widgets that are sent once; only the open tail is re-sent on a flush. A tail longer
than ``LINE_FREEZE`` is cut too: at a line end, inside a code block by closing and reopening
the fence, or at a space in one long paragraph, so the tail stays short whatever the answer.
Frozen segments are grouped 16 to a ``VBox`` so no ``children`` list grows without bound.

The view never raises into the stream and never shows a key: all text passes ``redact``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import ipywidgets as w
from ipywidgets.widgets.widget_button import ButtonStyle
from ipywidgets.widgets.widget_string import HTMLStyle

from ..cancel import StopSignal
from ..errors import LlmError
from ..loop_events import LoopEvent, StepStart, ToolResult, ToolRun
from ..pricing import Price, cost
from ..protocol import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    ReasoningDelta,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)
from ..secrets import redact
from .render import ErrorBox, ViewStats, stats_html, tool_card_html

#: Open text shorter than this is never cut; a cut is at the last blank line outside fences.
MIN_FREEZE = 200
#: Above this, a line end (outside or inside a fence) or a space is an acceptable cut too.
LINE_FREEZE = 2000
GROUP_SIZE = 16
#: The footer's numbers change at most this often (seconds).
STATS_INTERVAL = 0.25


#: Keys a comm_open must always carry: the front end builds the model from them.
_IDENTITY = (
    "_model_name",
    "_model_module",
    "_model_module_version",
    "_view_name",
    "_view_module",
    "_view_module_version",
)


class _Sparse(w.Widget):  # type: ignore[misc]
    """Sends only the traits that differ from their defaults when the model is created (the
    front end fills in its defaults, as for embedded widgets: ``get_state(drop_defaults=True)``
    is ipywidgets' own). nbclient and ``nbconvert --execute`` save the state of every model,
    closed or not; a full Layout alone is ~1 KB, so this keeps saved notebooks small."""

    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
        if key is not None:
            return dict(super().get_state(key, drop_defaults=drop_defaults))
        state = dict(super().get_state(None, drop_defaults=True))
        state.update(super().get_state([k for k in _IDENTITY if k in self.keys]))
        return state


class _Layout(_Sparse, w.Layout):  # type: ignore[misc]
    pass


class _HTMLStyle(_Sparse, HTMLStyle):  # type: ignore[misc]
    pass


class _ButtonStyle(_Sparse, ButtonStyle):  # type: ignore[misc]
    pass


class _VBox(_Sparse, w.VBox):  # type: ignore[misc]
    pass


class _HBox(_Sparse, w.HBox):  # type: ignore[misc]
    pass


class _Output(_Sparse, w.Output):  # type: ignore[misc]
    pass


class _Accordion(_Sparse, w.Accordion):  # type: ignore[misc]
    pass


def _html(layout: w.Layout | None = None, value: str = "") -> w.HTML:
    return _HTMLWidget(value=value, layout=layout or _Layout(), style=_HTMLStyle())


class _HTMLWidget(_Sparse, w.HTML):  # type: ignore[misc]
    pass


class _Button(_Sparse, w.Button):  # type: ignore[misc]
    pass


def _button(**kwargs: Any) -> w.Button:
    return _Button(layout=_Layout(width="auto"), style=_ButtonStyle(), **kwargs)


def _hidden(widget: w.Widget, hidden: bool) -> None:
    display = "none" if hidden else None
    if widget.layout.display != display:
        widget.layout.display = display


def _plan_cut(text: str) -> tuple[int, str, str]:
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


class TextPanel:
    """Streaming text shown with one mime type (``text/markdown`` or ``text/plain``)."""

    def __init__(self, mime: str = "text/markdown", layout: w.Layout | None = None) -> None:
        self.mime = mime
        #: One layout for all the panel's boxes (none of them is ever hidden or resized).
        self._layout = layout or _Layout()
        self.parts: list[str] = []
        self._open = ""
        #: Shown before the open text: a reopened code fence after a cut inside a code block.
        self._prefix = ""
        self._shown = ""
        self._groups: list[w.VBox] = []
        self._tail = _Output(layout=self._layout)
        self.widget = _VBox([self._tail], layout=self._layout)

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
        cut, suffix, reopen = (
            _plan_cut(shown) if self.mime == "text/markdown" else _plain_cut(shown)
        )
        real_cut = cut - len(self._prefix)
        if cut and real_cut > 0:
            self.parts.append(self._open[:real_cut])
            self._open = self._open[real_cut:]
            self._prefix = reopen
            segment = _Output(outputs=self._output(shown[:cut] + suffix), layout=self._layout)
            if not self._groups or len(self._groups[-1].children) >= GROUP_SIZE:
                self._groups.append(_VBox([segment], layout=self._layout))
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


def _plain_cut(text: str) -> tuple[int, str, str]:
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


class ToolCard:
    """One tool call: name and arguments as they stream, then the status and result."""

    def __init__(self, layout: w.Layout | None = None) -> None:
        self.call_id = ""
        self.name = ""
        self.arguments = ""
        self.status = "calling"
        self.result: str | None = None
        self.is_error = False
        self.widget = _html(layout)
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


class StreamView:
    """Renders protocol events and tool-loop events live; see the module docstring.

    ``handle(event)`` for each event, ``maybe_flush()`` as often as you like (it rate-limits
    itself), ``finish(...)`` once at the end. ``clock`` is injectable for benchmarks.
    """

    def __init__(
        self,
        label: str,
        *,
        stop: StopSignal | None = None,
        price: Price | None = None,
        max_rate: float = 20.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.stop_signal = stop or StopSignal()
        self.price = price
        self.clock = clock
        self.min_interval = 1.0 / max_rate if max_rate > 0 else 0.0
        self.stats = ViewStats()
        self.usage = TokenUsage()
        self.last_finish: FinishReason | None = None
        self.step = 0
        self._started = clock()
        self._first: float | None = None
        self._last_flush = float("-inf")
        self._last_stats = float("-inf")
        self._deltas = 0
        self._panels: dict[tuple[int, int], TextPanel] = {}
        self._text_panels: list[TextPanel] = []
        self._cards: dict[tuple[int, int], ToolCard] = {}
        self._cards_by_id: dict[str, ToolCard] = {}
        #: Shared by every widget of the view that is never hidden or resized (one model).
        self._layout = _Layout()
        # Made when first needed (each widget is a model a saved notebook may keep): the
        # reasoning panel, the Run / Skip question of ``--confirm``, the error box, the hint.
        self._reasoning: TextPanel | None = None
        self._reasoning_box: w.Accordion | None = None
        self.confirm_bar: w.HBox | None = None
        self._question: w.HTML | None = None
        self._error: w.HTML | None = None
        self._stop_hint: w.HTML | None = None
        self._blocks = _VBox(layout=self._layout)
        self._stats = _html(self._layout, stats_html(self.stats, label))
        self.stop_button = _button(
            description="Stop", icon="stop", button_style="danger", tooltip="Stop the stream"
        )
        self.stop_button.on_click(lambda _button: self._stop())
        self.footer = _HBox([self.stop_button, self._stats], layout=self._layout)
        self._on_answer: Callable[[bool], None] | None = None
        self.widget = _VBox([self._blocks, self.footer], layout=self._layout)
        self.widget.add_class("notebook-llm-view")

    # ------------------------------------------------------------------ events

    @property
    def text(self) -> str:
        """The answer text so far (all text blocks, across steps)."""
        return "\n\n".join(p.text for p in self._text_panels if p.text)

    @property
    def reasoning(self) -> TextPanel:
        """The reasoning panel, in a collapsed accordion above the answer (made on first use)."""
        if self._reasoning is None:
            self._reasoning = TextPanel("text/plain", self._layout)
            box = _Accordion(
                children=[self._reasoning.widget], titles=("Reasoning",), layout=_Layout()
            )
            box.selected_index = None
            self._reasoning_box = box
            self.widget.children = (box, *self.widget.children)
        return self._reasoning

    def _insert_before(self, widget: w.Widget, before: w.Widget) -> None:
        children = list(self.widget.children)
        children.insert(children.index(before), widget)
        self.widget.children = tuple(children)

    def stop_unavailable(self, hint: str) -> None:
        """A blocking cell whose kernel cannot deliver clicks: replace Stop by what to do."""
        _hidden(self.stop_button, True)
        if self._stop_hint is None:
            self._stop_hint = _html(self._layout)
            self.footer.children = (self._stop_hint, *self.footer.children)
        self._stop_hint.value = f"<span style='opacity:.7'>{hint}</span>"

    def _confirm_bar(self) -> tuple[w.HBox, w.HTML]:
        if self.confirm_bar is None or self._question is None:
            self._question = _html(self._layout)
            self.run_button = _button(description="Run", button_style="success", icon="play")
            self.skip_button = _button(description="Skip", icon="forward")
            self.run_button.on_click(lambda _b: self._answer(True))
            self.skip_button.on_click(lambda _b: self._answer(False))
            self.confirm_bar = _HBox(
                [self._question, self.run_button, self.skip_button], layout=_Layout()
            )
            self._insert_before(self.confirm_bar, self._error or self.footer)
        return self.confirm_bar, self._question

    def _stop(self) -> None:
        self.stop_signal.set()
        self._answer(False)

    def ask(self, call: ToolCallBlock, on_answer: Callable[[bool], None]) -> None:
        """Show "Run NAME(ARGS)?" with Run / Skip buttons; ``on_answer(bool)`` gets the click
        (``False`` if the Stop button is pressed instead)."""
        self._on_answer = on_answer
        bar, question = self._confirm_bar()
        question.value = tool_card_html(call.name, "waiting for you", call.arguments, None, False)
        _hidden(bar, False)

    def cancel_question(self) -> None:
        """Take a pending Run / Skip question down without answering it."""
        self._on_answer = None
        if self.confirm_bar is not None:
            _hidden(self.confirm_bar, True)

    def _answer(self, run: bool) -> None:
        callback, self._on_answer = self._on_answer, None
        if self.confirm_bar is not None:
            _hidden(self.confirm_bar, True)
        if callback is not None:
            callback(run)

    def handle(self, event: LoopEvent) -> None:
        """Take one event into the view's state (no front-end traffic here)."""
        if isinstance(event, TextDelta | ReasoningDelta | ToolCallDelta) and self._first is None:
            self._first = self.clock()
        if isinstance(event, StepStart):
            self.step = event.step
        elif isinstance(event, BlockStart):
            self._start_block(event)
        elif isinstance(event, TextDelta):
            self._deltas += 1
            self._panel(event.index).append(event.text)
        elif isinstance(event, ReasoningDelta):
            self._deltas += 1
            self.reasoning.append(event.text)
        elif isinstance(event, ToolCallDelta):
            self._deltas += 1
            card = self._card(event.index)
            card.update(
                arguments=card.arguments + event.arguments_delta, name=card.name or event.name or ""
            )
            if event.id and not card.call_id:
                card.call_id = event.id
                self._cards_by_id[event.id] = card
        elif isinstance(event, BlockEnd) and isinstance(event.block, ToolCallBlock):
            card = self._card(event.index)
            block = event.block
            card.update(
                name=block.name, arguments=block.arguments, status="called", call_id=block.id
            )
            self._cards_by_id[block.id] = card
        elif isinstance(event, Usage):
            self.usage = self.usage + event.usage
            self.stats.estimated = False
        elif isinstance(event, Finish):
            self.last_finish = event.reason
        elif isinstance(event, ToolRun):
            self._tool_card(event.call_id, event.name).update(
                status="running", arguments=event.arguments
            )
        elif isinstance(event, ToolResult):
            self._tool_card(event.call_id, event.name).update(
                status=event.status, result=event.content, is_error=event.is_error
            )

    def _start_block(self, event: BlockStart) -> None:
        if event.block_type == "text":
            self._panel(event.index)
        elif event.block_type == "tool-call":
            self._card(event.index)
        else:
            self.reasoning  # noqa: B018 (made and shown now)

    def _panel(self, index: int) -> TextPanel:
        panel = self._panels.get((self.step, index))
        if panel is None:
            panel = self._panels[(self.step, index)] = TextPanel(layout=self._layout)
            self._text_panels.append(panel)
            self._blocks.children = (*self._blocks.children, panel.widget)
        return panel

    def _card(self, index: int) -> ToolCard:
        card = self._cards.get((self.step, index))
        if card is None:
            card = self._cards[(self.step, index)] = ToolCard(self._layout)
            self._blocks.children = (*self._blocks.children, card.widget)
        return card

    def _tool_card(self, call_id: str, name: str) -> ToolCard:
        card = self._cards_by_id.get(call_id)
        if card is None:  # a tool event without its call in the stream: show it anyway
            card = self._card(-1 - len(self._cards))
            card.update(call_id=call_id, name=name)
            self._cards_by_id[call_id] = card
        return card

    # ------------------------------------------------------------------ syncing

    def maybe_flush(self) -> bool:
        """Flush if the last flush is older than ``1/max_rate`` seconds; return whether it did."""
        now = self.clock()
        if now - self._last_flush < self.min_interval:
            return False
        self.flush()
        return True

    def flush(self) -> None:
        """Send what changed since the last flush to the front end."""
        self._last_flush = self.clock()
        if self._reasoning is not None:
            self._reasoning.sync()
        for panel in self._text_panels:
            panel.sync()
        for card in self._cards.values():
            card.sync()
        if (
            self._last_flush - self._last_stats >= STATS_INTERVAL
            or self.stats.status != "streaming"
        ):
            self._last_stats = self._last_flush
            self._update_stats()
            value = stats_html(self.stats, self.label)
            if self._stats.value != value:
                self._stats.value = value

    def _update_stats(self) -> None:
        s = self.stats
        now = self.clock()
        if s.estimated:
            s.output_tokens = self._deltas
        else:
            s.input_tokens = self.usage.input_tokens
            s.output_tokens = self.usage.output_tokens
            s.reasoning_tokens = self.usage.reasoning_tokens or 0
        if self._first is not None:
            s.latency = self._first - self._started
            elapsed = now - self._first
            if elapsed > 0.05 and s.output_tokens:
                s.tokens_per_s = s.output_tokens / elapsed
        if self.price is not None and not s.estimated:
            s.cost = cost(self.usage, self.price)

    def finish(
        self,
        *,
        status: str,
        error: LlmError | None = None,
        hint: str | None = None,
        detach_text: bool = True,
    ) -> None:
        """Final flush: set the status, hide Stop, show an error box; with ``detach_text`` the text
        panels leave the widget (the caller displays the final answer as a static output)."""
        self.stats.status = status
        self.flush()
        _hidden(self.stop_button, True)
        if self._stop_hint is not None:
            _hidden(self._stop_hint, True)
        if error is not None:
            if self._error is None:
                self._error = _html(self._layout)
                self._insert_before(self._error, self.footer)
            self._error.value = ErrorBox(error, hint).html()
        if detach_text:
            keep = tuple(
                c
                for c in self._blocks.children
                if not any(c is p.widget for p in self._text_panels)
            )
            if keep != self._blocks.children:
                self._blocks.children = keep
                for panel in self._text_panels:  # detached: close their comms (no leak)
                    _close_tree(panel.widget)
            self.widget.children = tuple(c for c in self.widget.children if c is not self.footer)

    def close(self) -> None:
        """Empty, then close, every widget of the view (frees the comms). Emptied first because
        a client that records widget state (nbclient, ``nbconvert --execute``) keeps the last
        state of closed widgets too: the answer must not be saved a second time in there."""
        for panel in (*(p for p in [self._reasoning] if p is not None), *self._text_panels):
            panel.release()
        for card in self._cards.values():
            card.widget.value = ""
        for html_widget in (self._error, self._question):
            if html_widget is not None:
                html_widget.value = ""
        _close_tree(self.widget)
        _close_tree(self.footer)
        for panel in self._text_panels:
            _close_tree(panel.widget)


def _close_tree(widget: w.Widget) -> None:
    """Close ``widget``, its children, and their layouts and styles (``close`` alone leaves
    those open: a comm, and a saved model, each)."""
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    for part in (getattr(widget, "layout", None), getattr(widget, "style", None)):
        if isinstance(part, w.Widget):
            part.close()
    widget.close()
