"""Where a batch's prompts come from: :func:`source_of` turns what ``map`` was given into
chunks of prompts, read as the batch goes, so an input larger than memory never is in memory.

* A list, a tuple, a pandas DataFrame or Series: in memory already; one chunk (``prompts_of``
  of :mod:`.dataframes` fills the template), and the result is a list or a DataFrame.
* A Parquet or CSV file, given as a ``pathlib.Path`` (``.parquet``, ``.pq``, ``.csv``,
  ``.tsv``): read :data:`CHUNK_ROWS` rows at a time (pyarrow's ``ParquetFile.iter_batches``;
  pandas' ``read_csv(chunksize=)``), each chunk a DataFrame filled by the template.
* Any other iterable (a generator, ``pd.read_csv(..., chunksize=)``, a database cursor): read
  item by item; an item that is a DataFrame is a chunk of rows, anything else one prompt.

A streamed source (the last two) is the kind whose results go to the journal and come back as
:class:`~notebook_llm.api.batch_results.StoredResults` when ``map`` has a ``store``.
"""

from __future__ import annotations

import importlib
import itertools
import os
from collections.abc import Iterable, Iterator, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import ErrorCode, LlmError
from .dataframes import is_pandas, prompts_of

__all__ = ["CHUNK_ROWS", "Source", "source_of"]

#: Rows read from a file or an iterator at a time.
CHUNK_ROWS = 2_048

_PARQUET = (".parquet", ".pq")
_CSV = (".csv", ".tsv")


@dataclass
class Source:
    """A batch's prompts: ``chunks`` yields lists of prompts in input order."""

    chunks: Iterator[list[Any]]
    #: How many rows, when known before reading them (a list, a frame, a Parquet file).
    total: int | None
    #: The pandas index of an in-memory pandas input (the result's index), else ``None``.
    index: Any
    #: ``True`` for a file or an iterator: read as the batch goes.
    streamed: bool
    #: ``True`` when the input is pandas (a frame comes back).
    pandas: bool


def source_of(data: Any, template: str | None, chunk_rows: int = CHUNK_ROWS) -> Source:
    """The prompts of ``data`` (see the module docstring)."""
    if isinstance(data, str):
        raise LlmError(
            "map takes a list of prompts, a DataFrame or a file as a pathlib.Path, not one "
            "string: wrap a prompt in a list, or pass Path(...) for a file",
            ErrorCode.INVALID_OPTIONS,
        )
    if isinstance(data, os.PathLike):
        return _file_source(Path(os.fspath(data)), template, chunk_rows)
    if (
        is_pandas(data)
        or isinstance(data, list | tuple)
        or (isinstance(data, Sized) and hasattr(data, "__getitem__"))
    ):
        items, index = prompts_of(data, template)
        return Source(iter([items]), len(items), index, False, index is not None)
    if not isinstance(data, Iterable):
        raise LlmError(
            f"map takes prompts as a list, an iterator, a DataFrame or a file Path, not "
            f"{type(data).__name__}",
            ErrorCode.INVALID_OPTIONS,
        )
    hint = getattr(data, "__length_hint__", None)
    total = None
    if callable(hint):
        try:
            total = int(hint()) or None
        except (TypeError, ValueError):
            total = None
    return Source(_iter_chunks(iter(data), template, chunk_rows), total, None, True, False)


def _iter_chunks(items: Iterator[Any], template: str | None, size: int) -> Iterator[list[Any]]:
    """Items of an iterator in chunks; a DataFrame item is a chunk of rows of its own."""
    pending: list[Any] = []
    for item in items:
        if is_pandas(item):
            if pending:
                yield prompts_of(pending, template)[0]
                pending = []
            yield prompts_of(item, template)[0]
            continue
        pending.append(item)
        if len(pending) >= size:
            yield prompts_of(pending, template)[0]
            pending = []
    if pending:
        yield prompts_of(pending, template)[0]


def _file_source(path: Path, template: str | None, size: int) -> Source:
    suffix = path.suffix.lower()
    if not path.is_file():
        raise LlmError(f"map: no file {path}", ErrorCode.INVALID_OPTIONS)
    if suffix in _PARQUET:
        try:
            pq: Any = importlib.import_module("pyarrow.parquet")
        except ImportError:
            raise LlmError(
                "reading Parquet needs pyarrow: pip install pyarrow", ErrorCode.INVALID_OPTIONS
            ) from None
        reader = pq.ParquetFile(path)
        total = int(reader.metadata.num_rows)
        batches = (b.to_pandas() for b in reader.iter_batches(batch_size=size))
        return Source(_frames(batches, template), total, None, True, True)
    if suffix in _CSV:
        pd: Any = importlib.import_module("pandas")
        sep = "\t" if suffix == ".tsv" else ","
        frames = pd.read_csv(path, sep=sep, chunksize=size)
        return Source(_frames(iter(frames), template), None, None, True, True)
    raise LlmError(
        f"map reads .parquet and .csv files, not {path.name}; load it into a DataFrame first",
        ErrorCode.INVALID_OPTIONS,
    )


def _frames(frames: Iterator[Any], template: str | None) -> Iterator[list[Any]]:
    for frame in itertools.chain(frames):
        yield prompts_of(frame, template)[0]
