"""Widgets: the live stream view (:class:`StreamView`) and how a turn is shown (``present``)."""

from __future__ import annotations

from .render import ErrorBox, Result, ViewStats
from .stream_view import StreamView

__all__ = ["ErrorBox", "Result", "StreamView", "ViewStats"]
