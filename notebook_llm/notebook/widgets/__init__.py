"""Widgets: the live stream view (:class:`StreamView`) and how a turn is shown (``present``).

Names load on first use (PEP 562): importing a light submodule such as ``widgets.adapter_view``
(the ``%adapter`` magics' HTML helpers) must not pull in ipywidgets, so that
``%load_ext notebook_llm`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .render import ErrorBox, Result, ViewStats
    from .stream_view import StreamView

__all__ = ["ErrorBox", "Result", "StreamView", "ViewStats"]

_HOMES = {"ErrorBox": ".render", "Result": ".render", "ViewStats": ".render"}


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(_HOMES.get(name, ".stream_view"), __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
