"""Images in: each kind of input becomes one image block; a Figure is rendered at a bounded size;
the request carries the image, recordings carry a hash reference, and replay still matches."""

from __future__ import annotations

import base64
import io
import json
import random
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
from PIL import Image

from notebook_llm import Engine, ErrorCode, LlmError
from notebook_llm.adapters.mock.shared import shared_server
from notebook_llm.api.chat import Chat
from notebook_llm.core.images import (
    FIGURE_MAX_PX,
    image_block,
    image_bytes,
    shrink_images,
    thumbnail_data_url,
)
from notebook_llm.core.protocol import ImageBlock


def noise(size: tuple[int, int], fmt: str = "PNG") -> bytes:
    rng = random.Random(7)
    img = Image.frombytes(
        "RGB", size, bytes(rng.getrandbits(8) for _ in range(size[0] * size[1] * 3))
    )
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


def size_of(block: ImageBlock) -> tuple[int, int]:
    data = image_bytes(block)
    assert data is not None
    with Image.open(io.BytesIO(data)) as img:
        return img.size


@pytest.fixture
def engine() -> Engine:
    shared_server().clear_requests()
    return Engine(config_file=False, env_file=False, retries=0)


def test_path_bytes_pil_url_and_data_url(tmp_path: Path) -> None:
    png = noise((20, 10))
    path = tmp_path / "a.png"
    path.write_bytes(png)
    for source in (path, str(path), png, bytearray(png)):
        block = image_block(source)
        assert block.media_type == "image/png"
        assert image_bytes(block) == png
    jpeg = image_block(noise((20, 10), "JPEG"))
    assert jpeg.media_type == "image/jpeg"
    with Image.open(io.BytesIO(png)) as img:
        pil = image_block(img)
    assert pil.media_type == "image/png"
    assert size_of(pil) == (20, 10)
    url = image_block("https://example.com/cat.jpg")
    assert url.url == "https://example.com/cat.jpg"
    assert url.data is None
    data_url = f"data:image/png;base64,{base64.b64encode(png).decode()}"
    assert image_bytes(image_block(data_url)) == png


@pytest.mark.parametrize("bad", [b"not an image", 3.5, "/no/such/file.png"])
def test_what_is_not_an_image_is_refused_in_one_line(bad: object) -> None:
    with pytest.raises(LlmError) as info:
        image_block(bad)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert "\n" not in info.value.message


def test_a_figure_is_png_with_its_longest_side_bounded() -> None:
    big = plt.figure(figsize=(12, 8), dpi=200)  # 2400 x 1600 at its own dpi
    big.add_subplot().plot([1, 3, 2])
    block = image_block(big)
    assert block.media_type == "image/png"
    w, h = size_of(block)
    assert max(w, h) <= FIGURE_MAX_PX
    assert max(w, h) >= FIGURE_MAX_PX - 2
    small = plt.figure(figsize=(4, 3), dpi=100)  # 400 x 300: kept as it is
    small.add_subplot().plot([1, 2])
    assert size_of(image_block(small)) == (400, 300)
    plt.close("all")


def test_thumbnail_is_small() -> None:
    block = image_block(noise((640, 480)))
    thumb = thumbnail_data_url(block)
    assert thumb is not None
    assert thumb.startswith("data:image/jpeg;base64,")
    with Image.open(io.BytesIO(base64.b64decode(thumb.split(",", 1)[1]))) as img:
        assert max(img.size) == 96
    assert thumbnail_data_url(ImageBlock(url="https://example.com/x.png")) is None


def test_images_reach_the_provider_as_image_parts(engine: Engine, tmp_path: Path) -> None:
    png = noise((8, 8))
    c = engine.complete_sync("mock", "echo", prompt="look", images=[png, "https://e.com/x.png"])
    assert c.text == "look"
    parts = shared_server().requests[-1].body["messages"][-1]["content"]
    assert parts == [
        {"type": "text", "text": "look"},
        {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{base64.b64encode(png).decode()}"},
        },
        {"type": "image_url", "image_url": {"url": "https://e.com/x.png"}},
    ]


def test_chat_keeps_the_image_in_its_history(engine: Engine) -> None:
    chat = Chat("mock", "echo", engine=engine, live=False)
    chat.send("first", display=False, images=noise((8, 8)))
    chat.send("second", display=False)
    first = shared_server().requests[-1].body["messages"][0]["content"]
    assert [p["type"] for p in first] == ["text", "image_url"]


def test_recordings_hold_a_hash_reference_and_replay_matches(
    engine: Engine, tmp_path: Path
) -> None:
    png = noise((400, 300))
    cassette = tmp_path / "rec.json"
    with engine.recording(cassette):
        recorded = engine.complete_sync("mock", "echo", prompt="see", images=png)
    text = cassette.read_text()
    assert base64.b64encode(png).decode()[:100] not in text
    assert "<image sha256:" in text
    assert cassette.stat().st_size < len(png) / 20
    with engine.replaying(cassette, strict=True):
        replayed = engine.complete_sync("mock", "echo", prompt="see", images=png)
    assert replayed.text == recorded.text == "see"
    with engine.replaying(cassette, strict=True), pytest.raises(LlmError) as info:
        engine.complete_sync("mock", "echo", prompt="see", images=noise((40, 30)))
    assert info.value.code == ErrorCode.REPLAY_MISS  # another image is another request


def test_shrink_images_is_idempotent_and_leaves_other_text() -> None:
    png = noise((30, 30))
    b64 = base64.b64encode(png).decode()
    body = {"a": f"data:image/png;base64,{b64}", "b": [b64], "c": "x" * 400, "d": "short"}
    once = shrink_images(body)
    assert once["a"] == once["b"][0]
    assert once["a"].startswith("<image sha256:")
    assert once["c"] == "x" * 400
    assert once["d"] == "short"
    assert shrink_images(once) == once
    assert json.dumps(once).count("sha256") == 2
