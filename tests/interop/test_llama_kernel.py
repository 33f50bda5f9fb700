"""``%%llm local`` in a real IPython kernel, driven with ``jupyter_client``, against llama.cpp.

The kernel gets provider ``local`` from a ``config.toml`` (adapter ``openai`` + the server's
``base_url``), as a user would write it. What the kernel sends on iopub is what a front end
would get: the final answer (``display_data``), the live view's widget state (``comm_msg``)
and any stream text; nothing here needs a browser.
"""

from __future__ import annotations

import os
import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

from .conftest import LlamaServer

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]
STORY = "Once upon a time, in a small village by the sea, there lived"


class Kernel:
    def __init__(self, manager: KernelManager, client: BlockingKernelClient) -> None:
        self.manager = manager
        self.client = client

    def run(self, code: str, timeout: float = 120.0) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Execute ``code``; return its iopub messages and its execute reply."""
        msg_id = self.client.execute(code)
        return self.collect(msg_id, timeout)

    def collect(
        self, msg_id: str, timeout: float = 120.0
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return self.until_idle(msg_id, timeout), self.reply(msg_id, timeout)

    def reply(self, msg_id: str, timeout: float = 120.0) -> dict[str, Any]:
        """The shell reply to ``msg_id`` (earlier replies, e.g. to kernel_info, are skipped)."""
        while True:
            reply = self.client.get_shell_msg(timeout=timeout)
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply

    def until_idle(self, msg_id: str, timeout: float = 120.0) -> list[dict[str, Any]]:
        """The iopub messages of ``msg_id`` up to its idle status."""
        messages: list[dict[str, Any]] = []
        while True:
            msg = self.client.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            messages.append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return messages


def finals(messages: list[dict[str, Any]]) -> list[str]:
    """The static displays that replace a live view in place when its stream ends."""
    return [
        m["content"]["data"]["text/plain"]
        for m in messages
        if m["msg_type"] == "update_display_data" and "text/plain" in m["content"]["data"]
    ]


def streamed(messages: list[dict[str, Any]]) -> str:
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")


@pytest.fixture(scope="module")
def kernel(llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    home = tmp_path_factory.mktemp("kernel")
    config = home / "config.toml"
    config.write_text(
        f'[providers.local]\nadapter = "openai"\nbase_url = "{llama.base_url}"\n'
        'model = "gemma-3-270m"\n',
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        "NOTEBOOK_LLM_CONFIG": str(config),
        "NOTEBOOK_LLM_ADAPTERS_DIR": str(home / "adapters"),
    }
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(env=env, cwd=str(home))
    client = manager.blocking_client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        k = Kernel(manager, client)
        _, reply = k.run("%load_ext notebook_llm")
        assert reply["content"]["status"] == "ok"
        yield k
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_llm_cell_magic_answers_in_a_real_kernel(kernel: Kernel) -> None:
    messages, reply = kernel.run(f"%%llm local --max-tokens 8\n{STORY}")
    assert reply["content"]["status"] == "ok"
    assert "Traceback" not in streamed(messages)
    # The live view's output is replaced in place by one static display when the stream ends.
    ends = finals(messages)
    assert ends
    *answer_lines, footer = ends[-1].split("\n")
    assert "\n".join(answer_lines).strip()  # some babble, whatever it says
    assert not any("EMPTY_RESPONSE" in t or "error" in t.lower() for t in ends)
    # The server sends no usage: the footer says so, with no zeros and no cost.
    assert footer.startswith("-- local")
    assert "usage not reported" in footer
    assert "$" not in footer


def test_llm_models_lists_the_served_model(kernel: Kernel) -> None:
    messages, _ = kernel.run("%llm models local")
    assert streamed(messages).split() == ["gemma-3-270m", "owned", "by", "me"]


def test_a_kernel_interrupt_ends_the_stream_and_the_server_sees_the_close(
    kernel: Kernel, llama: LlamaServer
) -> None:
    offset = llama.log_size()
    msg_id = kernel.client.execute(f"%%llm local --max-tokens 1500\n{STORY}")
    # Wait until the answer streams: the live view's pane gets text (custom messages of ops).
    updates = 0
    deadline = time.monotonic() + 120
    while updates < 3 and time.monotonic() < deadline:
        try:
            msg = kernel.client.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if (
            msg["msg_type"] == "comm_msg"
            and msg["parent_header"].get("msg_id") == msg_id
            and msg["content"]["data"].get("method") == "custom"
            and any(isinstance(op[0], int) for op in msg["content"]["data"]["content"])
        ):
            updates += 1
    assert updates >= 3, llama.log_since(offset)[-2000:]
    kernel.manager.interrupt_kernel()
    # The interrupt ends the stream: the server sees the client go and the answer is marked
    # [stopped] below (how soon is the machine's load's to say, not a verdict here).
    reply = kernel.reply(msg_id, timeout=120)
    assert llama.wait_for_log("Disconnected from client", offset), llama.log_since(offset)[-2000:]
    messages = kernel.until_idle(msg_id)
    assert reply["content"]["status"] == "ok"  # the magic handles the interrupt: no traceback
    assert "Traceback" not in streamed(messages)
    assert any("[stopped]" in t.split("\n") for t in finals(messages))
