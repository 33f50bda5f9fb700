"""What the live-view tests share (``test_live_view.py``, ``test_stream_view.py``): a comm that
records every message the kernel would send to the front end, a fake clock, a text feeder and
the synthetic words. The ``comms`` fixture that installs the recording comm is in conftest."""

from __future__ import annotations

import json
from typing import Any

from comm.base_comm import BaseComm

from notebook_llm.core.protocol import (
    BlockEnd,
    BlockStart,
    Finish,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
)
from notebook_llm.notebook.widgets.stream_view import StreamView

Log = list[tuple[str, str]]


class RecordingComm(BaseComm):
    """A comm that records (message type, JSON data) of every message it would send."""

    def __init__(self, log: Log, **kwargs: Any) -> None:
        self.log = log
        super().__init__(**kwargs)

    def publish_msg(
        self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **k: Any
    ) -> None:
        self.log.append((msg_type, json.dumps(data, default=str)))


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def feed(view: StreamView, clock: Clock, pieces: list[str], dt: float) -> None:
    """One text block of ``pieces``, ``dt`` seconds apart, flushing as the view would."""
    view.handle(BlockStart(0, "text"))
    for piece in pieces:
        clock.now += dt
        view.handle(TextDelta(0, piece))
        view.maybe_flush()
    view.handle(BlockEnd(0, TextBlock("".join(pieces))))
    view.handle(Finish.stop())


def feed_tool_call(view: StreamView, clock: Clock, pieces: list[str], dt: float) -> None:
    """One tool call whose arguments stream as ``pieces``, ``dt`` seconds apart, flushing as
    the view would; then its end and the finish."""
    view.handle(BlockStart(0, "tool-call"))
    for i, piece in enumerate(pieces):
        clock.now += dt
        view.handle(
            ToolCallDelta(0, "call-1" if i == 0 else None, piece, "write_file" if i == 0 else None)
        )
        view.maybe_flush()
    view.handle(BlockEnd(0, ToolCallBlock("call-1", "write_file", "".join(pieces))))
    view.handle(Finish.stop())


def pane_ops(log: Log) -> list[list[Any]]:
    """The ops the kernel sent to the live pane, in order."""
    messages = [json.loads(data) for kind, data in log if kind == "comm_msg"]
    return [op for m in messages if isinstance(m.get("content"), list) for op in m["content"]]


def words(n: int) -> list[str]:
    """``n`` tokens of Markdown-ish text: a paragraph break every 60."""
    return [("\n\n" if i % 60 == 59 else " ") + f"word{i % 97}" for i in range(n)]


#: Markdown that a line scan could take for code where a renderer does not (and the reverse),
#: each hiding an image and raw HTML, and link targets that decode to ``javascript:``: found
#: against the regex sanitizer that came before markdown-it and nh3, and kept as attacks on
#: both renderers (the final output, test_safe_html.py, and the live pane, test_browser.py).
#: Neither may turn anything in them into an element (an image, a script, an event handler)
#: or a ``javascript:``/``data:`` link.
_HIDDEN = "![x](https://evil.example/{n}.png) <img src=x onerror=alert({n})>"
INERT_TRICKS: dict[str, str] = {
    "plain": _HIDDEN,
    "span across a heading and a list": "# a `b\n- {h} `c",
    "span across list items": "- a `b\n- {h} `c",
    "escaped backslash before a backtick": "\\\\`a` {h} `b`",
    "escaped backtick": "\\`a {h} `b`",
    "backticks in link targets": "[a](https://x.example/`) {h} [c](https://y.example/`)",
    "backtick fence with a backtick in its info string": "``` `\n{h}\n",
    "fence in a list item, ended by the list": "- item\n   ```\n   code\n- {h}\n",
    "fence in a quote": "> ```\n{h}\n",
    "indented fence": "  ```\n{h}\n",
    "setext heading": "a `b\n---\n{h} `c",
    "table": "| a `b |\n|---|\n| {h} `c |",
    "thematic break": "a `b\n***\n{h} `c",
    "reference image": "see ![r][ref] `x\n\n[ref]: https://evil.example/r.png",
    "nested image": "![a ![b](https://evil.example/9.png)](https://evil.example/10.png)",
    "line break in a code span": "`a\n{h}`",
    "form feed that Python splits lines at": "para\x0c```\n{h}\n",
    "line separator": "para\u2028```\n{h}\n",
    "carriage returns only": "a\r```\r`x`\r```\r{h}",
    "fence closed the way marked closes it": "```\ncode\n```~\n{h}\n",
    "fence after a list item": "- item\n```\ncode\n```\n{h}\n",
    "fence after a quote": "> a\n```\ncode\n```\n{h}\n",
    # Found in a second review: a fence line a renderer reads as something else, and link
    # targets that decode to javascript: or data: only in the renderer or the browser.
    "fence closed by a line marked does not close on": "```\n```~\n```\n{h}\n```\n",
    "fence closed by a tab": "```\n```\t\n```\n{h}\n```\n",
    "tilde fence and a backtick": "~~~\n~~~`\n~~~\n{h}\n~~~\n",
    "fence inside a link title": '[a]: /u "\n```\n"\n{h}\n```\n',
    "fence as a reference target": "[a]:\n```\n{h}\n```\n",
    "fence inside a reference label": "[a\n```\n]: /u\n{h}\n```\n",
    "fence as a table row": "a | b\n--|--\n```|x\n{h}|y\n",
    "fence info string in a table": "a | b\n--|--\n```{h}|x\n",
    "fence inside display math": "$$\n```\n$$\n{h}\n",
    "fence inside inline math": "$\n```\n$\n{h}\n",
    "fence inside bracket math": "\\\\[\n```\n\\\\]\n{h}\n",
    "backslash in a link target's scheme": "[a](javascript\\:alert(1))",
    "link target on the next line": "[a](\njavascript\\:alert(1))",
    "reference target on the next line": "[a]:\n  javascript:alert(1)\n\n[a]",
    "escaped bracket in a reference label": "[a\\]b]: javascript:alert(1)\n\n[a\\]b]",
    "reference label over two lines": "[a\nb]: javascript:alert(1)\n\n[a b]",
    "a reference decoded twice": "[a](javascript&amp;#58;alert(1))",
    "data target with a backslash": "[a]: data\\:text/html;base64,PHNjcmlwdD4=\n\n[a]",
}
INERT_TRICKS = {
    name: text.replace("{h}", _HIDDEN).format(n=i)
    for i, (name, text) in enumerate(INERT_TRICKS.items())
}
