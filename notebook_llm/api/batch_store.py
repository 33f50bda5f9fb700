"""A batch's journal on disk: every finished row written as it arrives, so a crash, a closed
laptop or a Stop loses nothing that was paid for, and the same call run again sends only what
is missing.

Why SQLite (the standard library's ``sqlite3``) in WAL mode: it is an embedded database that
survives the death of the process writing it (a transaction is either in the file or not; a
half-written one is rolled back when the file is next opened), WAL lets a reader (the notebook
looking at rows while the batch runs, another process, the ``sqlite3`` shell) read while the
batch writes, several processes may write one file (a Dask cluster's workers on one machine),
and every language and tool reads it without this package. ``synchronous=NORMAL``: a commit
is safe against the death of the process (what a kernel crash is); only a power cut may lose
the last commits, which are then sent again. Each finished row is written as it arrives; the
writes are committed in groups (at most 64 rows or 50 ms, :attr:`BatchStore.commit_rows`),
since a commit takes file locks and a write, system calls that cost more than the row itself.
A process killed between two commits loses those rows' answers (they are sent again), never a
committed row and never the file.

SCHEMA (format 1; the tables are documented for readers in ``docs/batch.md``)::

    batch  -- one row: what this journal is for
      id           INTEGER PRIMARY KEY CHECK (id = 1)
      format       INTEGER  -- this layout's version (FORMAT)
      fingerprint  TEXT     -- sha256 of `definition`: a store answers one batch definition
      definition   TEXT     -- JSON: template, provider, model, options (never a key)
      created      REAL     -- unix time
      package      TEXT     -- notebook_llm version that created it

    rows   -- one row per input row that has a result; a row without one is not here
      part         INTEGER  -- partition (0; a Dask partition's number)
      pos          INTEGER  -- position in the partition's input, from 0
      key          TEXT     -- row_key(): filled prompt + provider + model + options
      status       TEXT     -- 'done' or 'failed'
      prompt       TEXT     -- the filled prompt (a message list as JSON)
      answer       TEXT     -- the answer's text ('done')
      fields       TEXT     -- JSON object of a typed answer's top-level fields (schema=)
      completion   TEXT     -- JSON: blocks, usage, finish (the reference shape)
      error_code   TEXT     -- a stable ErrorCode ('failed', or a typed answer not parsed)
      error        TEXT     -- "CODE: message" as map's error column shows it
      input_tokens INTEGER, output_tokens INTEGER
      cost         REAL     -- US dollars spent on this row, all its attempts, all runs
      attempts     INTEGER  -- how many runs sent it
      finished     REAL     -- unix time of the last result
      PRIMARY KEY (part, pos)

    The cost spent by the whole batch is ``SELECT total(cost) FROM rows``: a cost cap
    (``max_cost``) counts it across restarts.

Other modules keep their own tables in the same file (the providers' Batch APIs: batch ids,
per-row state, output files): :meth:`BatchStore.ensure_tables` creates them,
:meth:`BatchStore.write` gives one transaction, :meth:`BatchStore.record` writes a row's result
the same way ``map`` does, :func:`row_key` is the row key. Name such tables with their own
prefix (``batch_api_...``); ``batch`` and ``rows`` are this module's.

A row is matched by its position and its key: a row whose key at that position differs (its
prompt, the template, the model or an option changed) is sent again. A store made for another
batch definition is refused in one line (``STORE_MISMATCH``) unless the caller asks to send the
changed rows (``resend_changed=True``). A file that is not a store, or a damaged one, is
reported (``STORE_CORRUPT``) and never overwritten; a path that cannot be written is
``STORE_UNAVAILABLE``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.completion import Completion
from ..core.errors import ErrorCode, LlmError
from ..core.protocol import FinishReason, Message, TokenUsage, block_from_json
from ..core.redaction import redact
from ..wire.cassette import redact_body

__all__ = [
    "FORMAT",
    "SCHEMA",
    "BatchStore",
    "RowResult",
    "StoredRow",
    "batch_definition",
    "row_key",
]

#: The journal layout's version (``batch.format``).
FORMAT = 1

#: The statements that create this module's tables (the module docstring describes them).
SCHEMA = """
CREATE TABLE IF NOT EXISTS batch (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  format INTEGER NOT NULL,
  fingerprint TEXT NOT NULL,
  definition TEXT NOT NULL,
  created REAL NOT NULL,
  package TEXT
);
CREATE TABLE IF NOT EXISTS rows (
  part INTEGER NOT NULL,
  pos INTEGER NOT NULL,
  key TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('done', 'failed')),
  prompt TEXT,
  answer TEXT,
  fields TEXT,
  completion TEXT,
  error_code TEXT,
  error TEXT,
  input_tokens INTEGER,
  output_tokens INTEGER,
  cost REAL NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 1,
  finished REAL NOT NULL,
  PRIMARY KEY (part, pos)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rows_status ON rows (status);
