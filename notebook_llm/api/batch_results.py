"""A batch's results in the journal and back: one result as a journal row
(:func:`row_result`), rows as ``map`` returns them (:func:`frame_of`, :func:`results_of`), and
:class:`StoredResults`, the lazy handle a streamed batch returns.

A typed answer is journaled as the JSON of its top-level fields (what ``map``'s columns hold,
:func:`notebook_llm.core.response_schema.fields_of`), so a frame read back from the journal has
the same columns and values as the frame of a run without one. The ``error`` text is the one
``map``'s error column shows (``"CODE: message"``).
"""

from __future__ import annotations

import importlib
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..core.completion import Completion
from ..core.errors import ErrorCode, LlmError
from ..core.response_schema import ResponseSchema, as_schema, fields_of
from ..engine.pricing import Price, cost
from .batch_store import RowResult, StoredRow
from .cost_cap import token_count
from .dataframes import error_column_of, unparsed_reason

__all__ = ["StoredResults", "frame_of", "result_cost", "results_of", "row_result"]


def result_cost(result: Completion | LlmError, price: Price | None) -> float:
    """What one row's request cost (a failed one's partial completion counts too)."""
    if price is None:
        return 0.0
    completion = result if isinstance(result, Completion) else result.details.get("completion")
    usage = getattr(completion, "usage", None)
    return cost(usage, price) if usage is not None else 0.0


def row_result(
    result: Completion | LlmError, schema: ResponseSchema | None, spent: float
) -> RowResult:
    """One result as the journal keeps it, with what it cost (``spent``, US dollars: the
    caller's count, the same the cost cap counted)."""
    if isinstance(result, LlmError):
        completion = result.details.get("completion")
        usage = getattr(completion, "usage", None)
        return RowResult(
            "failed",
            error_code=result.code,
            error=f"{result.code}: {result.message}",
            input_tokens=token_count(getattr(usage, "input_tokens", None)),
            output_tokens=token_count(getattr(usage, "output_tokens", None)),
            cost=spent,
        )
    usage = result.usage
    fields: str | None = None
    error: str | None = None
    if schema is not None:
        error = unparsed_reason(result)
        values = fields_of(result.parsed)
        if values is None and result.parsed is not None and schema.fields == []:
            values = {"value": result.parsed}
        if values is not None:
            fields = json.dumps(values, ensure_ascii=False, default=str)
    return RowResult(
        "failed" if error else "done",
        answer=result.text,
        fields=fields,
        completion=result.to_json(),
        error_code=error.split(":", 1)[0] if error else None,
        error=error,
        # a server's count that is not one (negative, past SQLite's integers) is not kept
        input_tokens=token_count(usage.input_tokens) if usage else None,
        output_tokens=token_count(usage.output_tokens) if usage else None,
        cost=spent,
    )


def _not_run() -> LlmError:
    return LlmError("not run", ErrorCode.ABORTED)


def results_of(rows: Sequence[StoredRow | None]) -> list[Completion | LlmError]:
    """Rows as ``map`` returns a list (a row without a result: ``ABORTED: not run``)."""
    return [r.result() if r is not None else _not_run() for r in rows]


def frame_of(rows: Sequence[StoredRow | None], index: Any, schema: Any) -> Any:
    """Rows as ``map`` returns a DataFrame: the schema's fields (or ``answer``) and the error
    column, with ``index`` (the same layout as :func:`notebook_llm.api.dataframes.to_frame`)."""
    pd: Any = importlib.import_module("pandas")
    checked = as_schema(schema) if schema is not None else None
    errors = [
        (r.error if r is not None else "ABORTED: not run") if (r is None or r.error) else None
        for r in rows
    ]
    if checked is None:
        answers = [r.answer if r is not None and r.status == "done" else None for r in rows]
        frame = pd.DataFrame({"answer": answers}, index=index)
        frame["error"] = pd.Series(errors, index=index, dtype=object)
        return frame
    columns = checked.fields or ["value"]
    values = [json.loads(r.fields) if r is not None and r.fields else {} for r in rows]
    data = [{c: v.get(c) for c in columns} for v in values]
    frame = pd.DataFrame(data, columns=columns, index=index)
    frame[error_column_of(columns)] = pd.Series(errors, index=index, dtype=object)
    return frame


class StoredResults:
    """The results of a batch whose rows went straight to its journal (a streamed input: an
    iterator, a Parquet or CSV file). Nothing is held in memory: read them back whole
    (:meth:`to_pandas`), in chunks (:meth:`chunks`), or only the failures (:meth:`errors`).
    Each read opens the journal read-only, so it also works while a batch still writes."""

    def __init__(self, path: str | os.PathLike[str], schema: Any = None, part: int = 0) -> None:
        self.path = Path(os.fspath(path))
        self.schema = schema
        self.part = part

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)

    def _rows(self, where: str, args: Sequence[Any], chunk: int) -> Iterator[list[StoredRow]]:
        from .batch_store import _ROW_COLUMNS

        conn = self._connect()
        try:
            cur = conn.execute(
                f"SELECT {_ROW_COLUMNS} FROM rows WHERE part = ?{where} ORDER BY pos",
                (self.part, *args),
            )
            while batch := cur.fetchmany(chunk):
                yield [StoredRow(*r) for r in batch]
        finally:
            conn.close()

    def __len__(self) -> int:
        conn = self._connect()
        try:
            row = conn.execute("SELECT count(*) FROM rows WHERE part = ?", (self.part,)).fetchone()
        finally:
            conn.close()
        return int(row[0])

    def counts(self) -> dict[str, int]:
        """How many rows are ``done`` and ``failed``."""
        conn = self._connect()
        try:
            out = {"done": 0, "failed": 0}
            for status, n in conn.execute(
                "SELECT status, count(*) FROM rows WHERE part = ? GROUP BY status", (self.part,)
            ):
                out[str(status)] = int(n)
            return out
        finally:
            conn.close()

    def chunks(self, size: int = 10_000) -> Iterator[Any]:
        """The results as DataFrames of at most ``size`` rows, in input order (index: the
        row's position in the input)."""
        for rows in self._rows("", (), size):
            yield frame_of(rows, [r.pos for r in rows], self.schema)

    def to_pandas(self) -> Any:
        """Every result as one DataFrame (index: the row's position in the input)."""
        pd: Any = importlib.import_module("pandas")
        frames = list(self.chunks())
        if not frames:
            return frame_of([], [], self.schema)
        return pd.concat(frames) if len(frames) > 1 else frames[0]

    def errors(self) -> Any:
        """The failed rows: position, error code and message."""
        pd: Any = importlib.import_module("pandas")
        rows = [r for batch in self._rows(" AND status = 'failed'", (), 10_000) for r in batch]
        return pd.DataFrame(
            {"error_code": [r.error_code for r in rows], "error": [r.error for r in rows]},
            index=pd.Index([r.pos for r in rows], name="pos"),
        )

    def __repr__(self) -> str:
        counts = self.counts()
        return (
            f"StoredResults({str(self.path)!r}: {counts['done']:,} done, "
            f"{counts['failed']:,} failed; .to_pandas(), .chunks(n), .errors())"
        )
