"""Wire formats of the mock server: request normalisation and per-provider renderers.

Three formats are spoken, imitating recorded provider bodies: ``"openai"`` (chat completions,
SSE), ``"anthropic"`` (messages API, SSE with ``event:`` lines) and ``"ollama"`` (``/api/chat``
NDJSON). One job per module, each importing only the ones above it:

* :mod:`.frames` - format names, content types, :class:`Frame` and the SSE/NDJSON encoders;
* :mod:`.normalize` - a request body of any format -> the OpenAI-chat-like dict the models take;
* :mod:`.render` - a reply as each provider streams it (frames) or returns it (a JSON body);
* :mod:`.error_bodies` - HTTP error bodies and faulty frames (in-stream error, cut, oversized).

The server uses this package as one namespace (``wire.stream_frames(...)``); the names below are
its whole public surface.
"""

from __future__ import annotations

from .error_bodies import ErrorKind, error_body, error_frame, malformed_frame, oversized_frame
from .frames import CONTENT_TYPES, Format, Frame, FrameKind
from .normalize import is_stream, to_chat_request
from .render import json_body, models_list, stream_frames

__all__ = [
    "CONTENT_TYPES",
    "ErrorKind",
    "Format",
    "Frame",
    "FrameKind",
    "error_body",
    "error_frame",
    "is_stream",
    "json_body",
    "malformed_frame",
    "models_list",
    "oversized_frame",
    "stream_frames",
    "to_chat_request",
]