"""

_UPSERT = """
INSERT INTO rows (part, pos, key, status, prompt, answer, fields, completion, error_code, error,
                  input_tokens, output_tokens, cost, attempts, finished)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)
ON CONFLICT (part, pos) DO UPDATE SET
  key = excluded.key, status = excluded.status, prompt = excluded.prompt,
  answer = excluded.answer, fields = excluded.fields, completion = excluded.completion,
  error_code = excluded.error_code, error = excluded.error,
  input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
  cost = rows.cost + excluded.cost, attempts = rows.attempts + 1, finished = excluded.finished
"""

_SQLITE_MAGIC = b"SQLite format 3\x00"


# ---------------------------------------------------------------------------------- row keys


def _stable(value: Any) -> Any:
    """A JSON-ready stand-in for a value in a request option (bytes and images by digest)."""
    if isinstance(value, bytes | bytearray):
        return {"sha256": hashlib.sha256(value).hexdigest()}
    if isinstance(value, Path):
        return str(value)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    tobytes = getattr(value, "tobytes", None)  # a PIL image
    if callable(tobytes):
        return {"sha256": hashlib.sha256(tobytes()).hexdigest()}
    return f"<{type(value).__name__}>"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=_stable)


def batch_definition(
    template: str | None, provider: str, model: str | None, options: Mapping[str, Any]
) -> dict[str, Any]:
    """What decides every row's answer beside its prompt: the template, provider, model and the
    request options (``options``: the request's fields that change an answer, as JSON-ready
    values; see :func:`notebook_llm.api.batch.answer_options`)."""
    return {"template": template, "provider": provider, "model": model, "options": options}


def _digest(definition: Mapping[str, Any]) -> bytes:
    return hashlib.sha256(_canonical(definition).encode("utf-8")).digest()


def row_key(prompt: Any, definition: Mapping[str, Any] | bytes) -> str:
    """A row's key: a digest of its filled prompt (text, a message or a message list) and of
    what decides its answer (a :func:`batch_definition`, or the digest of one from
    :meth:`BatchStore.definition_digest`, which is faster for many rows). 32 hex characters."""
    base = definition if isinstance(definition, bytes) else _digest(definition)
    h = hashlib.sha256(base)
    h.update(prompt_text(prompt).encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


def prompt_text(prompt: Any) -> str:
    """The prompt as the journal keeps it: text as it is, a message or a list as JSON."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Message):
        return _canonical([prompt.to_dict()])
    if isinstance(prompt, Sequence) and all(isinstance(m, Message) for m in prompt):
        return _canonical([m.to_dict() for m in prompt])
    return str(prompt)


# ---------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class RowResult:
    """One row's result as the journal keeps it (see the module docstring's columns)."""

    status: str  # 'done' | 'failed'
    answer: str | None = None
    fields: str | None = None
    completion: str | None = None
    error_code: str | None = None
    error: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float = 0.0


