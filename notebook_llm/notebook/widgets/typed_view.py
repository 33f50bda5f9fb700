"""Static views of typed data: a typed answer's fields as a small table, and a turn's images
as thumbnails.

Both are plain outputs (no widget), so a saved notebook shows them without a kernel:

* :func:`typed_text` turns the answer of a ``schema=`` turn into a Markdown table of its fields
  (nested values as compact JSON);
* :class:`ImageStrip` is one ``text/html`` output of thumbnails (at most ``THUMBNAIL_PX`` on a
  side, JPEG) with a ``text/plain`` line naming each image; the full images are never stored.

Every string passes through ``redact``; model output is escaped.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from ...core.completion import Completion
from ...core.images import describe, shown_url, thumbnail_data_url
from ...core.protocol import Block, ImageBlock
from ...core.redaction import redact
from ...core.response_schema import fields_of

__all__ = ["ImageStrip", "typed_text"]

_CELL_LIMIT = 200


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    if len(text) > _CELL_LIMIT:
        text = text[: _CELL_LIMIT - 1] + "…"
    return html.escape(redact(text)).replace("|", "&#124;")


def typed_text(completion: Completion, text: str) -> str:
    """``text`` (the answer) as a field table when the completion holds a parsed answer (the
    raw JSON stays in ``completion.text``); any other answer is returned as it is."""
    fields = fields_of(completion.parsed) if completion.parsed is not None else None
    if not fields:
        return text
    rows = ["| field | value |", "|---|---|"]
    rows += [f"| **{_cell(k)}** | {_cell(v)} |" for k, v in fields.items()]
    return "\n".join(rows)


class ImageStrip:
    """A turn's images as one static output of thumbnails (see the module docstring)."""

    def __init__(self, blocks: Sequence[Block]) -> None:
        self.images = [b for b in blocks if isinstance(b, ImageBlock)]

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        tags = []
        for block in self.images:
            label = html.escape(redact(describe(block)))
            thumb = thumbnail_data_url(block)
            if thumb is None and block.url is not None and label.lower().startswith("http"):
                # the link has no credentials or query either: the saved notebook keeps it
                href = html.escape(redact(shown_url(block.url)).removesuffix("?..."))
                tags.append(f'<a href="{href}">{label}</a>')
            elif thumb is None:
                tags.append(f"<span>[{label}]</span>")
            else:
                tags.append(
                    f'<img src="{thumb}" alt="{label}" title="{label}" '
                    'style="max-height:96px;margin:2px;border:1px solid #8884">'
                )
        plain = ", ".join(redact(describe(b)) for b in self.images)
        return {
            "text/html": f'<div class="notebook-llm-images">{"".join(tags)}</div>',
            "text/plain": f"[images: {plain}]",
        }
