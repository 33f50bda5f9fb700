"""A small widget to answer a draft's questions: which of two close candidates is the field.

When the recorded bodies leave a choice open (two fields read about as much like the answer, two
unnamed counts that may be input or output), the drafter takes the stronger one and asks
(:attr:`~notebook_llm.conformance.draft.Draft.questions`). :class:`DraftChoices` shows each
question as radio buttons, each option with a sample of its value; choosing one re-drafts with
that pick (the ``redraft`` callback the ``%adapter draft`` magic passes: it reloads the adapter,
and rewrites its file when there is one) and says which ``--pick`` reproduces the choice.

Plain widget state, so it is tested without a browser; every shown string is redacted.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ...conformance.draft import Draft
from ...conformance.draft.lua_text import sample
from ...core.errors import LlmError
from ...core.redaction import redact

__all__ = ["DraftChoices"]


class DraftChoices:
    """Radio buttons for a draft's questions (see the module doc); ``.widget`` is the root."""

    def __init__(self, draft: Draft, redraft: Callable[[dict[str, str]], str]) -> None:
        self.draft = draft
        self.redraft = redraft
        self.picks: dict[str, str] = dict(draft.picks)
        self.buttons: dict[str, Any] = {}
        rows: list[Any] = [
            widgets.HTML(
                "<b>The bodies leave a choice open.</b> The draft took the first candidate; "
                "choose another to re-draft with it."
            )
        ]
        for q in draft.questions:
            options = [
                (f"{sample(o.pick, 60)}: {sample(repr(o.sample), 60)}", o.pick) for o in q.options
            ]
            radio = widgets.RadioButtons(
                options=options,
                value=q.options[q.chosen].pick,
                description=q.field,
                layout=widgets.Layout(width="auto"),
            )
            radio.observe(self._changed(q.field), names="value")
            self.buttons[q.field] = radio
            rows.append(radio)
        self.status = widgets.HTML()
        rows.append(self.status)
        self.widget = widgets.VBox(rows)

    def _changed(self, field: str) -> Callable[[dict[str, Any]], None]:
        def on_change(change: dict[str, Any]) -> None:
            self.choose(field, str(change["new"]))

        return on_change

    def choose(self, field: str, pick: str) -> None:
        """Re-draft with ``field`` taken from ``pick`` (what a click does)."""
        self.picks[field] = pick
        try:
            note = self.redraft(dict(self.picks))
        except LlmError as err:
            self.status.value = f"<pre>{html.escape(redact(err.message))}</pre>"
            return
        line = " ".join(f"--pick {k}={v}" for k, v in self.picks.items())
        self.status.value = f"<pre>{html.escape(redact(note))}\nthe same choice next time: {html.escape(redact(line))}</pre>"
