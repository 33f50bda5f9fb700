"""The first typed answer of a process against the first untyped one: what ``schema=`` adds to
a fresh kernel's first answer (the schema's own cost, and jsonschema's import where a JSON
Schema dict is checked).

Each case runs in a fresh interpreter (so nothing is imported yet) that first imports what a
notebook has imported by then (IPython, the package, pydantic for a model) and then times one
mock answer. Run it in the environment to measure, e.g. the one ``scripts/lab`` makes (it has
JupyterLab, whose dependencies bring jsonschema's optional format checkers)::

    python bench/bench_typed_start.py

Prints milliseconds per case (the best of a few runs) and each typed case's extra over the
untyped one. Then every later answer: one answer checked against a five-field JSON Schema dict
(what a ``map`` row or a tool call pays), with the schema's verdict kept from the first check
and checked anew each time, and their ratio.
"""

from __future__ import annotations

import subprocess
import sys

RUNS = 5

CASE = """
import time, sys, dataclasses
import IPython
try:
    import pydantic
except ImportError:  # an environment without the schema extra: no pydantic case
    pydantic = None
if pydantic is None and sys.argv[1] == "pydantic":
    print("nan", False)
    raise SystemExit
import notebook_llm
from notebook_llm import Engine
engine = Engine(config_file=False, env_file=False)
engine.complete_sync("mock", "echo", prompt="warm the transport up")  # not timed
if pydantic is not None:
    class Sentiment(pydantic.BaseModel):
        label: str
        score: float
else:
    Sentiment = None
@dataclasses.dataclass
class Point:
    x: int
    y: int
SCHEMAS = {
    "untyped": None,
    "pydantic": Sentiment,
    "dataclass": Point,
    "json schema dict": {"type": "object", "properties": {"label": {"type": "string"}},
                         "required": ["label"]},
}
schema = SCHEMAS[sys.argv[1]]
start = time.perf_counter()
engine.complete_sync("mock", "echo", prompt="the soup was cold", schema=schema)
print((time.perf_counter() - start) * 1000, "jsonschema" in sys.modules)
"""


def measure(case: str) -> tuple[float, bool]:
    best, imported = float("inf"), False
    for _ in range(RUNS):
        out = subprocess.run(
            [sys.executable, "-c", CASE, case], capture_output=True, text=True, check=True
        ).stdout.split()
        if out[0] == "nan":
            return float("nan"), False
        best, imported = min(best, float(out[0])), out[1] == "True"
    return best, imported


def main() -> None:
    try:
        import jupyterlab  # noqa: F401

        env = "JupyterLab installed"
    except ImportError:
        env = "no JupyterLab"
    print(f"first answer of a fresh process ({env}; best of {RUNS}):")
    base, _ = measure("untyped")
    print(f"  {'untyped':18s} {base:8.1f} ms")
    for case in ("pydantic", "dataclass", "json schema dict"):
        ms, imported = measure(case)
        if ms != ms:  # NaN: the case cannot run here
            print(f"  {case:18s} (pydantic is not installed here)")
            continue
        note = "imports jsonschema" if imported else "jsonschema not imported"
        print(f"  {case:18s} {ms:8.1f} ms  (+{ms - base:7.1f} ms; {note})")
    later_answers()


def later_answers(n: int = 2_000) -> None:
    import time

    from notebook_llm.core import json_schema_check as c

    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}},
            "sentiment": {"enum": ["pos", "neg", "neu"]},
        },
        "required": ["name", "age", "tags", "sentiment"],
        "additionalProperties": False,
    }
    value = {"name": "x", "age": 3, "tags": ["a", "b"], "sentiment": "pos"}
    assert c.check(value, schema) == []  # imports jsonschema, not timed
    start = time.perf_counter()
    for _ in range(n):
        c.check(value, schema)
    kept = (time.perf_counter() - start) / n
    start = time.perf_counter()
    for _ in range(n):
        c._PREPARED.clear()  # the schema checked against its metaschema every time
        c.check(value, schema)
    anew = (time.perf_counter() - start) / n
    print(f"every later answer (one check, {n:,} times, this process):")
    print(f"  schema's verdict kept   {kept * 1e6:8.1f} us")
    print(f"  schema checked anew     {anew * 1e6:8.1f} us  ({anew / kept:.1f}x)")


if __name__ == "__main__":
    main()
