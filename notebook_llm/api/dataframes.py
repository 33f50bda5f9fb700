"""A DataFrame in one call: rows -> prompts for ``map``, answers -> a DataFrame with the input's
index.

``map(df, template="Review: {text}", schema=Sentiment)`` fills the template from each row's
columns (``str.format_map``: ``{column}``; ``{{`` for a literal brace). A pandas Series works
too: its values fill ``{}``, ``{value}`` or ``{<series name>}`` (without a template the values
are the prompts). A plain list with a template is filled the same way (dicts by key).

The result (:func:`to_frame`), for pandas input: with a schema, one column per top-level field
of the schema; without one, an ``answer`` column of the answers' text; either way an ``error``
column (``None``, or ``"CODE: message"`` for a row that failed, whose other columns are then
empty; named ``llm_error`` when the schema has a field called ``error``). A cell the template
uses that is empty (NaN, None, ``pd.NA``) is refused before anything is sent, naming the column
and the row: it would reach the model as "nan". pandas is imported only when a pandas object is
passed.
"""

from __future__ import annotations

import importlib
import re
import string
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.errors import ErrorCode, LlmError
from ..core.response_schema import PARSED_FINISHES, ResponseSchema, as_schema, columns_of

__all__ = ["error_column_of", "is_pandas", "prompts_of", "to_frame", "unparsed_reason"]


class _Formatter(string.Formatter):
    """``str.format`` whose ``{0}`` also names a column called ``0`` (a DataFrame's columns are
    often integers), and whose every failure on a value is one line."""

    def get_value(self, key: int | str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if isinstance(key, int) and isinstance(kwargs, _Row) and str(key) in kwargs.columns:
            return kwargs[str(key)]
        return super().get_value(key, args, kwargs)


_FORMATTER = _Formatter()


def is_pandas(obj: Any) -> bool:
    """A pandas DataFrame or Series (checked without importing pandas)."""
    return type(obj).__module__.startswith("pandas") and hasattr(obj, "index")


def _is_frame(obj: Any) -> bool:
    return is_pandas(obj) and hasattr(obj, "columns")


class _Row(Mapping[str, Any]):
    """One row's columns for ``format_map``; a missing column is a one-line error."""

    def __init__(self, values: dict[str, Any], n: int) -> None:
        self.columns = values
        self.n = n

    def __getitem__(self, key: str) -> Any:
        if key in self.columns:
            return self.columns[key]
        raise LlmError(
            f"template names {{{key}}}, which row {self.n} does not have; it has: "
            f"{', '.join(map(str, self.columns)) or 'nothing'}",
            ErrorCode.INVALID_OPTIONS,
        )

    def __iter__(self) -> Any:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)


def _fill(template: str, value: Any, n: int, name: str | None = None) -> str:
    if isinstance(value, Mapping):
        row = {str(k): v for k, v in value.items()}
        positional: tuple[Any, ...] = ()
    else:
        row = {"value": value, **({name: value} if name else {})}
        positional = (value,)
    try:
        return _FORMATTER.vformat(template, positional, _Row(row, n))
    except IndexError:
        raise LlmError(
            f"template {template!r} has a positional {{}} but row {n} has named columns: "
            "use {column}",
            ErrorCode.INVALID_OPTIONS,
        ) from None
    except (KeyError, ValueError, AttributeError, TypeError) as exc:
        raise LlmError(
            f"template {template!r}, row {n}: {type(exc).__name__}: {exc}",
            ErrorCode.INVALID_OPTIONS,
        ) from None


