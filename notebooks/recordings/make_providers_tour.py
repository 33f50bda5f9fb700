"""Rebuild ``providers_tour.jsonl``: one recorded exchange per built-in provider, offline.

Each provider's request is made for real by its adapter (so the recording holds exactly the
request body the notebook sends) and answered with a real response body recorded from that
provider's API, taken from ``tests/fixtures/wire/`` (see its SOURCES.md). The recorder then
writes the exchange as ``%llm record`` would: no key, no auth header.

    python notebooks/recordings/make_providers_tour.py
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx

from notebook_llm import Engine
from notebook_llm.api.recording import REPLAY_KEY, Recorder

HERE = Path(__file__).resolve().parent
WIRE = HERE.parents[1] / "tests" / "fixtures" / "wire"

#: provider -> (prompt used in the notebook, recorded body answering it)
TOUR = {
    "openai": ("Count from 1 to 5.", "openai/stream_text_include_usage.sse"),
    "anthropic": ("Say hello, in one word.", "anthropic/stream_text.sse"),
    "gemini": ("What is the capital of France?", "gemini/stream_text.sse"),
    "mistral": ("What is 1 + 1? Just the number.", "mistral/stream_text.sse"),
    "deepseek": ("Think first, then answer: what is 1 + 1?", "deepseek/stream_reasoning.sse"),
    # vercel/ai's Groq text stream answers its examples' prompt (examples/ai-core: groq.ts). The
    # reasoning stream once used here ends a tool-calling conversation the notebook never had.
    "groq": ("Invent a new holiday and describe its traditions.", "groq/stream_text.sse"),
    # GitHub Models speaks the OpenAI format; no GitHub recording is public, so the OpenAI one.
    "github": ("Count from 1 to 5.", "openai/stream_text_include_usage.sse"),
    "ollama": ("Count from 1 to 5, with a short intro.", "ollama/stream_text.ndjson"),
}

CONTENT_TYPES = {
    ".sse": "text/event-stream; charset=utf-8",
    ".ndjson": "application/x-ndjson",
    ".json": "application/json",
}


async def main() -> None:
    out = HERE / "providers_tour.jsonl"
    recorder = Recorder(out)
    engine = Engine(config_file=False, env_file=False, retries=0)
    for provider, (prompt, fixture) in TOUR.items():
        path = WIRE / fixture
        body = path.read_bytes()
        headers = {"content-type": CONTENT_TYPES[path.suffix]}

        def answer(request: httpx.Request, body: bytes = body) -> httpx.Response:
            return httpx.Response(200, headers=headers, content=body)

        config = engine.provider(provider)
        if config.api_key_env:
            os.environ.setdefault(config.api_key_env, REPLAY_KEY)
        adapter = engine.adapter(config.adapter)
        adapter.transport = recorder.transport(httpx.MockTransport(answer))  # type: ignore[attr-defined]
        done = await engine.complete(provider, prompt=prompt)
        adapter.transport = None  # type: ignore[attr-defined]
        print(f"{provider:10} {done.text[:70]!r}")
    print(f"wrote {len(recorder.exchanges)} exchanges to {out}")


if __name__ == "__main__":
    asyncio.run(main())
