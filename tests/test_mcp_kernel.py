"""MCP tools in a real kernel (nbclient): the tool card names the server in the saved output,
``%llm mcp`` lists the servers and their tools, a crash is one line and the next cell answers,
and shutting the kernel down reaps its server, even one that ignores its stdin closing."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import nbformat
from mcp_support import FAULT_SERVER, wait_until
from nbclient import NotebookClient


def _text(cell: Any) -> str:
    out = []
    for o in cell.outputs:
        if "text" in o:
            out.append(o["text"])
        out.append((o.get("data") or {}).get("text/plain", ""))
    return "\n".join(out)


def _html(cell: Any) -> str:
    return "\n".join((o.get("data") or {}).get("text/html", "") for o in cell.outputs)


def test_mcp_in_a_kernel(tmp_path: Path) -> None:
    cells = [
        "%load_ext notebook_llm",
        "import sys\nfrom notebook_llm import mcp\n"
        f"mcp.add_server('faults', command=sys.executable, args=[{str(FAULT_SERVER)!r}, "
        f"'--linger'], env={{'MARK_DIR': {str(tmp_path)!r}}})",
        '%%llm mock:tools --tools mcp:faults/echo\nEcho "in a kernel"',
        "%llm mcp",
        "%%llm mock:tools --tools mcp:faults/crash\ncrash",
        "%%llm mock:echo\nstill answering",
        '%%llm mock:tools --tools mcp:faults/echo\nEcho "started again"',
        "import os\nme = os.getpid()\npids = []\n"
        "for e in os.listdir('/proc'):\n"
        "    if e.isdigit():\n"
        "        try:\n"
        "            stat = open(f'/proc/{e}/stat').read()\n"
        "            cmd = open(f'/proc/{e}/cmdline').read()\n"
        "        except OSError:\n"
        "            continue\n"
        "        if int(stat[stat.rindex(')') + 2:].split()[1]) == me and 'fault_server' in cmd:\n"
        "            pids.append(e)\n"
        "print('servers:', ' '.join(pids))",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    answer, listing, crash, after, again, pids = nb.cells[2:]
    assert "[tool echo" in _text(answer)
    assert "ok mcp:faults]" in _text(answer)
    assert "Result of echo: in a kernel" in _text(answer)
    assert "mcp:faults" in _html(answer)
    assert "ready, " in _text(listing)
    assert "faults/echo: Echo the text back." in _text(listing)
    assert "MCP server 'faults': exited during the call to 'crash'" in _text(crash)
    assert "still answering" in _text(after)
    assert "Result of echo: started again" in _text(again)
    (line,) = [ln for ln in _text(pids).splitlines() if ln.startswith("servers:")]
    started = line.split()[1:]
    assert len(started) == 1  # the crashed server was reaped; the one started after is kept
    # nbclient shut the kernel down: its server went with it (it ignores its stdin closing)
    try:
        assert wait_until(lambda: not Path(f"/proc/{started[0]}").exists())
    finally:
        if Path(f"/proc/{started[0]}").exists():
            os.kill(int(started[0]), signal.SIGKILL)
