"""The HTTP layer: the httpx client on aiohttp, bounded body decoding, SSE and NDJSON framing,
HTTP errors as ``LlmError``, deadlines, request slots, and record/replay taps.

It knows the wire, not providers: it imports only :mod:`notebook_llm.core`.
"""
