"""The journal is readable without this package: its tables are the ones ``docs/batch.md``
documents, column for column, and a Python with no site-packages at all (``python -I -S``:
the standard library's ``sqlite3`` only) reads the answers out of it. A crash of the package
itself never strands the answers."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from test_batch_api import NOW

from notebook_llm.api.batch import map_prompts
from notebook_llm.engine.engine import Engine

DOCS = Path(__file__).resolve().parents[1] / "docs" / "batch.md"
TABLES = ("batch", "rows", "batch_api_jobs", "batch_api_rows")


def documented_columns() -> dict[str, set[str]]:
    """Each table's columns as docs/batch.md lists them: the backticked names in the first
    cell of the table that follows the line starting with the table's name."""
    lines = DOCS.read_text().splitlines()
    found: dict[str, set[str]] = {}
    for n, line in enumerate(lines):
        name = re.match(r"`(\w+)`[:,] one row", line)
        if name is None or name.group(1) not in TABLES:
            continue
        columns: set[str] = set()
        for row in lines[n + 1 :]:
            if not row.strip():
                if columns:
                    break
                continue
            first = row.strip().strip("|").split("|")[0]
            if first.strip() in ("column", "---"):
                continue
            columns |= set(re.findall(r"`(\w+)`", first))
        found[name.group(1)] = columns
    return found


def test_the_tables_are_the_documented_ones(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    out = map_prompts(
        ["one", "two"],
        provider="mock",
        model="echo",
        engine=Engine(config_file=False),
        batch_api=NOW,
        store=str(store),
        progress=False,
    )
    assert [r.text for r in out] == ["one", "two"]
    documented = documented_columns()
    assert set(documented) == set(TABLES)
    db = sqlite3.connect(store)
    try:
        for table in TABLES:
            actual = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            assert actual == documented[table], table
    finally:
        db.close()


READER = """
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
answers = db.execute("SELECT pos, status, answer FROM rows ORDER BY part, pos").fetchall()
spent = db.execute("SELECT total(cost) FROM rows").fetchone()[0]
print(json.dumps({"answers": answers, "spent": spent, "package": "notebook_llm" in sys.modules}))
"""


def test_a_python_without_site_packages_reads_the_answers(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    engine = Engine(config_file=False)
    map_prompts(["alpha", "beta"], provider="mock", model="echo", engine=engine, store=str(store))
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", READER, str(store)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    read = json.loads(done.stdout)
    assert read["answers"] == [[0, "done", "alpha"], [1, "done", "beta"]]
    assert read["spent"] == 0.0  # the mock is free; a priced model's dollars sum here
    assert read["package"] is False
