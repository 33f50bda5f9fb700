"""The live pane: each delta sent once, the rate coalesced on a fake clock, keys cut across
deltas never sent, the Markdown and sanitizer libraries sent once per kernel. A recording comm
stands in for the front end. (The static output's attack tests are in test_safe_html.py; the
pane's sanitizer runs in Chromium in test_browser.py.)"""

from __future__ import annotations

import json
from typing import Any

from live_view_support import Clock, Log, feed, words

from notebook_llm.core.redaction import register_secret
from notebook_llm.notebook.widgets import live
from notebook_llm.notebook.widgets.live import HOLD_MAX, HOLD_TAIL, LivePane, RedactedStream
from notebook_llm.notebook.widgets.stream_view import StreamView


def ops(log: Log) -> list[list[Any]]:
    """Every op the pane was sent, in order."""
    out: list[list[Any]] = []
    for kind, data in log:
        msg = json.loads(data)
        custom = kind == "comm_msg" and msg.get("method") == "custom"
        if custom and isinstance(msg["content"], list):
            out.extend(msg["content"])
    return out


def sent_text(log: Log, block: int = 0) -> str:
    return "".join(op[1] for op in ops(log) if op[0] == block)


def test_each_delta_is_sent_once_and_in_no_state(comms: Log) -> None:
    clock = Clock()
    view = StreamView("m", clock=clock)
    pieces = words(3000)
    feed(view, clock, pieces, dt=0.01)
    view.finish(status="done")
    answer = "".join(pieces)
    assert sent_text(comms) == answer  # every character once, in order, nothing re-sent
    assert not [d for k, d in comms if "word96 word0" in d and '"custom"' not in d]


def test_the_rate_is_coalesced_on_the_clock(comms: Log) -> None:
    clock = Clock()
    view = StreamView("m", clock=clock, max_rate=10)
    before = len(comms)
    feed(view, clock, words(2000), dt=0.005)  # 200 tokens/s for 10 s
    messages = [d for k, d in comms[before:] if k == "comm_msg"]
    assert 90 <= len(messages) <= 101  # 10 a second: one per 100 ms of the fake clock


def test_the_stats_line_rides_along_at_most_twice_a_second(comms: Log) -> None:
    clock = Clock()
    view = StreamView("m", clock=clock, max_rate=20)
    feed(view, clock, words(1000), dt=0.01)  # 10 s
    stats = [op for op in ops(comms) if op[0] == "s"]
    assert 10 <= len(stats) <= 21
    assert stats[-1][1].startswith("streaming · ~")


def test_a_key_cut_across_deltas_never_reaches_the_front_end(comms: Log) -> None:
    secret = "sk-test-SPLITSECRET-0123456789"
    register_secret(secret)
    clock = Clock()
    view = StreamView("m", clock=clock)
    text = f"the key is {secret} and Bearer abcdefghijklmnop1234 and ?key=zzzzzzzzzz9 end"
    pieces = [text[i : i + 3] for i in range(0, len(text), 3)]
    feed(view, clock, pieces, dt=1.0)  # a flush after every 3 characters
    view.finish(status="done")
    everything = " ".join(d for _, d in comms)
    assert "SPLITSECRET" not in everything
    assert "abcdefghijklmnop1234" not in everything
    assert "zzzzzzzzzz9" not in everything
    assert sent_text(comms) == "the key is *** and Bearer *** and ?key=*** end"


def test_a_long_run_without_white_space_is_sent_anyway() -> None:
    stream = RedactedStream()
    stream.push("x" * (HOLD_MAX + 10))
    assert len(stream.take()) == HOLD_MAX + 10 - HOLD_TAIL
    assert stream.take() == ""
    assert len(stream.take(final=True)) == HOLD_TAIL


def test_a_long_run_is_not_cut_inside_a_key_it_holds() -> None:
    """The long-run cut moves back to the start of a whole key that straddles it."""
    register_secret("sk-test-LEAKME-0123456789abcdef")
    stream = RedactedStream()
    stream.push("x" * 1990 + '"api":"sk-test-LEAKME-0123456789abcdef"' + "y" * 246)
    sent = stream.take() + stream.take(final=True)
    assert "LEAKME" not in sent
    assert '"api":"***"' in sent


def test_a_bearer_token_after_two_spaces_is_not_cut_from_its_word() -> None:
    stream = RedactedStream()
    sent = []
    for ch in "Authorization: Bearer  abcdefghijklmnop1234 done":
        stream.push(ch)
        sent.append(stream.take())
    sent.append(stream.take(final=True))
    assert "abcdefghijklmnop1234" not in "".join(sent)
    assert "".join(sent) == "Authorization: Bearer  *** done"


def test_the_markdown_library_is_sent_once_per_kernel_not_with_each_view(comms: Log) -> None:
    first, second = LivePane("m"), LivePane("n")
    opened = [json.loads(d)["state"] for k, d in comms if k == "comm_open"]
    panes = [s for s in opened if s["_model_name"] == "AnyModel"]
    libraries = [s for s in opened if "marked v18" in s.get("source", "")]
    assert len(panes) == 2
    assert len(libraries) == 1  # one model holds marked and DOMPurify, for every pane
    assert "@license DOMPurify 3.5.0" in libraries[0]["purify"]
    assert {p["lib"] for p in panes} == {live.library().model_id}
    for state in panes:
        assert "export default" in state["_esm"]  # the pane's own code, small
        assert "marked v18" not in state["_esm"]
        assert "DOMPurify 3" not in state["_esm"]
        assert len(state["_esm"]) < 12_000
    assert [p["label"] for p in panes] == ["m", "n"]
    first.close()
    second.close()
    assert live.library().comm is not None  # the library outlives the views
