"""The live view: state, coalescing, linear bytes, Stop, key scrubbing (recording comm)."""

from __future__ import annotations

import json
from typing import Any

from live_view_support import Clock, feed, feed_tool_call, pane_ops, words

from notebook_llm.api.tool_calling.events import StepStart, ToolOutcome, ToolRun
from notebook_llm.core.protocol import (
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)
from notebook_llm.core.redaction import register_secret
from notebook_llm.notebook.widgets import live
from notebook_llm.notebook.widgets.stream_view import StreamView


def test_renders_reasoning_text_tools_and_footer(comms: list[tuple[str, str]]) -> None:
    view = StreamView("mock:tools", price=(1.0, 2.0))
    events = [
        StepStart(0),
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "think"),
        BlockEnd(0, ReasoningBlock("think")),
        BlockStart(1, "text"),
        TextDelta(1, "Let me *check*."),
        BlockEnd(1, TextBlock("Let me *check*.")),
        BlockStart(2, "tool-call"),
        ToolCallDelta(2, "c1", '{"a":', "add"),
        ToolCallDelta(2, "c1", " 1}"),
        BlockEnd(2, ToolCallBlock("c1", "add", '{"a": 1}')),
        Usage(TokenUsage(10, 20, reasoning_tokens=5)),
        Finish.stop(),
        ToolRun("c1", "add", '{"a": 1}'),
        ToolOutcome("c1", "add", "3", status="ok"),
        StepStart(1),
        BlockStart(0, "text"),
        TextDelta(0, "It is 3."),
        BlockEnd(0, TextBlock("It is 3.")),
        Usage(TokenUsage(30, 4)),
        Finish.stop(),
    ]
    for event in events:
        view.handle(event)
    view.flush()
    assert view.text == "Let me *check*.\n\nIt is 3."
    assert view.reasoning == "think"
    card = view._cards[(0, 2)]
    assert "add" in card.html()
    assert "ok" in card.html()
    assert "→ 3" in card.html()
    # usage is summed over the steps; the cost uses the price
    assert (view.usage.input_tokens, view.usage.output_tokens) == (40, 24)
    assert "40 in" in view.stats_text
    assert "$0.0001" in view.stats_text
    opened = [json.loads(d) for k, d in comms if k == "comm_msg"]
    ops = [op for m in opened if isinstance(m.get("content"), list) for op in m["content"]]
    kinds = [op[2] for op in ops if op[0] == "+"]
    assert kinds == ["think", "md", "card", "md"]  # in stream order, across the two steps
    view.finish(status="done")
    assert view.stop_button.layout.display == "none"
    assert view.footer not in view.widget.children
    assert view.pane not in view.widget.children
    assert view.pane.comm is None  # closed: the browser frees the text


def test_updates_are_coalesced(comms: list[tuple[str, str]]) -> None:
    clock = Clock()
    view = StreamView("m", clock=clock, max_rate=20)
    before = len(comms)
    feed(view, clock, words(2000), dt=0.0)  # all at the same instant
    assert len(comms) - before <= 1  # one message, not 2000 updates


def test_bytes_grow_linearly(comms: list[tuple[str, str]]) -> None:
    def measure(n: int) -> int:
        comms.clear()
        clock = Clock()
        view = StreamView("m", clock=clock)
        feed(view, clock, words(n), dt=0.01)
        view.finish(status="done")
        return sum(len(data) for _, data in comms)

    small, large = measure(2000), measure(8000)
    text_bytes = len("".join(words(8000)))
    assert large < 5.0 * small  # 4x the tokens: about 4x the bytes, not 16x
    assert large < 2.5 * text_bytes  # fixed cost (the pane's code) included


def test_bytes_grow_linearly_for_one_long_paragraph(comms: list[tuple[str, str]]) -> None:
    def measure(n: int) -> int:
        comms.clear()
        clock = Clock()
        view = StreamView("m", clock=clock)
        feed(view, clock, ["word "] * n, dt=0.01)
        view.finish(status="done")
        return sum(len(data) for _, data in comms)

    small, large = measure(2000), measure(8000)
    assert large < 5.0 * small  # no blank line at all, still linear


def test_tool_arguments_stream_as_text_appended_to_the_card(comms: list[tuple[str, str]]) -> None:
    # A long argument (a file's content, say) used to re-send the whole card at every flush.
    pieces = [f"line {i} of the file\\n" for i in range(2000)]
    arguments = "".join(pieces)
    clock = Clock()
    view = StreamView("m", clock=clock)
    feed_tool_call(view, clock, pieces, dt=0.01)
    view.flush(final=True)
    ops = pane_ops(comms)
    cards = [op for op in ops if op[0] == "="]
    appended = "".join(op[1] for op in ops if op[0] == cards[0][1])
    assert 1 < len(cards) <= 3  # shown once the name is known, and at the end of the call
    assert appended in arguments  # the deltas after the first card, each once, in order
    assert len(appended) > 0.9 * len(arguments)
    sent = sum(len(json.dumps(op)) for op in ops if op[1] == cards[0][1] or op[0] == cards[0][1])
    assert sent < 3.5 * len(arguments)  # linear: the whole card at every flush was ~100x
    assert view._cards[(0, 0)].arguments == arguments


