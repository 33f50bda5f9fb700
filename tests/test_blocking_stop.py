"""The Stop button of a blocking ``chat.send(...)`` in a real ipykernel, clicked as JupyterLab
clicks it: a ``comm_msg`` on the shell channel while the cell still runs.

A blocking cell holds the kernel's main thread, which handles comm messages; under ipykernel 7
the click is seen as it arrives (:mod:`notebook_llm.notebook.widgets.kernel_poll`). JupyterLab
4.4+ sends widget messages on a subshell by default (its "comms over subshells" setting), older
front ends on the main shell: both are tried. The answer streams for minutes unless stopped, so
a Stop that does not work fails here by its status ("cut at max tokens", not "stopped"), within
the test's generous wall-clock limit.
"""

from __future__ import annotations

import os
import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import KernelManager

SETUP = """\
%load_ext notebook_llm
from notebook_llm import Chat
from notebook_llm.adapters.mock.shared import shared_server
shared_server().chunk_delay = 0.05
chat = Chat("mock", "lorem", live=True)
"""
#: 4,000 tokens at 50 ms a piece: minutes, unless the Stop button works.
SEND = 'r = chat.send("Write a long story.", max_tokens=4000)'


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[tuple[KernelManager, Any]]:
    env = dict(os.environ)
    env.update(JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), PYTHONWARNINGS="ignore")
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(env=env, cwd=str(tmp_path))
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=120)
    try:
        yield manager, client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _run(client: Any, code: str, timeout: float = 120) -> dict[str, Any]:
    reply: dict[str, Any] = client.execute_interactive(code, timeout=timeout, allow_stdin=False)
    assert reply["content"]["status"] == "ok", reply["content"]
    return reply


def _value(client: Any, expression: str) -> str:
    out: list[str] = []
    client.execute_interactive(
        f"print({expression})",
        timeout=60,
        output_hook=lambda m: out.append(m["content"].get("text", "")),
    )
    return "".join(out).strip()


def _subshell(client: Any) -> str:
    msg = client.session.msg("create_subshell_request", {})
    client.control_channel.send(msg)
    while True:
        reply = client.control_channel.get_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return str(reply["content"]["subshell_id"])


@pytest.mark.parametrize("route", ["main shell", "subshell"])
def test_stop_ends_a_blocking_chat_send_under_ipykernel_7(
    kernel: tuple[KernelManager, Any], route: str
) -> None:
    import ipykernel

    assert int(ipykernel.__version__.split(".")[0]) >= 7, ipykernel.__version__
    _, client = kernel
    _run(client, SETUP)
    subshell = _subshell(client) if route == "subshell" else None
    while True:  # drop the setup's messages
        try:
            client.get_iopub_msg(timeout=0.5)
        except queue.Empty:
            break
    running = client.execute(SEND, allow_stdin=True)  # a front end a person is using
    stop_id = None
    hints: list[str] = []
    clicked = False
    pane_messages = 0
    while True:
        msg = client.get_iopub_msg(timeout=120)
        kind, content = msg["msg_type"], msg["content"]
        if kind == "comm_open":
            state = content.get("data", {}).get("state", {})
            if state.get("_model_name") == "ButtonModel" and state.get("description") == "Stop":
                stop_id = content["comm_id"]
        if kind in ("comm_open", "comm_msg"):
            hints.append(str(content.get("data", {})))
        if kind == "comm_msg" and content.get("data", {}).get("method") == "custom":
            pane_messages += 1  # the live pane's blocks and text
        if stop_id is not None and not clicked and pane_messages >= 3:  # text has arrived
            click = client.session.msg(
                "comm_msg",
                {"comm_id": stop_id, "data": {"method": "custom", "content": {"event": "click"}}},
            )
            if subshell is not None:
                click["header"]["subshell_id"] = subshell
            client.shell_channel.send(click)
            clicked = True
        if (
            kind == "status"
            and content["execution_state"] == "idle"
            and msg["parent_header"].get("msg_id") == running
        ):
            break
    assert stop_id is not None, "no Stop button was shown"
    assert clicked, "the answer never streamed"
    assert not any("interrupt the kernel" in h for h in hints), "Stop was replaced by a hint"
    assert _value(client, "r.finish.kind") == "aborted"
    assert _value(client, "r.error.code") == "ABORTED"
    assert _value(client, "len(r.text) > 0") == "True"  # what arrived is kept
