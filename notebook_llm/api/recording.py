"""Record the HTTP exchanges of a notebook run, and replay them later with no key and no network.

Run a notebook once against a live provider while recording, then replay it in CI, on Binder or
in a class: the adapters, the event mapping and the live view all run as usual, only the bytes
come from the file.

>>> from notebook_llm import record
>>> with record.record("run.jsonl"):          # doctest: +SKIP
...     engine.complete_sync("openai", prompt="hi")
>>> with record.replay("run.jsonl"):          # doctest: +SKIP
...     engine.complete_sync("openai", prompt="hi")   # same answer, no key, no network

Recording and replay belong to one engine, httpx-style: ``engine.recording(path)`` and
``engine.replaying(path)`` route that engine's requests through a
:class:`~notebook_llm.wire.tap.Recorder` or :class:`~notebook_llm.wire.tap.Replayer`, so every
Lua adapter without its own transport (all built-in providers, the ``mock`` provider, adapters
loaded in a cell) goes through it, and other engines are untouched. The functions here act on
the session engine (:func:`notebook_llm.engine.session.default_engine`, or ``engine=``):
:func:`record` / :func:`replay` as ``with`` blocks, and :func:`start_recording`,
:func:`start_replay` and :func:`stop` without one (that is what ``%llm record PATH``,
``%llm replay PATH`` and ``%llm record stop`` call, through :func:`magic_command`). No module
global and no environment variable changes.

Where the parts live: the file format (:mod:`notebook_llm.wire.cassette`), the recording and
replaying transports (:mod:`notebook_llm.wire.tap`), and this session API.

The file
    JSON lines (a ``.json`` path gives one JSON array instead): a header line, then one object per
    exchange: ``method``, ``url``, ``path``, ``request`` (the JSON body, or ``request_text``),
    ``status``, ``headers`` (response headers), ``body`` (the whole response body as text, a
    stream recorded whole; ``body_base64`` if it is not UTF-8) and ``complete`` (``false`` when the
    reader stopped early, e.g. the Stop button). Lines are appended as each exchange ends.

What is never written
    No request header is recorded at all (so no ``Authorization``, ``x-api-key``, ...). The values
    of credential headers seen while recording are registered as secrets
    (:func:`notebook_llm.core.redaction.register_secret`), and every string written (URL, request body,
    response headers and body) goes through :func:`notebook_llm.core.redaction.redact`, which hides all
    known keys, bearer tokens and ``key=``-style query parameters (Gemini's ``?key=``). Response
    headers that carry credentials or cookies (``set-cookie``, ...) and organisation ids are
    dropped. (One limit: a key that a *model* echoes back split over several stream chunks is
    not recognised in the raw stream body; providers do not echo keys, and error bodies, which
    sometimes do, arrive whole.)

Replay
    Each request is answered by the first unused recording with the same method, URL path,
    query string and request body (compared after the same redaction, so a key in the URL does
    not matter; the query as sorted name/value pairs, so their order does not either; the host
    and port are not compared, so a loopback server's new port does not; key order and
    whitespace around strings are ignored). With ``strict=False`` (the default) a request whose
    recordings were all used gets the last of them again, so re-running a cell works; with
    ``strict=True`` each recording answers once. A request with no recording fails with
    ``LlmError`` code ``REPLAY_MISS`` (the stream ends with that error; nothing is sent to the
    network). A recorded stream is sent back line by line (optionally with ``chunk_delay``
    seconds between pieces) so the live view streams as it did.

Keys in replay mode
    Providers that need a key (``OPENAI_API_KEY``, ...) run without one: the engine knows it is
    replaying and skips the key check, handing the adapter the placeholder :data:`REPLAY_KEY`
    (registered as a secret, so it never shows). ``os.environ`` is not touched. A real key that
    is set is never sent anywhere: the replay transport has no network.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from ..engine.engine import Engine
from ..engine.session import default_engine
from ..wire.cassette import REPLAY_KEY, REPLAY_MISS, Exchange, load_exchanges
from ..wire.tap import Recorder, Replayer

__all__ = [
    "REPLAY_KEY",
    "REPLAY_MISS",
    "Exchange",
    "Recorder",
    "Replayer",
    "load_exchanges",
    "magic_command",
    "record",
    "replay",
    "start_recording",
    "start_replay",
    "status",
    "stop",
]


def _engine(engine: Engine | None) -> Engine:
    return engine if engine is not None else default_engine()


def start_recording(path: str | Path, *, engine: Engine | None = None) -> Recorder:
    """Record every exchange of the session engine (or ``engine``) to ``path`` (overwritten)
    until :func:`stop`; a recording or replay already running on it ends."""
    recorder = Recorder(path)
    _engine(engine).set_tap(recorder)
    return recorder


def start_replay(
    path: str | Path,
    *,
    strict: bool = False,
    chunk_delay: float = 0.0,
    engine: Engine | None = None,
) -> Replayer:
    """Answer every request of the session engine (or ``engine``) from ``path`` until
    :func:`stop`: no key, no network."""
    replayer = Replayer(path, strict=strict, chunk_delay=chunk_delay)
    _engine(engine).set_tap(replayer)
    return replayer


def _summary(tap: Recorder | Replayer) -> str:
    if isinstance(tap, Recorder):
        n = len(tap.exchanges)
        return f"recorded {n} exchange{'s' if n != 1 else ''} to {tap.path}"
    return "stopped " + tap.describe()


def _ended(tap: Recorder | Replayer | None) -> str:
    return _summary(tap) if tap is not None else ""


def stop(*, engine: Engine | None = None) -> str:
    """End the recording or replay of the session engine (or ``engine``).

    Returns a one-line summary (empty when nothing was active)."""
    return _ended(_engine(engine).set_tap(None))


def status(*, engine: Engine | None = None) -> str:
    """What is active: ``recording to ...``, ``replaying ...`` or ``not recording or replaying``."""
    tap = _engine(engine).tap
    return tap.describe() if tap is not None else "not recording or replaying"


def active(*, engine: Engine | None = None) -> Recorder | Replayer | None:
    """The active :class:`Recorder` or :class:`Replayer` of the session engine, if any."""
    return _engine(engine).tap


@contextlib.contextmanager
def record(path: str | Path, *, engine: Engine | None = None) -> Iterator[Recorder]:
    """``with record(path):`` records the exchanges the session engine makes inside the block."""
    with _engine(engine).recording(path) as recorder:
        yield recorder


@contextlib.contextmanager
def replay(
    path: str | Path,
    *,
    strict: bool = False,
    chunk_delay: float = 0.0,
    engine: Engine | None = None,
) -> Iterator[Replayer]:
    """``with replay(path):`` answers the session engine's requests inside the block from
    ``path``."""
    with _engine(engine).replaying(path, strict=strict, chunk_delay=chunk_delay) as replayer:
        yield replayer


def magic_command(args: list[str] | str, *, engine: Engine | None = None) -> str:
    """What ``%llm record ...`` / ``%llm replay ...`` do; returns the line to print.

    ``record PATH`` | ``record stop`` | ``replay PATH [--strict]`` | ``replay stop`` | ``stop`` |
    ``record`` / ``replay`` (status). Raises ``ValueError`` with a usage line for anything else.
    """
    eng = _engine(engine)
    words = args.split() if isinstance(args, str) else list(args)
    usage = "usage: %llm record PATH | %llm replay PATH [--strict] | %llm record stop"
    if not words:
        raise ValueError(usage)
    command, rest = words[0], words[1:]
    if command == "stop" or (command in ("record", "replay") and rest == ["stop"]):
        return stop(engine=eng) or "not recording or replaying"
    if command not in ("record", "replay"):
        raise ValueError(usage)
    if not rest:
        return status(engine=eng)
    strict = "--strict" in rest
    paths = [w for w in rest if w != "--strict"]
    if len(paths) != 1 or (strict and command == "record"):
        raise ValueError(usage)
    previous = eng.tap
    # The new file is read (replay) or created (record) before the old session ends, so a bad
    # path leaves it running; ending one is always said, never done silently.
    if command == "record":
        recorder = Recorder(paths[0])
        ended = _ended(eng.set_tap(recorder))
        line = f"recording provider exchanges to {recorder.path} (no keys are written); stop with %llm record stop"
        if isinstance(previous, Recorder):
            return f"switched recording: {ended}; now {line}"
        return f"ended the replay ({ended}); {line}" if ended else line
    replayer = Replayer(paths[0], strict=strict)
    ended = _ended(eng.set_tap(replayer))
    line = (
        f"replaying {len(replayer.exchanges)} recorded exchanges from {replayer.path} "
        "(no key or network needed); stop with %llm replay stop"
    )
    if ended:
        what = "the recording" if isinstance(previous, Recorder) else "the previous replay"
        line = f"ended {what} ({ended}); {line}"
    return "\n".join([line, *(f"warning: {w}" for w in replayer.warnings)])
