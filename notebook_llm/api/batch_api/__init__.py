"""``map(..., batch_api=True)``: rows through a provider's own asynchronous batch API, at its
batch price (half the normal one), kept in the run's store so the same call collects them later.

OpenAI's Batch API (the Files API and ``/v1/batches``) and Anthropic's Message Batches are
spoken (:mod:`.openai`, :mod:`.anthropic`); each row's request is built by the provider's own
adapter and each answer mapped by it (:mod:`.codec`); the run's steps (:mod:`.jobs`) are kept
in two tables of the store (:mod:`.journal`); the HTTP goes through the wire layer
(:mod:`.http_calls`). ``docs/batch.md`` is the user's guide.
"""

from __future__ import annotations

from .jobs import BATCH_PRICE_FACTOR, BatchApi, check_batch_api, run_batch_api

__all__ = ["BATCH_PRICE_FACTOR", "BatchApi", "check_batch_api", "run_batch_api"]