@dataclass(frozen=True)
class StoredRow:
    """A row read back from the journal."""

    part: int
    pos: int
    key: str
    status: str
    answer: str | None
    fields: str | None
    completion: str | None
    error_code: str | None
    error: str | None
    cost: float

    def result(self) -> Completion | LlmError:
        """The row as ``map`` returns it in a list: a ``Completion`` (blocks, usage, finish;
        ``parsed`` holds the typed fields as a dict) or the ``LlmError`` it failed with."""
        if self.status == "failed" and self.completion is None:
            message = (self.error or "").split(": ", 1)[-1]
            return LlmError(message, self.error_code or ErrorCode.UNKNOWN)
        doc = json.loads(self.completion or "{}")
        usage = doc.get("usage")
        finish = doc.get("finish")
        out = Completion(
            blocks=[block_from_json(b) for b in doc.get("blocks", [])],
            usage=TokenUsage.from_json(usage) if usage else None,
            finish=FinishReason.from_json(finish) if finish else None,
        )
        if self.fields is not None:
            out.parsed = json.loads(self.fields)
        return out


_ROW_COLUMNS = "part, pos, key, status, answer, fields, completion, error_code, error, cost"


# ---------------------------------------------------------------------------------- the store


def _fail(code: str, path: Path, why: str) -> LlmError:
    return LlmError(f"store {path}: {why}", code)