def test_stop_button_sets_the_signal(comms: list[tuple[str, str]]) -> None:
    view = StreamView("m")
    assert not view.stop_signal.is_set()
    view.stop_button.click()
    assert view.stop_signal.is_set()


def test_keys_never_reach_the_front_end(comms: list[tuple[str, str]]) -> None:
    secret = "sk-test-VIEWSECRET-0123456789"
    register_secret(secret)
    view = StreamView(f"p:{secret}")
    view.handle(BlockStart(0, "text"))
    view.handle(TextDelta(0, f"the key is {secret} ok"))
    view.handle(BlockStart(1, "tool-call"))
    view.handle(ToolCallDelta(1, "c", json.dumps({"k": secret}), "f"))
    view.flush()  # the card is shown: what follows is appended to it, cut into pieces
    half = len(secret) // 2
    view.handle(ToolCallDelta(1, None, f' , "again": "{secret[:half]}'))
    view.flush()
    view.handle(ToolCallDelta(1, None, f'{secret[half:]}" '))
    view.flush()
    view.handle(ToolOutcome("c", "f", f"got {secret}"))
    view.flush()
    view.finish(status="done")
    assert comms
    assert not [m for m in comms if secret in m[1]]


# ------------------------------------------------------------------ the end of a view (issue 17)


def _opened(log: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [json.loads(data)["state"] for kind, data in log if kind == "comm_open"]


def test_a_plain_answer_opens_few_models_and_only_non_default_state(
    comms: list[tuple[str, str]],
) -> None:
    view = StreamView("mock:echo", clock=Clock())
    for event in [BlockStart(0, "text"), TextDelta(0, "hello"), BlockEnd(0, TextBlock("hello"))]:
        view.handle(event)
    view.flush()
    states = _opened(comms)
    names = sorted(s["_model_name"] for s in states)
    # No reasoning, no --confirm question, no error, no hint: none of their widgets exists.
    assert "AccordionModel" not in names
    assert len(names) <= 12, names
    layouts = [s for s in states if s["_model_name"] == "LayoutModel"]
    assert all(
        set(s) - {"width"} <= {k for k in s if k.startswith(("_model", "_view"))} for s in layouts
    )  # a default Layout sends its identity, not ~40 nulls


def test_close_empties_then_closes_every_model_of_the_view(
    comms: list[tuple[str, str]],
) -> None:
    live.library()  # made by an earlier view of this kernel: it outlives them all
    del comms[:]
    view = StreamView("mock:reasoning", clock=Clock())
    text = "".join(f"Paragraph {i} with some words.\n\n" for i in range(40))
    for event in [
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "thinking hard"),
        BlockEnd(0, ReasoningBlock("thinking hard")),
        BlockStart(1, "text"),
        TextDelta(1, text),
        BlockEnd(1, TextBlock(text)),
    ]:
        view.handle(event)
        view.flush()
    n_open = sum(1 for kind, _ in comms if kind == "comm_open")
    del comms[:]
    view.close()
    n_closed = sum(1 for kind, _ in comms if kind == "comm_close")
    assert n_closed == n_open  # layouts and styles too: no model is left open
    updates = " ".join(d for kind, d in comms if kind == "comm_msg")
    assert "Paragraph 3" not in updates  # emptying sends no text
    states = " ".join(d for kind, d in comms if kind != "comm_msg")
    assert "Paragraph" not in states  # text is never in any state
    assert "thinking" not in states


def test_the_running_token_estimate_counts_characters_when_a_delta_holds_several_tokens() -> None:
    """A server that sends several tokens per delta (the mock sends 1-3) showed a fraction of its
    rate while streaming: the estimate counted deltas. It is now at least the text's length / 4."""
    from notebook_llm.core.protocol import BlockStart, TextDelta
    from notebook_llm.notebook.widgets.stream_view import StreamView

    view = StreamView("m")
    view.handle(BlockStart(index=0, block_type="text"))
    for _ in range(10):
        view.handle(TextDelta(index=0, text="forty chars of answer in one delta here."))
    view._update_stats()
    assert view.stats.output_tokens == 100  # 400 characters / 4, not 10 deltas


def test_each_reasoning_block_is_its_own_block_of_the_pane(comms: list[tuple[str, str]]) -> None:
    """Interleaved thinking (reasoning, text, reasoning): each reasoning block gets its own
    block in the pane and all of its text, not the rest of one shared block."""
    from live_view_support import pane_ops

    from notebook_llm.core.protocol import ReasoningBlock, ReasoningDelta

    view = StreamView("mock:reasoning")
    events = [
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "first thought, rather long " * 5),
        BlockEnd(0, ReasoningBlock("first thought, rather long " * 5)),
        BlockStart(1, "text"),
        TextDelta(1, "Partly. "),
        BlockEnd(1, TextBlock("Partly. ")),
        BlockStart(2, "reasoning"),
        ReasoningDelta(2, "second"),
        BlockEnd(2, ReasoningBlock("second")),
        Finish.stop(),
    ]
    for event in events:
        view.handle(event)
    view.flush(final=True)
    ops = pane_ops(comms)
    thinks = [op[1] for op in ops if op[0] == "+" and op[2] == "think"]
    assert len(thinks) == 2
    sent = {b: "".join(op[1] for op in ops if op[0] == b) for b in thinks}
    assert sent[thinks[0]] == "first thought, rather long " * 5
    assert sent[thinks[1]] == "second"
