"""A Lua adapter as a codec of whole answers: options in, a non-streamed request out; a whole
answer body in, protocol events out. No HTTP: what sends the requests and reads the bodies is
the caller's (a provider's batch API, :mod:`notebook_llm.api.batch_api`, sends thousands of
these requests in one file and gets their answers back in another).

The request is the one :meth:`LuaAdapter.stream` would send for the same options, asked for
whole (``stream`` false, so ``transform_request`` builds the provider's non-streaming body); an
answer is mapped by the script's ``transform_response``, as a non-streamed response is
(:func:`~.hook_results.map_whole_body`). So a batch row and a live request of the same prompt
differ only in how they travel.

One Lua state serves many rows (:meth:`LuaAdapter.whole_body_codec`): making a state costs a
few milliseconds, more than building or mapping one row, and a batch has up to 100,000 rows.
A script that keeps state between hook calls therefore sees every row of the batch (the
built-in adapters keep none).
"""

from __future__ import annotations

from ...core.protocol import Event, GenerateOptions
from .hook_results import map_whole_body
from .provider_request import HttpRequest, aprepare_request
from .runtime import LuaSandbox

__all__ = ["WholeBodyCodec"]


class WholeBodyCodec:
    """Build whole-answer requests and map whole answers in one Lua state (see the module
    docstring). Made by :meth:`LuaAdapter.whole_body_codec`."""

    def __init__(self, sandbox: LuaSandbox, adapter: str) -> None:
        self._sandbox = sandbox
        #: The adapter's name, for error messages.
        self.adapter = adapter

    async def request(self, options: GenerateOptions) -> HttpRequest:
        """The URL, headers and body of one non-streamed request for ``options`` (the
        script's ``transform_request`` and ``build_headers``, the provider's settings)."""
        return await aprepare_request(self._sandbox, options, self.adapter, stream=False)

    def events(self, raw: bytes, options: GenerateOptions) -> list[Event]:
        """The events of one whole answer body (``transform_response``), as a non-streamed
        response of the same request is mapped."""
        return map_whole_body(self._sandbox, raw, provider=options.provider, adapter=self.adapter)
