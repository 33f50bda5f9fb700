"""Is a person watching this cell? The one check that decides between live widgets and a
static output only.

A live view (the streaming widgets, the Stop button, a batch's progress bar) is worth its
widgets only where a front end shows them as they change: JupyterLab, Notebook 7, VS Code,
Colab. A headless run (nbclient, nbconvert, papermill, nbval) has no one to watch, and every
widget it creates is kept in the saved file's widget state (nbclient stores the last state of
each model, closed or not), which is how three short cells once saved 150 KB. Those runners all
send their execute requests with ``allow_stdin=False``, and the interactive front ends with
``True``; ipykernel keeps the current request's flag as ``kernel._allow_stdin``. So:

* :func:`in_kernel` - running inside an IPython kernel at all;
* :func:`interactive` - in a kernel whose current request comes from a front end that can
  answer (widgets, ``input()``): the live view and the Run/Skip question are shown there.

No notebook import happens here beyond ``IPython.get_ipython`` (imported lazily), so the engine
layers may ask too.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["in_kernel", "interactive"]


def _kernel() -> Any:
    if "IPython" not in sys.modules:  # no shell was ever started: a plain script
        return None
    from IPython import get_ipython

    shell = get_ipython()
    return None if shell is None else getattr(shell, "kernel", None)


def in_kernel() -> bool:
    """Running inside an IPython kernel (a notebook, headless or not)."""
    return _kernel() is not None


def interactive() -> bool:
    """Inside a kernel whose current request came from a front end a person is using."""
    kernel = _kernel()
    return kernel is not None and bool(getattr(kernel, "_allow_stdin", True))
