"""The small shared pieces split out of ``%adapter`` (issue 15): the file watcher and its
``changed`` signal, the one text-table writer, and the one Lua-line reader."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from waiting import GUARD, until_sync

from notebook_llm.adapters.lua.lines import line_of, lua_line_of
from notebook_llm.core.errors import ErrorCode, LlmError
from notebook_llm.notebook.file_watch import FileWatcher, Signal
from notebook_llm.notebook.widgets.adapter_view import text_table


def _wait(event: threading.Event) -> bool:
    return event.wait(GUARD)


def test_file_watcher_emits_changed_and_survives_a_raising_callback(tmp_path: Path) -> None:
    path = tmp_path / "a.lua"
    path.write_text("v1")
    seen: list[Path] = []
    second = threading.Event()
    watcher = FileWatcher(path, interval=0.02)

    def boom(p: Path) -> None:
        raise RuntimeError("a broken reload")

    def note(p: Path) -> None:
        seen.append(p)
        if len(seen) == 2:
            second.set()

    watcher.changed.connect(boom)
    watcher.changed.connect(note)
    watcher.start()
    try:
        time.sleep(0.05)  # a later modification time than v1's, however coarse the clock
        path.write_text("v2 longer")
        until_sync(lambda: seen, "the first change")
        path.write_text("v3 even longer")
        assert _wait(second)
    finally:
        watcher.stop()
    assert seen == [path, path]
    assert watcher.changes == 2
    assert not watcher.thread.is_alive()


def test_signal_disconnect() -> None:
    signal: Signal[int] = Signal()
    got: list[int] = []
    disconnect = signal.connect(got.append)
    signal.emit(1)
    disconnect()
    disconnect()  # twice is fine
    signal.emit(2)
    assert got == [1]


def test_text_table_aligns_columns_without_trailing_blanks() -> None:
    text = text_table(["name", "key"], [["openai", "set"], ["m", ""]])
    assert text.splitlines() == ["name    key", "openai  set", "m"]


def test_line_of_reads_any_chunk_or_only_the_named_one() -> None:
    msg = 'demo:7: attempt to index a nil value (from [string "json"]:3:)'
    assert line_of(msg) == 7
    assert line_of(msg, "=demo") == 7
    assert line_of('[string "json"]:3: x', "=demo") is None
    assert line_of("no line here") is None
    err = LlmError("boom.lua:12: bad", ErrorCode.ADAPTER_ERROR)
    assert lua_line_of(err) == 12