def _missing(value: Any) -> bool:
    """NaN, None, pd.NA or NaT: an empty cell, which would reach the model as "nan"."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    try:
        return bool(value != value)  # NaN is the one value not equal to itself
    except (TypeError, ValueError):  # an array-like cell: not empty
        return False


def _check_filled(template: str | None, rows: list[dict[str, Any]], index: Any) -> None:
    """Refuse, before anything is sent, a row whose cell the template uses is empty."""
    if template is None:
        names = None
    else:
        try:
            names = {f for _, f, _, _ in _FORMATTER.parse(template) if f is not None}
        except ValueError:
            return  # a malformed template is reported when it is filled
        names = {re.split(r"[.\[]", f, maxsplit=1)[0] for f in names}
    labels = list(index) if index is not None else None
    for n, row in enumerate(rows):
        for key, value in row.items():
            if (names is None or str(key) in names) and _missing(value):
                label = labels[n] if labels is not None else n
                column = f"{{{key}}}" if names is not None else "the prompt"
                hint = f".dropna(subset=[{key!r}])" if names is not None else ".dropna()"
                raise LlmError(
                    f"{column} is empty (NaN/None) in row {label!r}, so its prompt would say "
                    f"'nan'; fill or drop those rows first (e.g. {hint})",
                    ErrorCode.INVALID_OPTIONS,
                )


def prompts_of(data: Any, template: str | None) -> tuple[list[Any], Any]:
    """The prompts for ``data`` and the pandas index to give the result (``None`` when the
    input is not pandas, so ``map`` returns its usual list)."""
    if _is_frame(data):
        if template is None:
            if len(data.columns) != 1:
                raise LlmError(
                    'map(DataFrame) needs template=, e.g. template="Review: {text}" (columns: '
                    f"{', '.join(map(str, data.columns))})",
                    ErrorCode.INVALID_OPTIONS,
                )
            column = data.iloc[:, 0].tolist()
            _check_filled(None, [{data.columns[0]: v} for v in column], data.index)
            return [str(v) for v in column], data.index
        dupes = data.columns[data.columns.duplicated()].unique().tolist()
        if dupes:  # to_dict would keep one of each silently
            raise LlmError(
                f"the DataFrame has more than one column named {', '.join(map(repr, dupes))}: "
                "rename them so the template can tell them apart",
                ErrorCode.INVALID_OPTIONS,
            )
        rows = data.to_dict(orient="records")
        _check_filled(template, rows, data.index)
        return [_fill(template, row, n) for n, row in enumerate(rows)], data.index
    if is_pandas(data):  # a Series
        values = data.tolist()
        name = str(data.name) if data.name is not None else None
        _check_filled(None, [{"value": v} for v in values], data.index)
        if template is None:
            return values, data.index
        return [_fill(template, v, n, name) for n, v in enumerate(values)], data.index
    items = list(data)
    if template is not None:
        items = [_fill(template, v, n) for n, v in enumerate(items)]
    return items, None


def _error_text(err: LlmError) -> str:
    return f"{err.code}: {err.message}"


def to_frame(results: Sequence[Any], index: Any, schema: Any) -> Any:
    """The answers as a DataFrame with ``index`` (see the module docstring)."""
    pd: Any = importlib.import_module("pandas")
    checked: ResponseSchema | None = as_schema(schema) if schema is not None else None
    errors = [_error_text(r) if isinstance(r, LlmError) else None for r in results]
    if checked is None:
        answers = [None if isinstance(r, LlmError) else r.text for r in results]
        frame = pd.DataFrame({"answer": answers}, index=index)
        frame["error"] = pd.Series(errors, index=index, dtype=object)
        return frame
    columns = checked.fields or ["value"]
    error_column = error_column_of(columns)
    errors = [e if e is not None else _unparsed(r) for e, r in zip(errors, results, strict=True)]
    rows: list[dict[str, Any]] = []
    for r in results:
        fields = None if isinstance(r, LlmError) else columns_of(r.parsed, checked)
        if fields is None and not isinstance(r, LlmError) and checked.fields == []:
            fields = {"value": r.parsed}
        rows.append({c: (fields or {}).get(c) for c in columns})
    frame = pd.DataFrame(rows, columns=columns, index=index)
    # object dtype: a row without error holds None (pandas would make it NaN in a str column)
    frame[error_column] = pd.Series(errors, index=index, dtype=object)
    return frame


def _unparsed(result: Any) -> str | None:
    """Why a completion of a typed ``map`` has no parsed answer (``None`` when it has one): it
    did not stop normally (cut at max_tokens, a tool call), so its text was never validated."""
    if getattr(result, "parsed", None) is not None:
        return None
    finish = getattr(result, "finish", None)
    kind = getattr(finish, "kind", None) or "no finish"
    if kind in PARSED_FINISHES:  # validated: a parsed answer of null, or a valid one
        return None
    hint = "; raise max_tokens=" if kind == "max-tokens" else ""
    return f"{kind.upper().replace('-', '_')}: the answer ended with {kind}, so it was not parsed{hint}"


def error_column_of(fields: Sequence[str]) -> str:
    """``error``, unless the schema has a field of that name: then ``llm_error`` (and so on), so
    that the answers' own ``error`` field is not overwritten."""
    name = "error"
    while name in fields:
        name = "llm_" + name
    return name


def unparsed_reason(result: Any) -> str | None:
    """The error column's text for a completion of a typed ``map`` that has no parsed answer
    (``None`` when it has one, or did stop normally): what a journal keeps for that row."""
    return _unparsed(result)
