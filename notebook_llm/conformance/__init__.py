"""The adapter conformance kit: replay recorded bodies and sample requests through a Lua adapter.

Engine-level (no notebook imports); used by ``%adapter test``, the playground widget,
``python -m notebook_llm check-adapter PATH --fixtures DIR [--expected FILE]`` and pytest
(:func:`assert_conforms`).

Response side: a recorded body file (``.sse``, ``.ndjson``, ``.json``; other names are sniffed)
is served to the adapter by an in-process ``httpx.MockTransport``, never the network, with the
content type of its framing and an HTTP status taken from a ``<file>.meta.json`` sidecar
(``{"status": 429, "content_type": ..., "headers": {...}}``) or from the name (``error_401_*``),
else 200. Streams (``.sse``/``.ndjson``) go through the adapter's real ``stream()`` path;
a 200 ``.json`` body goes through ``transform_response``, mapped by the adapter's own
non-stream path (:meth:`~notebook_llm.adapters.lua.lua_adapter.LuaAdapter.map_body`). The result is
the event list, :func:`~notebook_llm.validate_stream`'s verdict (rule and position), the
assembled :class:`~notebook_llm.Completion`, the script's ``log()`` lines, and a diff against an
expected result ``{text, reasoning, tool_calls: [{name, args}], usage, finish, error_code}``
when one is given (each key optional; only given keys are compared).

Warnings (:func:`payload_warnings`) catch a script that passes every rule yet loses the answer,
the mistake a truthy JSON-null sentinel caused in kernel scripts (``done = (fr ~= nil)`` read
every chunk as done): each payload of a 200 body is also run through the hook on its own, and
the kit warns when the script reports ``done`` (or a finish) while a later payload still carries
content, when payloads carried content and the script mapped none of it, or when output tokens
were counted but no text, reasoning or tool call came out. A warning names the hook and the
payload number (1-based, ``[DONE]`` not counted); ``check-adapter --strict`` fails on one.

Request side: :func:`request_cases` (text, system, multi-turn, tools, tool results, images) go
through ``transform_request`` (and ``build_headers``) and are captured as the HTTP request the
adapter would send: URL, headers (redacted) and JSON body.

The package, one job per module, each importing only the ones above it:

* :mod:`.fixtures` - finding and reading body files, recordings and expectations;
* :mod:`.replay` - running an adapter over one body, offline (the harness);
* :mod:`.requests` - the request probes and the HTTP request each one makes;
* :mod:`.payloads` - the warnings (a script that passes every rule yet loses the answer);
* :mod:`.report` - the verdict, the diff against an expectation, the text report;
* :mod:`.kit` - the entry points: :func:`replay_fixture`, :func:`check_adapter`,
  :func:`assert_conforms`, :func:`cli_check`.
"""

from __future__ import annotations

from .fixtures import (
    CONTENT_TYPES,
    EXPECTED_KEYS,
    Fixture,
    Framing,
    find_fixtures,
    fixtures_from_recording,
    is_recording,
    load_expected,
    load_fixture,
    load_fixtures,
)
from .kit import assert_conforms, check_adapter, cli_check, replay_fixture
from .payloads import payload_warnings
from .replay import collect_events
from .report import (
    ADAPTER_FAULTS,
    CheckReport,
    FieldDiff,
    FixtureResult,
    diff_completion,
    event_rows,
    render_text,
    settle,
    summarize,
)
from .requests import (
    SAMPLE_BASE_URL,
    SAMPLE_KEY,
    RequestCase,
    RequestResult,
    check_requests,
    request_cases,
)

__all__ = [
    "ADAPTER_FAULTS",
    "CONTENT_TYPES",
    "EXPECTED_KEYS",
    "SAMPLE_BASE_URL",
    "SAMPLE_KEY",
    "CheckReport",
    "FieldDiff",
    "Fixture",
    "FixtureResult",
    "Framing",
    "RequestCase",
    "RequestResult",
    "assert_conforms",
    "check_adapter",
    "check_requests",
    "cli_check",
    "collect_events",
    "diff_completion",
    "event_rows",
    "find_fixtures",
    "fixtures_from_recording",
    "is_recording",
    "load_expected",
    "load_fixture",
    "load_fixtures",
    "payload_warnings",
    "render_text",
    "replay_fixture",
    "request_cases",
    "settle",
    "summarize",
]
