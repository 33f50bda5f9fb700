"""The HTTP layer: the one exchange every request goes through (:mod:`.exchange`), the codec
interface an HTTP adapter implements (:mod:`.codec`), the httpx client on aiohttp, bounded body
decoding, SSE and NDJSON framing, HTTP and transport errors as ``LlmError``, deadlines, request
slots, response watching, and record/replay taps.

It knows the wire, not providers: it imports only :mod:`notebook_llm.core`.
"""
