"""Typed data: a DataFrame of 1,000 rows mapped through the mock with a schema, and what images
cost in saved notebooks and recordings.

    python bench/bench_typed.py [--rows 1000] [--concurrency 16]

1. ``map(df, template=..., schema=Sentiment)`` on the ``mock`` provider (the built-in openai Lua
   adapter, HTTP to the loopback mock server, which answers each row with a valid instance of
   the schema; no latency), once as a warm-up of 20 rows, then the full run: wall time, rows
   per second, how many rows validated, and the same rows without a schema (the ratio is what
   the schema costs: a longer answer to stream, and pydantic validation per row).
2. Images: a 1024 x 768 PNG of noise (the worst case for size) and a matplotlib figure. For each:
   the bytes the request carries, the thumbnail a notebook output keeps, and the size of a
   recording of one request with the image (a hash reference replaces it) next to what the
   recording would be holding the image itself.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import BaseModel

import notebook_llm
from notebook_llm import Engine
from notebook_llm.core.images import image_block, thumbnail_data_url
from notebook_llm.notebook.widgets.typed_view import ImageStrip


class Sentiment(BaseModel):
    label: Literal["positive", "negative", "neutral"]
    score: float
    summary: str


def frame(rows: int) -> pd.DataFrame:
    words = ["great", "slow", "fine", "broken", "lovely", "noisy", "cheap", "solid"]
    rng = random.Random(0)
    texts = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(rows)]
    return pd.DataFrame({"text": texts, "stars": [rng.randint(1, 5) for _ in range(rows)]})


def run_map(engine: Engine, df: pd.DataFrame, concurrency: int, schema: object) -> float:
    start = time.perf_counter()
    out = notebook_llm.map(
        df,
        template="Review ({stars} stars): {text}",
        schema=schema,
        engine=engine,
        provider="mock",
        concurrency=concurrency,
        progress=False,
    )
    took = time.perf_counter() - start
    assert out["error"].isna().all(), out["error"].dropna().head()
    return took


def images(engine: Engine) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    rng = random.Random(1)
    size = (1024, 768)
    img = Image.frombytes(
        "RGB", size, bytes(rng.getrandbits(8) for _ in range(size[0] * size[1] * 3))
    )
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    fig = plt.figure(figsize=(8, 5), dpi=150)
    ax = fig.add_subplot()
    ax.plot(range(100), [x**0.5 for x in range(100)])
    ax.set_title("a plot")
    sources = {"photo-like PNG 1024x768 (noise)": buf.getvalue(), "matplotlib figure 8x5 in": fig}
    print("\nimages: what each place holds (bytes)")
    print(f"  {'image':34} {'request':>10} {'thumbnail':>10} {'recording':>10} {'unshrunk':>10}")
    for name, source in sources.items():
        block = image_block(source)
        request_bytes = len(block.data or "")
        thumb = thumbnail_data_url(block) or ""
        strip = ImageStrip([block])._repr_mimebundle_()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "rec.json"
            with engine.recording(path):
                engine.complete_sync("mock", "echo", prompt="what is this?", images=source)
            recorded = path.stat().st_size
        unshrunk = recorded + request_bytes + len("data:image/png;base64,")
        print(
            f"  {name:34} {request_bytes:>10,} {len(json.dumps(strip)):>10,} "
            f"{recorded:>10,} {unshrunk:>10,}"
        )
        assert len(base64.b64decode(thumb.split(",", 1)[1])) < 10_000
    plt.close("all")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    engine = Engine(config_file=False, env_file=False)
    df = frame(args.rows)
    run_map(engine, df.head(20), args.concurrency, Sentiment)  # warm-up: server, Lua, pydantic
    typed = run_map(engine, df, args.concurrency, Sentiment)
    plain = run_map(engine, df, args.concurrency, None)
    print(
        f"map(DataFrame of {args.rows:,} rows, schema=Sentiment) on the mock, concurrency {args.concurrency}"
    )
    print(
        f"  with schema:    {typed:6.2f} s  {args.rows / typed:7.0f} rows/s  (all rows validated)"
    )
    print(f"  without schema: {plain:6.2f} s  {args.rows / plain:7.0f} rows/s")
    print(f"  ratio with/without: {typed / plain:.2f}x")
    images(engine)


if __name__ == "__main__":
    main()
