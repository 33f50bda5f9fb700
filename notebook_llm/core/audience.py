"""Is a person watching? The question the lower layers ask, answered by the layer that knows.

The offline mock streams at a reading pace only where someone watches, and a batch shows a
progress bar only there; but only the notebook layer can tell (it asks the kernel which front
end sent the cell). So the answer is a function that the package's root installs at import
(:func:`set_watch_check`, with the notebook layer's ``interactive``), and the layers below
call :func:`someone_watching` without importing anything above them. Outside a notebook the
answer is "no one".
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["set_watch_check", "someone_watching"]


def _no_one() -> bool:
    return False


_check: Callable[[], bool] = _no_one


def set_watch_check(check: Callable[[], bool] | None) -> None:
    """Install the function that says whether a person watches (``None``: no one ever)."""
    global _check
    _check = check or _no_one


def someone_watching() -> bool:
    """Whether a person watches the running cell (``False`` when the check itself fails)."""
    try:
        return bool(_check())
    except Exception:
        return False
