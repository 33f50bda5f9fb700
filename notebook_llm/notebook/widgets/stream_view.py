"""The live stream view: a live pane (anywidget) and a few ipywidgets, fed with stream events.

Layout (one ``VBox``)::

    pane:  [Reasoning ▸]              collapsed, once reasoning arrives
           text blocks / tool cards   in stream order, across the steps of a tool loop;
                                      Markdown rendered in the browser as it streams
           provider:model · status · tokens · first token · tok/s · cost
    [Run / Skip question]             only with --confirm
    [error box]                       only if the stream ends with an error
    footer: [Stop]

This module is the event → view-state logic: :meth:`StreamView.handle` only updates Python
state; :meth:`StreamView.maybe_flush` sends at most ``max_rate`` messages a second, each holding
only the text that arrived since the last one (every delta is sent once), plus the stats line at
most every ``STATS_INTERVAL``. The pane and its message protocol are :mod:`.live`; the blocks it
shows are :mod:`.panels`; the sparse widget classes around it are :mod:`.sparse`.

The view never raises into the stream and never shows a key: all text passes ``redact``.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as w

from ...api.tool_calling.events import LoopEvent, StepStart, ToolOutcome, ToolRun
from ...core.cancel import StopSignal
from ...core.errors import LlmError
from ...core.protocol import (
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
from ...core.redaction import redact
from ...engine.pricing import Price, cost
from .live import LivePane
from .panels import TextBlock, ToolCard
from .render import ErrorBox, ViewStats, estimated_tokens, tool_card_html
from .sparse import (
    SparseHBox,
    SparseLayout,
    SparseVBox,
    button,
    close_tree,
    html_widget,
    set_hidden,
)

#: The stats line changes at most this often (seconds).
STATS_INTERVAL = 0.5
#: Messages a second at most while text streams (each one carries all the text since the last).
MAX_RATE = 10.0


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
        max_rate: float = MAX_RATE,
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
        self._delta_chars = 0  # text of the deltas, for the running token estimate
        self._texts: dict[tuple[int, int], TextBlock] = {}  # in stream order
        self._cards: dict[tuple[int, int], ToolCard] = {}
        self._cards_by_id: dict[str, ToolCard] = {}
        #: Ops for the pane not sent yet: new blocks (text goes at flush, from each block).
        self._ops: list[list[Any]] = []
        self._streams: list[TextBlock] = []
        self._next_id = 0
        #: The stats line last sent (after the bold label).
        self.stats_text = ""
        #: Shared by every widget of the view that is never hidden or resized (one model).
        self._layout = SparseLayout()
        # Made when first needed (each widget is a model a saved notebook may keep): the
        # Run / Skip question of ``--confirm``, the error box, the hint.
        #: Each reasoning block of each step: its own block of the pane (a later block must not
        #: continue an earlier one's text, nor be measured against it).
        self._thoughts: dict[tuple[int, int], TextBlock] = {}
        self.confirm_bar: w.HBox | None = None
        self._question: w.HTML | None = None
        self._error: w.HTML | None = None
        self._stop_hint: w.HTML | None = None
        self.pane = LivePane(label, layout=self._layout)
        self.stop_button = button(
            description="Stop", icon="stop", button_style="danger", tooltip="Stop the stream"
        )
        self.stop_button.on_click(lambda _button: self._stop())
        self.footer = SparseHBox([self.stop_button], layout=self._layout)
        self._on_answer: Callable[[bool], None] | None = None
        self.widget = SparseVBox([self.pane, self.footer], layout=self._layout)
        self.widget.add_class("notebook-llm-view")

    # ------------------------------------------------------------------ events

    @property
    def text(self) -> str:
        """The answer text so far (all text blocks, across steps)."""
        return "\n\n".join(p.text for p in self._texts.values() if p.text)

    @property
    def reasoning(self) -> str:
        """The reasoning so far (every reasoning block, across steps)."""
        return "\n\n".join(b.text for b in self._thoughts.values() if b.text)

    def _thought(self, index: int) -> TextBlock:
        """Reasoning block ``index`` of this step, shown collapsed above the answer (made on
        first use)."""
        block = self._thoughts.get((self.step, index))
        if block is None:
            block = self._thoughts[(self.step, index)] = self._new_block("think")
        return block

    def _new_id(self, kind: str) -> int:
        block_id = self._next_id
        self._next_id += 1
        self._ops.append(["+", block_id, kind])
        return block_id

    def _new_block(self, kind: str) -> TextBlock:
        block = TextBlock(self._new_id(kind), kind)
        self._streams.append(block)
        return block

    def _insert_before(self, widget: w.Widget, before: w.Widget) -> None:
        children = list(self.widget.children)
        children.insert(children.index(before), widget)
        self.widget.children = tuple(children)

    def stop_unavailable(self, hint: str) -> None:
        """A blocking cell whose kernel cannot deliver clicks: replace Stop by what to do."""
        set_hidden(self.stop_button, True)
        if self._stop_hint is None:
            self._stop_hint = html_widget(self._layout)
            self.footer.children = (self._stop_hint, *self.footer.children)
        self._stop_hint.value = f"<span style='opacity:.7'>{hint}</span>"

    def _confirm_bar(self) -> tuple[w.HBox, w.HTML]:
        if self.confirm_bar is None or self._question is None:
            self._question = html_widget(self._layout)
            self.run_button = button(description="Run", button_style="success", icon="play")
            self.skip_button = button(description="Skip", icon="forward")
            self.run_button.on_click(lambda _b: self._answer(True))
            self.skip_button.on_click(lambda _b: self._answer(False))
            self.confirm_bar = SparseHBox(
                [self._question, self.run_button, self.skip_button], layout=SparseLayout()
            )
            self._insert_before(self.confirm_bar, self._error or self.footer)
        return self.confirm_bar, self._question

    def _stop(self) -> None:
        self.stop_signal.set()
        self._answer(False)

    def ask(self, call: ToolCallBlock, on_answer: Callable[[bool], None]) -> None:
        """Ask "Run NAME?" with Run / Skip buttons; ``on_answer(bool)`` gets the click
        (``False`` if the Stop button is pressed instead). The call's card in the pane (its
        arguments) says "waiting for you"; the question shows a card of its own only for a call
        the pane has none of."""
        self._on_answer = on_answer
        bar, question = self._confirm_bar()
        card = self._cards_by_id.get(call.id)
        if card is not None:
            card.update(status="waiting for you")
            question.value = f"Run <b>{html.escape(redact(call.name))}</b>?"
        else:
            question.value = tool_card_html(
                call.name, "waiting for you", call.arguments, None, False
            )
        set_hidden(bar, False)

    def cancel_question(self) -> None:
        """Take a pending Run / Skip question down without answering it."""
        self._on_answer = None
        if self.confirm_bar is not None:
            set_hidden(self.confirm_bar, True)

    def _answer(self, run: bool) -> None:
        callback, self._on_answer = self._on_answer, None
        if self.confirm_bar is not None:
            set_hidden(self.confirm_bar, True)
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
            self._delta_chars += len(event.text)
            self._panel(event.index).append(event.text)
        elif isinstance(event, ReasoningDelta):
            self._deltas += 1
            self._delta_chars += len(event.text)
            self._thought(event.index).append(event.text)
        elif isinstance(event, ToolCallDelta):
            self._deltas += 1
            card = self._card(event.index)
            card.add_arguments(event.arguments_delta, event.name)
            if event.id and not card.call_id:
                card.call_id = event.id
                self._cards_by_id[event.id] = card
        elif isinstance(event, BlockEnd) and not isinstance(event.block, ToolCallBlock):
            if event.block.type == "reasoning":
                done = self._thoughts.get((self.step, event.index))
            else:
                done = self._texts.get((self.step, event.index))
            if done is not None:  # complete: its held-back tail can go
                done.closed = True
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
                status="running", arguments=event.arguments, source=event.source
            )
        elif isinstance(event, ToolOutcome):
            self._tool_card(event.call_id, event.name).update(
                status=event.status,
                result=event.content,
                is_error=event.is_error,
                source=event.source,
            )

    def _start_block(self, event: BlockStart) -> None:
        if event.block_type == "text":
            self._panel(event.index)
        elif event.block_type == "tool-call":
            self._card(event.index)
        else:
            self._thought(event.index)  # made and shown now

    def _panel(self, index: int) -> TextBlock:
        block = self._texts.get((self.step, index))
        if block is None:
            block = self._texts[(self.step, index)] = self._new_block("md")
        return block

    def _card(self, index: int) -> ToolCard:
        card = self._cards.get((self.step, index))
        if card is None:
            card = self._cards[(self.step, index)] = ToolCard(self._new_id("card"))
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

    def flush(self, final: bool = False) -> None:
        """Send what changed since the last flush to the front end, in one message (``final``:
        also the text held back so as not to cut a key in two)."""
        self._last_flush = self.clock()
        ops, self._ops = self._ops, []
        for block in self._streams:
            piece = block.stream.take(final=True) if final else block.take()
            if piece:
                ops.append([block.id, piece])
        for card in self._cards.values():
            html, more = card.take(final)
            if html is not None:
                ops.append(["=", card.id, html])
            if more:  # argument text appended to the card shown (static/live_view.js)
                ops.append([card.id, more])
        if (
            self._last_flush - self._last_stats >= STATS_INTERVAL
            or self.stats.status != "streaming"
        ):
            self._last_stats = self._last_flush
            self._update_stats()
            line = " · ".join(p for p in (self.stats.status, self.stats.line()) if p)
            if line != self.stats_text:
                self.stats_text = line
                ops.append(["s", line])
        self.pane.send_ops(ops)

    def _update_stats(self) -> None:
        s = self.stats
        now = self.clock()
        if s.estimated:  # until the usage event
            s.output_tokens = estimated_tokens(self._deltas, self._delta_chars)
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
        """Final flush: set the status, hide Stop, show an error box; with ``detach_text`` the pane
        leaves the widget (the caller displays the final answer as a static output)."""
        self.stats.status = status
        self.flush(final=True)
        set_hidden(self.stop_button, True)
        if self._stop_hint is not None:
            set_hidden(self._stop_hint, True)
        if error is not None:
            if self._error is None:
                self._error = html_widget(self._layout)
                self._insert_before(self._error, self.footer)
            self._error.value = ErrorBox(error, hint).html()
        if detach_text:  # the pane's text lives in the browser only: closing it frees it there
            self.widget.children = tuple(
                c for c in self.widget.children if c is not self.footer and c is not self.pane
            )
            self.pane.close()
        else:
            self.widget.children = tuple(c for c in self.widget.children if c is not self.footer)

    def close(self) -> None:
        """Empty, then close, every widget of the view (frees the comms). Emptied first because
        a client that records widget state (nbclient, ``nbconvert --execute``) keeps the last
        state of closed widgets too: the answer must not be saved a second time in there. (The
        pane's text and cards were only ever sent as messages, never kept in its state.)"""
        for box in (self._error, self._question):
            if box is not None:
                box.value = ""
        close_tree(self.widget)
        close_tree(self.footer)
        close_tree(self.pane)
