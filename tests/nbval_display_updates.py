"""nbval support for ``update_display_data``: a pytest plugin, loaded with ``-p``.

    PYTHONPATH=tests pytest -p nbval_display_updates --nbval notebooks/ \
        --nbval-sanitize-with tests/nbval_sanitize.cfg

(``tests/test_notebooks.py`` runs exactly that.) It lives here, not as a ``conftest.py`` in
``notebooks/``, so the learner's file browser there shows notebooks only.

A ``%%llm`` turn shows its live view under a display id and, when the stream ends, replaces that
output in place (``update_display_data``) by the static answer, as JupyterLab, Notebook 7,
nbclient and nbconvert all apply. nbval 0.11 ignores that message ("unhandled iopub msg"), so it
would compare the live view's placeholder instead of what every front end shows and saves. This
applies each update to the display it targets before nbval reads that display.
"""

from __future__ import annotations

from typing import Any

from nbval.kernel import RunningKernel

_original_get_message = RunningKernel.get_message


def _display_id(msg: dict[str, Any]) -> str | None:
    return (msg.get("content", {}).get("transient") or {}).get("display_id")


def _get_message(self: Any, stream: str, timeout: float | None = None) -> Any:
    """From a ``display_data`` with a display id until its cell's kernel goes idle, messages
    are held back; updates to held displays are applied to them; then all are handed on."""
    queue: list[dict[str, Any]] = self.__dict__.setdefault("_notebook_llm_queue", [])
    if stream == "iopub" and queue:
        return queue.pop(0)
    msg = _original_get_message(self, stream, timeout=timeout)
    if stream != "iopub" or msg["msg_type"] != "display_data" or _display_id(msg) is None:
        return msg
    parent = msg["parent_header"].get("msg_id")
    held = [msg]
    by_id = {_display_id(msg): msg}
    while True:
        nxt = _original_get_message(self, stream, timeout=timeout)
        kind, display_id = nxt["msg_type"], _display_id(nxt)
        if kind == "update_display_data" and display_id in by_id:
            by_id[display_id]["content"]["data"] = nxt["content"]["data"]
            continue
        if kind == "display_data" and display_id is not None:
            by_id[display_id] = nxt
        held.append(nxt)
        if (
            kind == "status"
            and nxt["content"].get("execution_state") == "idle"
            and nxt["parent_header"].get("msg_id") == parent
        ):
            break
    queue.extend(held[1:])
    return held[0]


RunningKernel.get_message = _get_message  # type: ignore[method-assign]
