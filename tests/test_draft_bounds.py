"""The drafter's work and memory are bounded by its input's size, whatever the body's shape.

Bodies built to make a naive drafter blow up: many distinct call-like objects (every pair of
paths compared), huge arrays deep inside (a copy of the path per element), very many distinct
keys, long strings, a key that echoes a secret. Each runs in a child process with a generous
wall-clock limit (a hang fails the test instead of hanging the suite) and reports the peak of
the memory Python allocated while drafting (``tracemalloc``), which must stay within a bound no
naive walk keeps; no verdict depends on speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from notebook_llm.conformance.draft import draft_adapter
from notebook_llm.core.redaction import register_secret

ROOT = Path(__file__).resolve().parent.parent

#: Seconds a child may run: a hundred times what the bounded drafter needs (under a second).
WALL = 60
#: Peak memory drafting may allocate (MiB): json.loads of the body itself takes some; a walk
#: that copied a path per element took over a gigabyte for the 3.8 MiB body.
MEMORY_MIB = 150


def _calls_object(n: int) -> bytes:
    """One JSON body: an object of ``n`` keys, each a call-like object (distinct paths)."""
    return json.dumps(
        {f"k{i}": {"name": f"f{i}", "arguments": {"x": i}, "text": "a b"} for i in range(n)}
    ).encode()


def _calls_stream(n: int) -> bytes:
    """NDJSON of ``n`` payloads, each a call-like object under its own key."""
    return b"".join(
        json.dumps({f"tool{i}": {"name": "lookup", "args": {"q": i}}, "t": "x y"}).encode() + b"\n"
        for i in range(n)
    )


def _deep_array(depth: int, size: int) -> bytes:
    """A long array of small integers, ``depth`` objects down (a path copied per element)."""
    inner = "[" + ",".join("1" for _ in range(size)) + "]"
    return (
        '{"text": "hello there", ' + '"a": {' * depth + f'"xs": {inner}' + "}" * depth + "}"
    ).encode()


def _wide_strings(n: int) -> bytes:
    """One payload with ``n`` distinct string keys of prose (every one a text candidate)."""
    return json.dumps({f"field_{i}": f"word {i} and more words" for i in range(n)}).encode()


BODIES = {
    "20,000 call-like objects in one body (distinct paths)": (_calls_object, 20_000),
    "20,000 payloads of call-like objects (distinct paths)": (_calls_stream, 20_000),
    "a 3.8 MiB array 60 objects deep": (_deep_array, (60, 1_900_000)),
    "60,000 distinct prose keys": (_wide_strings, 60_000),
}

CHILD = textwrap.dedent(
    """
    import json, sys, tracemalloc
    from pathlib import Path
    from notebook_llm.conformance.draft import draft_adapter
    from notebook_llm.core.errors import LlmError
    body = Path({path!r}).read_bytes()
    tracemalloc.start()
    try:
        draft = draft_adapter(body, "bounded", check=False)
        outcome = "drafted " + str(len(draft.source.splitlines())) + " lines"
    except LlmError as err:
        outcome = "error " + err.code + ": " + err.message
    peak = tracemalloc.get_traced_memory()[1]
    print(json.dumps({{"size": len(body), "outcome": outcome, "added_mib": peak / 2**20}}))
    """
)


@pytest.mark.parametrize("name", list(BODIES))
def test_a_hostile_body_drafts_in_bounded_time_and_memory(name: str, tmp_path: Path) -> None:
    make, arg = BODIES[name]
    path = tmp_path / "body"
    path.write_bytes(make(*arg) if isinstance(arg, tuple) else make(arg))
    code = CHILD.format(path=str(path))
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=WALL,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"\n{name}: {report}")
    assert report["outcome"].startswith(("drafted", "error")), report
    assert "Traceback" not in proc.stderr
    assert report["added_mib"] < MEMORY_MIB, report


def test_a_body_too_large_to_read_in_full_says_so_in_the_report() -> None:
    draft = draft_adapter(_deep_array(3, 400_000), "big", check=False)
    assert any("read its first" in n for n in draft.inference.notes), draft.inference.notes
    assert draft.inference.text is not None
    assert draft.inference.text.text == "hello there"


def test_b_a_key_a_body_echoes_reaches_no_literal_or_comment_of_the_draft() -> None:
    secret = "sk-live-DRAFTLEAK-4c1d9e"
    register_secret(secret)
    lines = [
        {"text": "Hello ", "type": secret, "event": "x"},
        {"text": "there.", "type": secret, "event": "y"},
        {"done": True, "status": secret, "reason": f"{secret}_stop", secret: "value"},
    ]
    body = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    draft = draft_adapter(body, "echo")
    escaped = "".join(f"\\{b:03d}" if not 32 <= b < 127 else chr(b) for b in secret.encode())
    for shown in (draft.source, draft.summary(), "\n".join(draft.todos)):
        assert "DRAFTLEAK" not in shown
        assert escaped not in shown
    # an end event named by the secret, a finish value holding it: both redacted in the source
    sse_body = b"".join(
        b"data: " + json.dumps(x).encode() + b"\n\n"
        for x in [
            {"type": "delta", "text": "Hi "},
            {"type": "delta", "text": "you."},
            {"type": f"end.{secret}"},
        ]
    )
    draft = draft_adapter(sse_body, "echo2", check=False)
    assert "DRAFTLEAK" not in draft.source


def test_b_lone_surrogates_in_keys_and_values_draft_safely() -> None:
    # JSON may escape a lone surrogate; the redaction's engine cannot encode one
    body = (
        b'{"te\\ud800xt": "hello there \\udc00 friend", "stop\\ud800": "end\\udfff"}\n'
        b'{"te\\ud800xt": " and more words", "done": true}\n'
    )
    draft = draft_adapter(body, "lone")
    assert draft.check is not None
    assert draft.check.completion.text.startswith("hello there")
    assert all(ch == "\n" or 32 <= ord(ch) < 127 for ch in draft.source)
    assert draft.summary()
