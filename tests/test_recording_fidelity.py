"""Nothing is lost on the way to a file or a table: a recording is redacted value by value, so
every recording replays (answers full of URLs with ``?key=``, quotes and backslash escapes); a
``.json`` recording grows in place instead of being rewritten; a typed ``map`` fills the
columns of a pydantic model that uses aliases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from notebook_llm import Engine
from notebook_llm.core.redaction import register_secret
from notebook_llm.wire.cassette import load_exchanges, redact_body
from notebook_llm.wire.tap import Recorder, Replayer

#: Answers a model that shows code calling an API writes: quoted URLs with keys, backslashes,
#: escaped quotes, a key the process knows, unicode line separators.
NASTY = [
    'curl "https://api.example.com/v1/items?key=abc123&page=2" -H "X: \\"y\\""',
    "path C:\\\\Users\\\\me\\\\file.txt and a tab\\t and ?access_token=tok\\\\en",
    'json: {"url": "https://s3.amazonaws.com/b/o?X-Amz-Signature=deadbeef&X-Amz-Credential=AK"}',
    "a known key sk-fidelity-0123456789 inside \\u2028 a line\u2028separator",
    'https://user:p4ss@example.com/x?sig=abc "quoted" \\\\" end',
]
SECRET = "sk-fidelity-0123456789"


def _sse(texts: list[str]) -> bytes:
    out = []
    for text in texts:
        chunk = {"choices": [{"index": 0, "delta": {"content": text}}]}
        out.append(f"data: {json.dumps(chunk)}\n\n")
    done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    out.append(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n")
    return "".join(out).encode()


async def _through(transport: httpx.AsyncBaseTransport, body: dict[str, Any]) -> bytes:
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.post("https://api.example.com/v1/chat/completions", json=body)
        return await response.aread()


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
async def test_a_stream_full_of_urls_quotes_and_escapes_records_and_replays(
    tmp_path: Path, suffix: str
) -> None:
    register_secret(SECRET)
    served = _sse(NASTY)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=served, headers={"content-type": "text/event-stream"})

    path = tmp_path / f"rec{suffix}"
    request = {"model": "m", "messages": [{"role": "user", "content": "show me"}], "stream": True}
    recorder = Recorder(path)
    await _through(recorder.transport(httpx.MockTransport(handler)), request)
    replayed = await _through(Replayer(path, strict=True).transport(), request)
    payloads = [
        json.loads(line[6:])
        for line in replayed.decode().split("\n")
        if line.startswith("data: ") and line != "data: [DONE]"
    ]  # every payload is still JSON
    texts = [p["choices"][0]["delta"].get("content", "") for p in payloads]
    assert len(texts) == len(NASTY) + 1
    text = "".join(texts)
    for kept in ('-H "X: \\"y\\""', "C:\\\\Users", "\u2028", "page=2", '"quoted" \\\\" end'):
        assert kept in text, kept
    for hidden in ("abc123", "tok\\\\en", "deadbeef", SECRET, "p4ss", "sig=abc"):
        assert hidden not in text, hidden
        assert hidden not in path.read_text(encoding="utf-8"), hidden


def test_a_body_with_nothing_to_hide_is_recorded_byte_for_byte() -> None:
    body = b'{"a": 1.0e5,  "b": "\\u00e9\\/x"}\n'
    assert redact_body(body) == body
    stream = b'event: x\r\ndata: {"t":"\\u00e9"}\r\n\r\n: comment\n'
    assert redact_body(stream) == stream


def test_redaction_keeps_every_json_document_json() -> None:
    register_secret(SECRET)
    doc = json.dumps({"text": f'see "https://x.io/?token={SECRET}\\"" \\\\ done', "n": [1, 2]})
    for body in (doc, f"data: {doc}\n\n", f"{doc}\n{doc}\n", f"data:{doc}\r\n\r\n"):
        out = redact_body(body.encode()).decode()
        assert SECRET not in out
        for line in out.replace("\r", "").split("\n"):
            if line.strip():
                json.loads(line.removeprefix("data:"))


def test_a_json_recording_grows_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """400 exchanges: the bytes written stay proportional to the file (rewriting it whole after
    every exchange wrote ~200 times its size), and the file is one JSON array all along."""
    written = [0]
    real_open, real_write_text = Path.open, Path.write_text

    class Counting:
        def __init__(self, fh: Any) -> None:
            self.fh = fh

        def write(self, data: Any) -> int:
            written[0] += len(data)
            result: int = self.fh.write(data)
            return result

        def __getattr__(self, name: str) -> Any:
            return getattr(self.fh, name)

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *exc: object) -> None:
            self.fh.close()

    def counting_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        return Counting(real_open(self, *args, **kwargs))

    def counting_write_text(self: Path, data: str, *args: Any, **kwargs: Any) -> int:
        written[0] += len(data)
        return real_write_text(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, "open", counting_open)
    monkeypatch.setattr(Path, "write_text", counting_write_text)
    path = tmp_path / "big.json"
    engine = Engine(config_file=False, env_file=False)
    with engine.recording(path):
        for i in range(400):
            engine.complete_sync("mock", "echo", prompt=f"answer number {i} " + "x" * 200)
            if i in (0, 1, 57):
                assert len(json.loads(path.read_text(encoding="utf-8"))) == i + 1
    monkeypatch.undo()
    size = path.stat().st_size
    assert len(load_exchanges(path)) == 400
    assert written[0] <= 2 * size


def test_an_old_json_recording_still_replays(tmp_path: Path) -> None:
    """A ``.json`` recording written whole (the earlier format) reads as before."""
    path = tmp_path / "old.json"
    exchange = {
        "method": "POST",
        "url": "https://api.example.com/v1/chat/completions",
        "path": "/v1/chat/completions",
        "request": {"a": 1},
        "status": 200,
        "headers": {"content-type": "application/json"},
        "body": '{"ok": true}',
        "complete": True,
    }
    path.write_text(json.dumps([exchange], indent=1) + "\n", encoding="utf-8")
    assert load_exchanges(path)[0].body == b'{"ok": true}'


# ------------------------------------------------------------------ typed map with aliases


def test_a_typed_map_fills_the_columns_of_a_model_with_aliases() -> None:
    pydantic = pytest.importorskip("pydantic")
    pytest.importorskip("pandas")
    from pydantic.alias_generators import to_camel

    from notebook_llm.api.batch import map_prompts

    class Person(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(alias_generator=to_camel, populate_by_name=True)
        first_name: str
        last: str = pydantic.Field(alias="surname")
        note: str = pydantic.Field(exclude=True)
        age: int = pydantic.Field(validation_alias="years")

    import pandas as pd

    frame = pd.DataFrame({"text": ["Ada Lovelace, 36", "Alan Turing, 41"]})
    out = map_prompts(frame, template="{text}", schema=Person, progress=False)
    assert list(out.columns) == ["firstName", "surname", "note", "years", "error"]
    assert out["error"].isna().all(), out["error"].tolist()
    for column in ("firstName", "surname", "note", "years"):
        assert out[column].notna().all(), column
