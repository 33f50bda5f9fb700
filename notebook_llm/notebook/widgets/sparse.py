"""Sparse ipywidgets: the building blocks of the live view, and how to close a tree of them.

Every widget is a model a notebook may save. ``Sparse`` models send only the traits that differ
from their defaults when they are created (ipywidgets' own ``drop_defaults``), so a saved
notebook keeps a few bytes per widget instead of ~1 KB per layout. ``close_tree`` closes a
widget with its children, layouts and styles, which ``Widget.close`` alone leaves open.

Nothing here knows about streams or events: :mod:`.panels` and :mod:`.stream_view` build on it.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w
from ipywidgets.widgets.widget_button import ButtonStyle
from ipywidgets.widgets.widget_string import HTMLStyle

#: Keys a comm_open must always carry: the front end builds the model from them.
_IDENTITY = (
    "_model_name",
    "_model_module",
    "_model_module_version",
    "_view_name",
    "_view_module",
    "_view_module_version",
)


class Sparse(w.Widget):  # type: ignore[misc]
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


class SparseLayout(Sparse, w.Layout):  # type: ignore[misc]
    pass


class SparseHTMLStyle(Sparse, HTMLStyle):  # type: ignore[misc]
    pass


class SparseButtonStyle(Sparse, ButtonStyle):  # type: ignore[misc]
    pass


class SparseVBox(Sparse, w.VBox):  # type: ignore[misc]
    pass


class SparseHBox(Sparse, w.HBox):  # type: ignore[misc]
    pass


class SparseHTML(Sparse, w.HTML):  # type: ignore[misc]
    pass


class SparseButton(Sparse, w.Button):  # type: ignore[misc]
    pass


def html_widget(layout: w.Layout | None = None, value: str = "") -> w.HTML:
    """An HTML widget with a sparse style (and a sparse layout unless one is shared)."""
    return SparseHTML(value=value, layout=layout or SparseLayout(), style=SparseHTMLStyle())


def button(**kwargs: Any) -> w.Button:
    """A sparse button, as wide as its label."""
    return SparseButton(layout=SparseLayout(width="auto"), style=SparseButtonStyle(), **kwargs)


def set_hidden(widget: w.Widget, hidden: bool) -> None:
    """Hide or show ``widget``, sending nothing when that is already so."""
    display = "none" if hidden else None
    if widget.layout.display != display:
        widget.layout.display = display


def close_tree(widget: w.Widget) -> None:
    """Close ``widget``, its children, and their layouts and styles (``close`` alone leaves
    those open: a comm, and a saved model, each)."""
    for child in getattr(widget, "children", ()):
        close_tree(child)
    for part in (getattr(widget, "layout", None), getattr(widget, "style", None)):
        if isinstance(part, w.Widget):
            part.close()
    widget.close()