class BatchStore:
    """One journal file (see the module docstring). Open it with :meth:`open`; one instance
    per process and event loop (sqlite3 connections are not shared across threads here)."""

    #: Called with ``"row-written"`` after each row is written into the open transaction, and
    #: with ``"before-commit"`` just before that transaction is committed: a fault-injection
    #: point for tests (a process killed there has a write in flight).
    write_hook: Callable[[str], None] | None = None
    #: A write transaction is committed once it holds this many rows...
    commit_rows = 64
    #: ...or is this many seconds old. A process killed before that loses these rows' answers
    #: (they are sent again), never a committed row and never the file.
    commit_after = 0.05

    def __init__(self, path: Path, conn: sqlite3.Connection, definition: dict[str, Any]) -> None:
        self.path = path
        self.conn = conn
        self.definition = definition
        self.definition_digest = _digest(definition)
        self._opened_at: float | None = None
        self._uncommitted = 0

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        definition: dict[str, Any],
        *,
        resend_changed: bool = False,
    ) -> BatchStore:
        """Open (or create) the journal at ``path`` for the batch ``definition``
        (:func:`batch_definition`); refuses in one line a path it cannot write, a file that is
        not a store or is damaged, and a store of another definition (unless
        ``resend_changed``: then the definition is replaced and the changed rows re-sent)."""
        where = Path(os.fspath(path)).expanduser()
        _check_existing(where)
        try:
            conn = sqlite3.connect(where, isolation_level=None, timeout=60.0)
        except sqlite3.Error as exc:
            raise _unavailable(where, exc) from None
        try:
            store = cls(where, conn, definition)
            store._prepare(resend_changed)
        except LlmError:
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            if _is_unwritable(exc):
                raise _unavailable(where, exc) from None
            raise _fail(
                ErrorCode.STORE_CORRUPT,
                where,
                f"the file is damaged or not a store ({exc}); it was left as it is: move it "
                "away or pass another store path",
            ) from None
        return store

    def _prepare(self, resend_changed: bool) -> None:
        conn = self.conn
        conn.execute("PRAGMA busy_timeout = 60000")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "batch" not in tables:
            raise _fail(
                ErrorCode.STORE_CORRUPT,
                self.path,
                f"this SQLite file is not a notebook_llm store (it has tables "
                f"{', '.join(sorted(tables)[:5])}); it was left as it is: pass another path",
            )
        if tables:
            check = conn.execute("PRAGMA quick_check(1)").fetchone()
            if not check or check[0] != "ok":
                first = " ".join(str(check[0] if check else "no answer").split())[:120]
                raise _fail(
                    ErrorCode.STORE_CORRUPT,
                    self.path,
                    f"the journal is damaged ({first}); it was "
                    "left as it is: copy out what `sqlite3 FILE .recover` finds, or pass "
                    "another store path",
                )
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        conn.execute("PRAGMA synchronous = NORMAL")
        if mode is None or str(mode[0]).lower() != "wal":
            # A network file system may refuse WAL; the journal still works (one writer).
            conn.execute("PRAGMA journal_mode = DELETE")
        fingerprint = self.definition_digest.hex()
        with self.write():
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            row = conn.execute(
                "SELECT format, fingerprint, definition FROM batch WHERE id = 1"
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO batch VALUES (1, ?, ?, ?, ?, ?)",
                    (FORMAT, fingerprint, _canonical(self.definition), time.time(), _version()),
                )
                return
            if row[0] != FORMAT:
                raise _fail(
                    ErrorCode.STORE_CORRUPT,
                    self.path,
                    f"journal format {row[0]} is not the {FORMAT} this version reads; it was "
                    "left as it is: open it with the version that wrote it, or pass another path",
                )
            if row[1] != fingerprint:
                if not resend_changed:
                    raise _mismatch(self.path, row[2], self.definition)
                conn.execute(
                    "UPDATE batch SET fingerprint = ?, definition = ? WHERE id = 1",
                    (fingerprint, _canonical(self.definition)),
                )

    # ------------------------------------------------------------------ for other modules

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``: other writers wait, readers do not),
        committed at the end of the block, rolled back on an exception. Rows written by
        :meth:`record` and not committed yet are committed first."""
        self.commit()
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def ensure_tables(self, ddl: str) -> None:
        """Create another module's tables (``CREATE TABLE IF NOT EXISTS ...`` statements,
        separated by ``;``) in this file, in one transaction."""
        with self.write() as conn:
            for statement in ddl.split(";"):
                if statement.strip():
                    conn.execute(statement)

    # ------------------------------------------------------------------ rows

    def record(self, part: int, pos: int, key: str, prompt: str, result: RowResult) -> None:
        """Journal one row's result: written at once into the open write transaction, which
        is committed when it holds :attr:`commit_rows` rows or is :attr:`commit_after` seconds
        old (the batch also commits on a timer, and at its end: :meth:`commit`)."""
        # the journal is a file: every text in it passes the package's redaction (a prompt
        # or an answer that holds a key keeps none; JSON texts stay JSON, their values hidden)
        values = (
            part,
            pos,
            key,
            result.status,
            _redacted(prompt),
            _redacted(result.answer),
            _redacted_json(result.fields),
            _redacted_json(result.completion),
            result.error_code,
            _redacted(result.error),
            result.input_tokens,
            result.output_tokens,
            result.cost,
            time.time(),
        )
        try:
            if self._opened_at is None:
                self.conn.execute("BEGIN IMMEDIATE")
                self._opened_at = time.monotonic()
            self.conn.execute(_UPSERT, values)
            self._uncommitted += 1
            if self.write_hook is not None:
                self.write_hook("row-written")
            if (
                self._uncommitted >= self.commit_rows
                or time.monotonic() - self._opened_at >= self.commit_after
            ):
                self.commit()
        except sqlite3.Error as exc:
            raise self._write_failed(exc) from None

    @property
    def uncommitted(self) -> int:
        """Rows written and not committed yet."""
        return self._uncommitted

    def commit(self) -> None:
        """Commit the rows written so far (a no-op when there are none)."""
        if self._opened_at is None:
            return
        try:
            if self.write_hook is not None:
                self.write_hook("before-commit")
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._write_failed(exc) from None
        finally:
            self._opened_at = None
            self._uncommitted = 0

    def _write_failed(self, exc: sqlite3.Error) -> LlmError:
        with contextlib.suppress(sqlite3.Error):
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
        self._opened_at = None
        self._uncommitted = 0
        if _is_unwritable(exc):
            return _unavailable(self.path, exc)
        return _fail(ErrorCode.STORE_CORRUPT, self.path, f"writing a row failed: {exc}")

    def known(self, part: int, lo: int, hi: int) -> dict[int, tuple[str, str]]:
        """``{pos: (key, status)}`` of the rows with a result at positions ``lo <= pos < hi``."""
        cur = self.conn.execute(
            "SELECT pos, key, status FROM rows WHERE part = ? AND pos >= ? AND pos < ?",
            (part, lo, hi),
        )
        return {pos: (key, status) for pos, key, status in cur}

    def rows(self, part: int | None = None, lo: int = 0, hi: int | None = None) -> list[StoredRow]:
        """The rows with a result, in order (one partition's, and ``lo <= pos < hi``)."""
        sql = f"SELECT {_ROW_COLUMNS} FROM rows"
        args: list[Any] = []
        if part is not None:
            sql += " WHERE part = ? AND pos >= ?"
            args += [part, lo]
            if hi is not None:
                sql += " AND pos < ?"
                args.append(hi)
        sql += " ORDER BY part, pos"
        return [StoredRow(*r) for r in self.conn.execute(sql, args)]

    def spent(self) -> float:
        """US dollars spent on this batch, in every run so far."""
        row = self.conn.execute("SELECT total(cost) FROM rows").fetchone()
        return float(row[0]) if row else 0.0

    def counts(self) -> dict[str, int]:
        """How many rows are ``done`` and ``failed``."""
        out = {"done": 0, "failed": 0}
        for status, n in self.conn.execute("SELECT status, count(*) FROM rows GROUP BY status"):
            out[str(status)] = int(n)
        return out

    def close(self) -> None:
        """Commit what is written and close the connection (the file stays)."""
        try:
            self.commit()
        finally:
            with contextlib.suppress(sqlite3.Error):
                self.conn.close()

    def __enter__(self) -> BatchStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("notebook-llm")
    except Exception:
        return "unknown"


def _check_existing(path: Path) -> None:
    """Refuse, before SQLite touches it, a path that is a folder or a file that is not SQLite
    (SQLite would say "file is not a database" only at the first query)."""
    if path.is_dir():
        raise _fail(
            ErrorCode.STORE_UNAVAILABLE, path, "it is a folder; give a file path, e.g. run.sqlite"
        )
    if not path.exists():
        if not path.parent.exists():
            raise _fail(
                ErrorCode.STORE_UNAVAILABLE,
                path,
                f"the folder {path.parent} does not exist; create it or pass another path",
            )
        return
    try:
        with path.open("rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise _fail(ErrorCode.STORE_UNAVAILABLE, path, f"cannot read it ({exc.strerror})") from None
    if head and head != _SQLITE_MAGIC:
        raise _fail(
            ErrorCode.STORE_CORRUPT,
            path,
            "the file is not a store (not SQLite); it was left as it is: pass another path",
        )


def _is_unwritable(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return any(
        s in text for s in ("readonly", "read-only", "unable to open", "disk i/o", "permission")
    )


def _unavailable(path: Path, exc: sqlite3.Error) -> LlmError:
    return _fail(
        ErrorCode.STORE_UNAVAILABLE,
        path,
        f"cannot write it ({exc}); pass a path in a folder you can write",
    )


def _mismatch(path: Path, stored: str, definition: Mapping[str, Any]) -> LlmError:
    """One line naming what differs between the store's batch and this one."""
    try:
        old = json.loads(stored)
    except ValueError:
        old = {}
    new = json.loads(_canonical(definition))
    differs = [n for n in ("template", "provider", "model", "options") if old.get(n) != new.get(n)]
    if differs and differs[0] in ("template", "provider", "model"):
        name = differs[0]
        what = f"its {name} was {_short(old.get(name))}, this one's is {_short(new.get(name))}"
    else:
        what = f"its {' and '.join(differs) or 'definition'} differ"
    return _fail(
        ErrorCode.STORE_MISMATCH,
        path,
        f"it holds another batch ({what}); pass another store path, or resend_changed=True to "
        "send the changed rows again into this one",
    )


def _short(text: Any) -> str:
    value = repr(text)
    return value if len(value) <= 60 else value[:57] + "..."


def _storable(text: str) -> str:
    """``text`` as SQLite can hold it (UTF-8): a lone surrogate (a prompt read with
    ``surrogateescape``, a ``"\\ud800"`` escape) as U+FFFD, where it raised
    ``UnicodeEncodeError`` and ended the run."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return text


def _redacted(text: str | None) -> str | None:
    return _storable(redact(text)) if text else text


def _redacted_json(text: str | None) -> str | None:
    """A JSON text with its string values redacted (still JSON)."""
    if not text:
        return text
    return _storable(redact_body(text.encode("utf-8", "surrogatepass")).decode("utf-8", "replace"))
