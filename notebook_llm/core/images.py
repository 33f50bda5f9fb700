"""Images from the notebook into a request: a path, bytes, a PIL image, a matplotlib Figure or an
http(s) URL, each turned into one :class:`~notebook_llm.core.protocol.ImageBlock`.

Every adapter then sends the block as its provider's own content block (the Lua adapters get the
contract's ``image_url`` part with a ``data:`` URL). What is kept where, so that saved notebooks
and recordings stay small:

* the request carries the whole image (base64), once;
* a notebook output shows only a thumbnail (:func:`thumbnail_data_url`, at most
  :data:`THUMBNAIL_PX` pixels on its longest side), never the image itself;
* a recording replaces each embedded image by a short reference (:func:`shrink_images`:
  ``<image sha256:... N bytes>``), the same on record and on replay, so a cassette holds no
  image data and still matches the request.

PIL and matplotlib are imported only when an object of theirs is passed (or a thumbnail is
made); without PIL a view says which image was sent instead of showing it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import io
import re
import sys
import urllib.parse
import warnings
from collections.abc import Iterator
from os import PathLike
from pathlib import Path
from typing import Any

from .errors import ErrorCode, LlmError
from .protocol import ImageBlock

__all__ = [
    "FIGURE_MAX_PX",
    "THUMBNAIL_PX",
    "image_block",
    "image_blocks",
    "shrink_images",
    "thumbnail_data_url",
]

#: A matplotlib Figure is rendered so that its longest side is at most this many pixels.
FIGURE_MAX_PX = 1024
#: Thumbnails in notebook outputs are at most this many pixels on their longest side.
THUMBNAIL_PX = 96
#: An image larger than this is refused (``INPUT_TOO_LARGE``): it is the largest any built-in
#: provider takes in one request (OpenAI and Gemini: 20 MB; Anthropic: 5 MB per image).
MAX_IMAGE_BYTES = 20 * 1024 * 1024
#: Pictures with more pixels than this get no thumbnail (a line naming them instead): PIL would
#: decode the whole picture (about 3 bytes a pixel) only to shrink it.
THUMBNAIL_MAX_PIXELS = 40_000_000
#: Strings at least this long are looked at by :func:`shrink_images` (a 1x1 PNG is ~90 chars).
_SHRINK_MIN = 256
_DATA_URL_RE = re.compile(r"^data:([\w.+-]+/[\w.+-]+);base64,(.*)$", re.DOTALL)
_BASE64_RE = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
_USERINFO_RE = re.compile(r"(?i)^(https?://)[^/?#@\s]+@")


def image_blocks(images: Any) -> list[ImageBlock]:
    """One block per image; ``images`` is one image or a list/tuple of them."""
    if images is None:
        return []
    if isinstance(images, list | tuple):
        return [image_block(i) for i in images]
    return [image_block(images)]


def image_block(obj: Any) -> ImageBlock:
    """One image as a block: see the module docstring for what ``obj`` may be."""
    if isinstance(obj, ImageBlock):
        return obj
    if isinstance(obj, str):
        if obj[:8].lower().startswith(("http://", "https://")):
            return ImageBlock(url=obj)
        m = _DATA_URL_RE.match(obj)
        if m:
            return _from_data_url(m.group(2))
        return _from_path(Path(obj))
    if isinstance(obj, PathLike):
        return _from_path(Path(obj))
    if isinstance(obj, bytes | bytearray | memoryview):
        return _from_bytes(bytes(obj), "the bytes given")
    if _is_figure(obj):
        try:
            png = figure_png(obj)
        except Exception as exc:  # matplotlib's own errors (an empty canvas, a bad artist)
            raise LlmError(
                f"images=: cannot draw the figure: {type(exc).__name__}: {exc}",
                ErrorCode.INVALID_OPTIONS,
            ) from None
        return _from_bytes(png, "the figure")
    if _is_pil(obj):
        return _from_bytes(_pil_bytes(obj), "the PIL image")
    raise LlmError(
        f"images= takes a path, bytes, a PIL image, a matplotlib Figure or an http(s) URL, not "
        f"{type(obj).__name__}",
        ErrorCode.INVALID_OPTIONS,
    )


def _from_data_url(payload: str) -> ImageBlock:
    """A ``data:`` URL's bytes, checked like any other bytes: its declared type is not trusted
    (an SVG with a script, an HTML page) and the type sent is the one the bytes have."""
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise LlmError(
            "images=: the data: URL does not hold base64 data", ErrorCode.INVALID_OPTIONS
        ) from None
    return _from_bytes(data, "the data: URL")


def _from_path(path: Path) -> ImageBlock:
    if path.exists() and not path.is_file():  # a directory, a device, a FIFO (would block)
        raise LlmError(f"images=: {str(path)!r} is not a file", ErrorCode.INVALID_OPTIONS)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_IMAGE_BYTES + 1)  # bounded: /dev/zero or a FIFO must not hang
    except OSError as exc:
        raise LlmError(
            f"images=: cannot read {str(path)!r}: {exc.strerror or exc}", ErrorCode.INVALID_OPTIONS
        ) from None
    return _from_bytes(data, repr(path.name))


def _too_large(what: str) -> LlmError:
    return LlmError(
        f"images=: {what} is over the {MAX_IMAGE_BYTES / 2**20:.0f} MB "
        "a provider takes; shrink it first (e.g. PIL's img.thumbnail((2048, 2048)))",
        ErrorCode.INPUT_TOO_LARGE,
    )


def _from_bytes(data: bytes, what: str) -> ImageBlock:
    if len(data) > MAX_IMAGE_BYTES:
        raise _too_large(what)
    media = sniff(data)
    if media is None:
        raise LlmError(
            f"images=: {what} is not a PNG, JPEG, GIF or WebP image", ErrorCode.INVALID_OPTIONS
        )
    return ImageBlock(data=base64.b64encode(data).decode("ascii"), media_type=media)


def sniff(data: bytes) -> str | None:
    """The media type from the first bytes (written by hand: the standard library's ``imghdr``
    is gone since Python 3.13 and PIL is optional); ``None`` for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _is_figure(obj: Any) -> bool:
    return type(obj).__module__.startswith("matplotlib") and hasattr(obj, "savefig")


