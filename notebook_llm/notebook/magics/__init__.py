"""IPython magics: ``%%llm`` / ``%llm`` (:mod:`.llm`) and, when present, ``%%adapter`` /
``%adapter`` (:mod:`.adapter_magics`, written separately). ``%load_ext notebook_llm`` calls
:func:`load_ipython_extension`; loading twice is harmless and unloading removes them."""

from __future__ import annotations

import inspect
import re
from typing import Any


def _magic_classes() -> list[type[Any]]:
    from .llm import LlmMagics

    classes: list[type[Any]] = [LlmMagics]
    try:  # the %adapter magics are another module; register them when they exist
        from .adapter_magics import AdapterMagics  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        pass
    else:
        classes.append(AdapterMagics)
    return classes


_LLM_CELL = re.compile(r"get_ipython\(\)\.run_cell_magic\('llm', (.*)\)\s*", re.DOTALL)


def async_cell_transformer(lines: list[str]) -> list[str]:
    """Run a ``%%llm`` cell as an async cell, so the Stop button works while it streams.

    A blocking cell holds the kernel's main thread, and widget clicks (comm messages) wait until
    it ends. ipykernel 7 dispatches comm messages while an *async* cell awaits, so a cell that is
    exactly one ``%%llm`` magic is rewritten (after IPython's own transforms) to await
    ``LlmMagics.llm_cell_async``; IPython then runs it on the kernel's loop. Anything else is left
    as it is.
    """
    code = "".join(lines)
    match = _LLM_CELL.fullmatch(code)
    if match is None or not _autoawait_on():
        return lines
    return [
        "await get_ipython().magics_manager.registry['LlmMagics']"
        f".llm_cell_async({match.group(1)})\n"
    ]


def _autoawait_on() -> bool:
    # With `%autoawait False` (or a non-asyncio runner) a top-level await is a syntax error.
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or not getattr(shell, "autoawait", False):
        return False
    runner = getattr(shell, "loop_runner", None)
    return runner is None or "asyncio" in getattr(runner, "__name__", type(runner).__name__).lower()


def _kernel_dispatches_comms_during_async_cells(ipython: Any) -> bool:
    kernel = getattr(ipython, "kernel", None)
    dispatch = getattr(kernel, "dispatch_shell", None)
    if dispatch is None:
        return False
    try:  # ipykernel >= 7.x: dispatch_shell(..., concurrent=True) for comms during a cell
        return "concurrent" in inspect.signature(dispatch).parameters
    except (TypeError, ValueError):
        return False


def _one_line_error(
    shell: Any, etype: type[BaseException], value: BaseException, tb: Any, tb_offset: Any = None
) -> list[str]:
    """Show an ``LlmError`` raised by a cell's own code as its one line (code and what to fix),
    not as the traceback through the package that led to it: the message is the report."""
    shell._showtraceback(etype, value, [f"{etype.__name__}: {value}"])
    return []


def _install_error_display(ipython: Any) -> None:
    if not hasattr(ipython, "set_custom_exc"):
        return
    if getattr(ipython, "custom_exceptions", ()):  # someone else's handler: leave it alone
        return
    from ...core.errors import LlmError

    ipython.set_custom_exc((LlmError,), _one_line_error)


def _remove_error_display(ipython: Any) -> None:
    from ...core.errors import LlmError

    if getattr(ipython, "custom_exceptions", ()) == (LlmError,):
        ipython.set_custom_exc((), None)


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics (idempotent: a second load replaces the same instances), then warm
    the first cell up in the background (:mod:`.warmup`)."""
    _install_error_display(ipython)
    for cls in _magic_classes():
        if cls.__name__ not in ipython.magics_manager.registry:
            # Magics.__init__ already adds the instance to shell.configurables (%config).
            ipython.register_magics(cls(shell=ipython))
    transformers = getattr(ipython, "input_transformers_post", None)
    if (
        transformers is not None
        and async_cell_transformer not in transformers
        and _kernel_dispatches_comms_during_async_cells(ipython)
    ):
        transformers.append(async_cell_transformer)
    from . import warmup

    warmup.start()


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the magics registered by :func:`load_ipython_extension`."""
    _remove_error_display(ipython)
    transformers = getattr(ipython, "input_transformers_post", None)
    if transformers is not None and async_cell_transformer in transformers:
        transformers.remove(async_cell_transformer)
    manager = ipython.magics_manager
    for cls in _magic_classes():
        instance = manager.registry.pop(cls.__name__, None)
        if instance is None:
            continue
        for kind, names in instance.magics.items():
            for name in names:
                manager.magics[kind].pop(name, None)
        close = getattr(instance, "close", None)
        if callable(close):  # watchers, log collector
            close()
        while hasattr(ipython, "configurables") and instance in ipython.configurables:
            ipython.configurables.remove(instance)
