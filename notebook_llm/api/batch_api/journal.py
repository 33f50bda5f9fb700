"""What a batch-API run keeps on disk: its remote batches and the state of every row, in two
tables of the run's store (the SQLite journal of ``map``, :mod:`notebook_llm.api.batch_store`,
whose ``rows`` table holds every finished row's result as for any ``map`` run), readable
without this package.

``batch_api_jobs``: one row per remote batch::

    job_id      INTEGER PRIMARY KEY   our number
    provider    TEXT                  the provider route (openai, anthropic, mock, ...)
    api         TEXT                  'openai' or 'anthropic'
    remote_id   TEXT                  the provider's batch id (NULL until it accepted the batch)
    state       TEXT                  'preparing' (being sent; left so by a run that ended
                                      before the provider's answer: the next run looks for it
                                      by its tag), 'submitted' (the provider has it),
                                      'collected' (every row has its outcome), 'abandoned'
                                      (never reached the provider: its rows are sent again)
    status      TEXT                  the provider's last word on it (in_progress, completed...)
    counts      TEXT                  the provider's last counts, JSON ({"completed": 95, ...})
    fields      TEXT                  JSON: input_file_id, output_file_id, error_file_id,
                                      results_url (what collecting needs)
    error       TEXT                  why the batch as a whole failed or expired
    rows        INTEGER               how many rows it carries
    created, updated  REAL            Unix times

``batch_api_rows``: one row per row sent (a row sent again after a failure has a newer one;
the newest per ``row_key`` is its state; identical rows of one input are sent once)::

    row_id      INTEGER PRIMARY KEY
    custom_id   TEXT UNIQUE           the id the request carried ('j<job_id>-<n>')
    job_id      INTEGER               its batch
    row_key     TEXT                  the row's key (``rows.key``: what decides its answer)
    state       TEXT                  'submitted', 'done' or 'failed'
    line        TEXT                  the provider's results line for it, as sent (the answer)
    error_code, error  TEXT           why it failed (an LlmError code, the provider's message)
    cost        REAL                  US dollars at the batch price (NULL: unknown)
    updated     REAL

Each step commits as it ends: the batch before it is sent, its remote id as soon as it is
known, the rows' outcomes every few hundred lines (and each row's result into ``rows``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.errors import ErrorCode, LlmError
from ...core.redaction import redact, redact_obj
from ...wire.cassette import redact_body
from ..batch_store import BatchStore

__all__ = ["BatchJournal", "JobRecord", "RowRecord"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batch_api_jobs (
    job_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    provider   TEXT NOT NULL,
    api        TEXT NOT NULL,
    remote_id  TEXT,
    state      TEXT NOT NULL,
    status     TEXT,
    counts     TEXT,
    fields     TEXT,
    error      TEXT,
    rows       INTEGER NOT NULL,
    created    REAL NOT NULL,
    updated    REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_api_rows (
    row_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    custom_id  TEXT UNIQUE,
    job_id     INTEGER NOT NULL REFERENCES batch_api_jobs(job_id),
    row_key    TEXT NOT NULL,
    state      TEXT NOT NULL,
    line       TEXT,
    error_code TEXT,
    error      TEXT,
    cost       REAL,
    updated    REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS batch_api_rows_by_key ON batch_api_rows(row_key);
CREATE INDEX IF NOT EXISTS batch_api_rows_by_job ON batch_api_rows(job_id, state)
"""

#: SQLite's default limit on the ``?`` of one statement is 999 (older builds): keys are asked
#: for in groups below it.
_GROUP = 900


@dataclass(frozen=True)
class JobRecord:
    """One ``batch_api_jobs`` row."""

    job_id: int
    provider: str
    api: str
    remote_id: str | None
    state: str
    status: str | None
    counts: dict[str, int]
    fields: dict[str, Any]
    error: str | None
    rows: int


@dataclass(frozen=True)
class RowRecord:
    """The newest ``batch_api_rows`` row of one key."""

    custom_id: str
    job_id: int
    row_key: str
    state: str
    line: bytes | None
    error: LlmError | None
    cost: float | None


