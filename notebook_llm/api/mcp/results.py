"""An MCP tool result as the tool loop hands it on: the protocol's content, in its JSON form
(``CallToolResult`` as sent: ``content``, ``structuredContent``, ``isError``), to a
:class:`~notebook_llm.api.tool_calling.tools.ToolReply`. Pure: no SDK, no I/O, so a result read
back from a recording goes through the same path as a live one.

What the model gets, block by block, in the server's order:

* ``text``: the text;
* ``image``: the image itself (up to :data:`MAX_IMAGES` of at most :data:`MAX_IMAGE_BYTES`
  each), given to the model after the tool results, and a line in the text naming it;
* ``audio``, a ``resource_link``, an embedded ``resource``: a line saying what it is (an
  embedded text resource gives its text);
* ``structuredContent``: as JSON, unless a text block already holds the same value (servers
  are asked to send both; an SDK wraps a plain return value as ``{"result": value}``).

The text is cut at ``max_chars`` characters, and the cut is said in the text, so the model (and
the tool card) know the result is partial. ``isError`` makes the reply the tool's error.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from ...core.protocol import ImageBlock
from ..tool_calling.tools import ToolReply

__all__ = ["MAX_IMAGES", "MAX_IMAGE_BYTES", "reply_of"]

#: The most images of one result passed to the model.
MAX_IMAGES = 4
#: The largest image passed to the model (decoded bytes); a bigger one is named, not sent.
MAX_IMAGE_BYTES = 5 * 1024 * 1024
#: Media types an image block may have to be passed on as an image.
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def reply_of(result: Mapping[str, Any], *, max_chars: int, tool: str = "") -> ToolReply:
    """The reply for one ``CallToolResult`` in its JSON form (see the module docstring)."""
    parts: list[str] = []
    images: list[ImageBlock] = []
    content = result.get("content")
    blocks = content if isinstance(content, list) else []
    texts: list[str] = []
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            text = str(block.get("text", ""))
            texts.append(text)
            parts.append(text)
        elif kind == "image":
            parts.append(_image(block, images))
        else:
            parts.append(_other(block))
    structured = result.get("structuredContent")
    if structured is not None and not _said(texts, structured):
        try:
            parts.append(json.dumps(structured, ensure_ascii=False, default=str))
        except (RecursionError, ValueError):
            parts.append("[structured content nested too deeply to pass on]")
    text = "\n".join(p for p in parts if p)
    if not text and not images:
        text = "(the tool returned nothing)"
    return ToolReply(_cut(text, max_chars, tool), images, bool(result.get("isError")))


def _image(block: Mapping[str, Any], images: list[ImageBlock]) -> str:
    media = str(block.get("mimeType") or "image/png").lower()
    data = block.get("data")
    if not isinstance(data, str):
        return "[an image block without data]"
    size = len(data) * 3 // 4
    if media not in _IMAGE_TYPES:
        return f"[an image of type {media} ({size:,} bytes) that cannot be passed on]"
    if len(images) >= MAX_IMAGES:
        return f"[an image ({media}) not passed on: at most {MAX_IMAGES} per result]"
    if size > MAX_IMAGE_BYTES:
        return f"[an image ({media}, {size:,} bytes) too large to pass on (at most {MAX_IMAGE_BYTES:,})]"
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[an image ({media}) whose data is not base64]"
    images.append(ImageBlock(data=data, media_type=media))
    return f"[image {len(images)}: {media}, {size:,} bytes, attached after the tool results]"


def _other(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "audio":
        return f"[audio ({block.get('mimeType') or 'unknown type'}): not passed on]"
    if kind == "resource_link":
        name = block.get("name") or block.get("title") or ""
        return f"[resource link {name} {block.get('uri', '')}]".replace("  ", " ")
    if kind == "resource":
        resource = block.get("resource")
        if isinstance(resource, Mapping):
            uri = resource.get("uri", "")
            if isinstance(resource.get("text"), str):
                return f"[resource {uri}]\n{resource['text']}"
            return f"[resource {uri} ({resource.get('mimeType') or 'binary'}): not passed on]"
    return f"[a {kind!s} block: not passed on]"


def _said(texts: list[str], structured: Any) -> bool:
    """Whether the text blocks already hold the structured content: its JSON, or the one value
    an SDK wraps as ``{"result": value}``."""
    if isinstance(structured, Mapping) and set(structured) == {"result"}:
        value = structured["result"]
        if any(t == value or _same_json(t, value) for t in texts):
            return True
    return any(_same_json(t, structured) for t in texts)


def _same_json(text: str, value: Any) -> bool:
    """Whether ``text`` is the JSON of ``value`` (``"4"`` is ``4``, key order aside)."""
    try:
        return bool(json.loads(text) == value)
    except (ValueError, RecursionError):
        return False


def _cut(text: str, max_chars: int, tool: str) -> str:
    if len(text) <= max_chars:
        return text
    name = f"tool {tool!r}" if tool else "the tool"
    return (
        text[:max_chars]
        + f"\n[… {name} returned {len(text):,} characters; only the first {max_chars:,} are "
        "shown (max_result_chars)]"
    )