def _is_pil(obj: Any) -> bool:
    pil = sys.modules.get("PIL.Image")
    return pil is not None and isinstance(obj, pil.Image)


def figure_png(fig: Any, max_px: int = FIGURE_MAX_PX) -> bytes:
    """The figure as PNG, at its own dpi unless that makes the longest side exceed ``max_px``."""
    width, height = fig.get_size_inches()
    dpi = min(float(fig.dpi), max_px / max(float(width), float(height), 1e-6))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _pil_bytes(img: Any) -> bytes:
    buf = io.BytesIO()
    fmt = img.format if img.format in ("PNG", "JPEG", "GIF", "WEBP") else "PNG"
    if fmt == "PNG" and img.mode not in ("1", "L", "LA", "P", "RGB", "RGBA"):
        img = img.convert("RGBA")
    img.save(buf, format=fmt)
    return buf.getvalue()


def image_bytes(block: ImageBlock) -> bytes | None:
    """The raw bytes of an embedded image (``None`` for a URL)."""
    if block.data is None:
        return None
    try:
        return base64.b64decode(block.data, validate=False)
    except (binascii.Error, ValueError):
        return None


def describe(block: ImageBlock) -> str:
    """One line naming an image without its data: ``image/png 640x480`` (the size in KB
    without PIL), or the URL."""
    if block.url is not None:
        return shown_url(block.url)
    data = image_bytes(block) or b""
    try:
        with _opened(data) as img:
            width, height = img.size
        return f"{block.media_type or 'image'} {width}x{height}"
    except Exception:  # no PIL, or an image it cannot read: say how big it is instead
        return f"{block.media_type or 'image'} {len(data) / 1024:.1f} KB"


def thumbnail_data_url(block: ImageBlock, px: int = THUMBNAIL_PX) -> str | None:
    """A small ``data:`` URL of the image for a view (``None`` without PIL, or for a URL)."""
    data = image_bytes(block)
    if data is None:
        return None
    try:
        import PIL.Image  # noqa: F401  (only to know PIL is there)
    except ImportError:
        return None
    try:
        with _opened(data) as img:
            if img.size[0] * img.size[1] > THUMBNAIL_MAX_PIXELS:
                return None  # not decoded: the caller names the picture instead
            img.thumbnail((px, px))
            small = img.convert("RGB") if img.mode not in ("RGB", "L") else img.copy()
    except Exception:  # an image PIL cannot read: no thumbnail, the caller describes it instead
        return None
    buf = io.BytesIO()
    small.save(buf, format="JPEG", quality=70)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


@contextlib.contextmanager
def _opened(data: bytes) -> Iterator[Any]:
    """The picture opened lazily by PIL (its header only), without PIL's warning about large
    pixel counts: the package decides itself what it decodes (``THUMBNAIL_MAX_PIXELS``)."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        with Image.open(io.BytesIO(data)) as img:
            yield img


def shown_url(url: str) -> str:
    """An image URL as views show it: no user name or password, no query or fragment (where
    signed URLs and ``?key=`` carry their credentials)."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        if parts.port is not None:
            host += f":{parts.port}"
    except ValueError:
        return "an image URL"
    more = "?..." if parts.query or parts.fragment else ""
    return f"{parts.scheme}://{host}{parts.path}{more}"


# ------------------------------------------------------------------------------ recordings


def shrink_images(obj: Any) -> Any:
    """``obj`` (a JSON value) with every embedded image (a ``data:image/...`` URL, or a long
    base64 string whose bytes are an image) replaced by ``<image sha256:HEX N bytes>``, and
    the ``user:password@`` of an http(s) URL by ``***@``.

    Idempotent, so a recorded request (stored shrunk) and a live one compare equal on replay.
    """
    if isinstance(obj, dict):
        return {k: shrink_images(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [shrink_images(v) for v in obj]
    if isinstance(obj, str) and "@" in obj[:300] and _USERINFO_RE.match(obj):
        return _USERINFO_RE.sub(r"\1***@", obj)  # an image URL's user:password, never recorded
    if isinstance(obj, str) and len(obj) >= _SHRINK_MIN:
        return _shrunk(obj)
    return obj


def _shrunk(text: str) -> str:
    m = _DATA_URL_RE.match(text)
    payload = m.group(2) if m and m.group(1).startswith("image/") else text
    if not _BASE64_RE.match(payload[:4096]) or len(payload) % 4:
        return text
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return text
    if sniff(data) is None:
        return text
    return f"<image sha256:{hashlib.sha256(data).hexdigest()[:16]} {len(data)} bytes>"