def _json_dict(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class BatchJournal:
    """The batch API's tables in a run's store (see the module docstring)."""

    def __init__(self, store: BatchStore) -> None:
        self.store = store
        store.ensure_tables(_SCHEMA)
        self._db = store.conn

    # ------------------------------------------------------------------ jobs

    def new_job(self, provider: str, api: str) -> int:
        """Record a batch being written (no rows yet); its number."""
        now = time.time()
        with self.store.write():
            cur = self._db.execute(
                "INSERT INTO batch_api_jobs (provider, api, state, rows, created, updated) "
                "VALUES (?, ?, 'preparing', 0, ?, ?)",
                (provider, api, now, now),
            )
        return int(cur.lastrowid or 0)

    def add_rows(self, job_id: int, rows: Sequence[tuple[str, str]]) -> None:
        """The rows of batch ``job_id`` about to be sent (``(custom_id, row_key)``, state
        ``submitted``), in one commit."""
        now = time.time()
        with self.store.write():
            self._db.executemany(
                "INSERT INTO batch_api_rows (custom_id, job_id, row_key, state, updated) "
                "VALUES (?, ?, ?, 'submitted', ?)",
                [(custom_id, job_id, key, now) for custom_id, key in rows],
            )
            self._db.execute(
                "UPDATE batch_api_jobs SET rows = rows + ?, updated = ? WHERE job_id = ?",
                (len(rows), now, job_id),
            )

    def submitted(self, job_id: int, remote_id: str, fields: dict[str, Any]) -> None:
        """The provider accepted batch ``job_id`` as ``remote_id``."""
        with self.store.write():
            self._db.execute(
                "UPDATE batch_api_jobs SET remote_id = ?, state = 'submitted', fields = ?, "
                "updated = ? WHERE job_id = ?",
                (remote_id, json.dumps(redact_obj(fields)), time.time(), job_id),
            )

    def abandon(self, job_id: int) -> None:
        """Batch ``job_id`` never reached the provider: it and its rows are forgotten (the
        rows are sent again)."""
        with self.store.write():
            self._db.execute("DELETE FROM batch_api_rows WHERE job_id = ?", (job_id,))
            self._db.execute(
                "UPDATE batch_api_jobs SET state = 'abandoned', rows = 0, updated = ? WHERE job_id = ?",
                (time.time(), job_id),
            )

    def polled(
        self, job_id: int, status: str, counts: dict[str, int], fields: dict[str, Any]
    ) -> None:
        """The provider's latest word on batch ``job_id``."""
        row = self._db.execute("SELECT fields FROM batch_api_jobs WHERE job_id = ?", (job_id,))
        found = row.fetchone()
        merged = {**_json_dict(found[0] if found else None), **fields}
        with self.store.write():
            self._db.execute(
                "UPDATE batch_api_jobs SET status = ?, counts = ?, fields = ?, updated = ? "
                "WHERE job_id = ?",
                (status, json.dumps(counts), json.dumps(redact_obj(merged)), time.time(), job_id),
            )

    def collected(self, job_id: int, error: str | None) -> None:
        """Every row of batch ``job_id`` has its outcome; ``error``: why the batch as a whole
        failed or expired."""
        with self.store.write():
            self._db.execute(
                "UPDATE batch_api_jobs SET state = 'collected', error = ?, updated = ? "
                "WHERE job_id = ?",
                (redact(error) if error else error, time.time(), job_id),
            )

    def job(self, job_id: int) -> JobRecord:
        row = self._db.execute(
            "SELECT job_id, provider, api, remote_id, state, status, counts, fields, error, rows "
            "FROM batch_api_jobs WHERE job_id = ?",
            (job_id,),
        ).fetchone()
        if row is None:
            raise KeyError(job_id)
        return JobRecord(
            int(row[0]),
            str(row[1]),
            str(row[2]),
            row[3],
            str(row[4]),
            row[5],
            {k: int(v) for k, v in _json_dict(row[6]).items() if isinstance(v, int)},
            _json_dict(row[7]),
            row[8],
            int(row[9]),
        )

    def rows_of(self, job_id: int) -> list[tuple[str, str]]:
        """The ``(custom_id, row_key)`` of batch ``job_id``'s rows, in the order sent."""
        return [
            (str(r[0]), str(r[1]))
            for r in self._db.execute(
                "SELECT custom_id, row_key FROM batch_api_rows WHERE job_id = ? ORDER BY row_id",
                (job_id,),
            )
        ]

    def created(self, job_id: int) -> float:
        """When batch ``job_id`` was recorded (a Unix time)."""
        row = self._db.execute(
            "SELECT created FROM batch_api_jobs WHERE job_id = ?", (job_id,)
        ).fetchone()
        return float(row[0]) if row is not None else 0.0

    def preparing_jobs(self, provider: str) -> list[int]:
        """Batches of ``provider`` recorded but never accepted (a run that ended while sending)."""
        return [
            int(r[0])
            for r in self._db.execute(
                "SELECT job_id FROM batch_api_jobs WHERE provider = ? AND state = 'preparing'",
                (provider,),
            )
        ]

    # ------------------------------------------------------------------ rows

    def latest(self, keys: Iterable[str]) -> dict[str, RowRecord]:
        """The newest row record of each key that has one."""
        out: dict[str, RowRecord] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _GROUP):
            group = unique[start : start + _GROUP]
            marks = ",".join("?" * len(group))
            rows = self._db.execute(
                "SELECT custom_id, job_id, row_key, state, line, error_code, error, cost "
                f"FROM batch_api_rows WHERE row_id IN (SELECT max(row_id) FROM batch_api_rows "
                f"WHERE row_key IN ({marks}) GROUP BY row_key)",
                group,
            )
            for custom_id, job_id, key, state, line, code, message, cost in rows:
                error = LlmError(message or "failed", code or ErrorCode.UNKNOWN) if code else None
                out[key] = RowRecord(
                    custom_id,
                    int(job_id),
                    key,
                    state,
                    line.encode("utf-8") if isinstance(line, str) else None,
                    error,
                    cost,
                )
        return out

    def keys_of(self, job_id: int, custom_ids: Iterable[str]) -> dict[str, str]:
        """``custom_id -> row_key`` of the rows of batch ``job_id`` among ``custom_ids``."""
        out: dict[str, str] = {}
        ids = list(custom_ids)
        for start in range(0, len(ids), _GROUP):
            group = ids[start : start + _GROUP]
            marks = ",".join("?" * len(group))
            for custom_id, key in self._db.execute(
                f"SELECT custom_id, row_key FROM batch_api_rows WHERE job_id = ? AND custom_id IN ({marks})",
                (job_id, *group),
            ):
                out[custom_id] = key
        return out

    def record_outcomes(
        self, outcomes: Sequence[tuple[str, str, bytes, LlmError | None, float | None]]
    ) -> None:
        """``(custom_id, state, line, error, cost)`` of rows, in one commit."""
        now = time.time()
        with self.store.write():
            self._db.executemany(
                "UPDATE batch_api_rows SET state = ?, line = ?, error_code = ?, error = ?, cost = ?, "
                "updated = ? WHERE custom_id = ?",
                [
                    (
                        state,
                        # the provider's line as it came, its values redacted (it stays JSON:
                        # a later run maps it again); a body that echoes a key keeps none
                        redact_body(line).decode("utf-8", "replace"),
                        error.code if error is not None else None,
                        redact(error.message) if error is not None else None,
                        cost,
                        now,
                        custom_id,
                    )
                    for custom_id, state, line, error, cost in outcomes
                ],
            )

    def fail_unanswered(self, job_id: int, error: LlmError) -> int:
        """Rows of batch ``job_id`` still without an outcome fail with ``error``; how many."""
        with self.store.write():
            cur = self._db.execute(
                "UPDATE batch_api_rows SET state = 'failed', error_code = ?, error = ?, updated = ? "
                "WHERE job_id = ? AND state = 'submitted'",
                (error.code, redact(error.message), time.time(), job_id),
            )
        return cur.rowcount

    def keys_failed_with(self, job_id: int, error: LlmError) -> list[str]:
        """The keys of the rows of batch ``job_id`` that failed with ``error``'s code and
        message (those :meth:`fail_unanswered` just marked)."""
        return [
            str(r[0])
            for r in self._db.execute(
                "SELECT row_key FROM batch_api_rows WHERE job_id = ? AND state = 'failed' "
                "AND error_code = ? AND error = ?",
                (job_id, error.code, error.message),
            )
        ]
