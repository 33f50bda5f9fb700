"""Run the mock LLM server in the foreground: ``python -m notebook_llm.adapters.mock [--port N]``."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence

from notebook_llm.adapters.mock.faults import FAULT_HEADER, FAULTS
from notebook_llm.adapters.mock.models import MODELS
from notebook_llm.adapters.mock.server import MockServer


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, serve until Ctrl-C, return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m notebook_llm.adapters.mock",
        description="Offline mock LLM server (loopback).",
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind (0 = any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each response")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between chunks")
    parser.add_argument("--require-key", default=None, help="API key clients must send")
    args = parser.parse_args(argv)

    srv = MockServer(
        args.port,
        host=args.host,
        latency=args.latency,
        chunk_delay=args.chunk_delay,
        require_key=args.require_key,
    ).start()
    auth = f" -H 'Authorization: Bearer {args.require_key}'" if args.require_key else ""
    print(f"notebook_llm mock server listening on {srv.url}")
    print("models: " + ", ".join(MODELS))
    print(f"faults (header {FAULT_HEADER}: name; key=value): " + ", ".join(FAULTS))
    print("try:")
    print(
        f"  curl -N {srv.url}/v1/chat/completions{auth} -H 'Content-Type: application/json' "
        """-d '{"model":"echo","stream":true,"messages":[{"role":"user","content":"Hello there"}]}'"""
    )
    print("press Ctrl-C to stop", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        print("\nstopping")
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
