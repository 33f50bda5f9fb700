"""An ipywidgets playground for one Lua adapter: edit, reload, see the request and the response.

``AdapterPlayground(adapter)`` shows:

* an editor (``Textarea``) with the script and a Reload button; a failed reload keeps the
  previous good version active and shows the error with the Lua line in context;
* a sample request (the conformance kit's cases) and the HTTP request the adapter makes for it
  (URL, redacted headers, JSON body);
* a response pane: a recorded fixture body, a live call to the loopback mock server, or a live
  call to a configured provider; it shows the event stream as a table, ``validate_stream``'s
  verdict and the assembled result.

Everything is plain widget state (``.value`` of HTML/Textarea widgets), so it is tested without a
browser; every displayed string is redacted.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from ...adapters.lua.lua_adapter import LuaAdapter
from ...conformance import (
    CheckReport,
    FixtureResult,
    check_requests,
    collect_events,
    event_rows,
    find_fixtures,
    replay_fixture,
    request_cases,
    settle,
    summarize,
)
from ...core.background_loop import run_sync
from ...core.completion import assemble
from ...core.errors import ErrorCode, LlmError
from ...core.protocol import Event
from ...core.redaction import redact, shorten
from ...engine.engine import Engine
from ...engine.routing.lua_files import ADAPTER_TEMPLATE as TEMPLATE
from .adapter_view import Rich, error_view, html_table, report_html

__all__ = ["MOCK", "AdapterPlayground"]

#: The response-source value for a live call to the loopback mock server.
MOCK = "live: mock server"
_PROVIDER = "live: provider "


class AdapterPlayground:
    """The playground (see the module docstring). ``.widget`` is the root ``VBox``.

    ``adapter``: a :class:`LuaAdapter` (reloads happen in place, so an engine holding it sees
    them), the name of an adapter in ``engine``, a ``.lua`` path, or ``None`` for the template.
    ``fixtures``: recorded bodies (files or folders) offered in the response dropdown.
    ``provider``: a configured provider for live calls (its route's adapter is used).
    """

    def __init__(
        self,
        adapter: LuaAdapter | str | Path | None = None,
        *,
        engine: Engine | None = None,
        fixtures: Sequence[str | Path] = (),
        provider: str | None = None,
    ) -> None:
        self.engine = engine
        self.provider = provider
        self.adapter = self._resolve(adapter)
        self.cases = {c.name: c for c in request_cases()}
        self.fixture_paths = {p.name: p for p in find_fixtures(fixtures)}
        self.last_result: FixtureResult | None = None

        self.editor = widgets.Textarea(
            value=self.adapter.source, layout=widgets.Layout(width="100%", height="320px")
        )
        self.reload_button = widgets.Button(description="Reload", icon="refresh")
        self.status = widgets.HTML()
        self.error_panel = widgets.HTML()
        self.request_choice = widgets.Dropdown(options=list(self.cases), description="request")
        self.request_view = widgets.HTML()
        sources = [*self.fixture_paths, MOCK] + ([_PROVIDER + provider] if provider else [])
        self.response_choice = widgets.Dropdown(options=sources, description="response")
        self.run_button = widgets.Button(description="Run", icon="play")
        self.result_view = widgets.HTML()
        self.events_view = widgets.HTML()

        self.reload_button.on_click(lambda _b: self.reload())
        self.run_button.on_click(lambda _b: self.run())
        self.request_choice.observe(lambda _c: self.show_request(), names="value")

        self.widget = widgets.VBox(
            [
                widgets.HBox([self.reload_button, self.status]),
                self.editor,
                self.error_panel,
                self.request_choice,
                self.request_view,
                widgets.HBox([self.response_choice, self.run_button]),
                self.result_view,
                self.events_view,
            ]
        )
        self._set_status(f"{self.adapter.name} {self.adapter.version}")
        self.show_request()

    def _resolve(self, adapter: LuaAdapter | str | Path | None) -> LuaAdapter:
        if isinstance(adapter, LuaAdapter):
            return adapter
        if adapter is None:
            return LuaAdapter.from_source(
                TEMPLATE.read_text("utf-8").replace("{{NAME}}", "playground"), origin="widget"
            )
        if self.engine is not None and isinstance(adapter, str) and not adapter.endswith(".lua"):
            found = self.engine.adapter(adapter)
            if not isinstance(found, LuaAdapter):
                raise LlmError(
                    f"adapter {adapter!r} is not a Lua adapter", ErrorCode.INVALID_ADAPTER
                )
            return found
        return LuaAdapter.from_file(adapter)

    def _set_status(self, text: str, ok: bool = True) -> None:
        color = "#070" if ok else "#c00"
        self.status.value = f"<span style='color:{color}'>{html.escape(redact(text))}</span>"

    # ------------------------------------------------------------------ actions

    def reload(self) -> bool:
        """Reload the editor's script; on failure keep the previous version and show why."""
        try:
            self.adapter.reload(self.editor.value)
        except LlmError as err:
            note = f"kept the previous version ({self.adapter.version or 'unversioned'})"
            self.error_panel.value = error_view(err, self.editor.value, note=note).html or ""
            self._set_status(f"reload failed: {err.code}", ok=False)
            return False
        self.error_panel.value = ""
        self._set_status(f"reloaded {self.adapter.name} {self.adapter.version}")
        self.show_request()
        return True

    def show_request(self) -> None:
        """The selected sample request as the adapter sends it."""
        case = self.cases[str(self.request_choice.value)]
        result = check_requests(self.adapter, [case])[0]
        if result.error is not None:
            self.request_view.value = error_view(result.error, self.adapter.source).html or ""
            return
        hdrs = "\n".join(f"{k}: {v}" for k, v in result.headers.items())
        text = f"{result.method} {result.url}\n{hdrs}\n\n{result.body_json()}"
        self.request_view.value = f"<pre>{html.escape(redact(text))}</pre>"

    def run(self) -> FixtureResult:
        """Fill the response pane from the selected source; returns the result shown."""
        choice = str(self.response_choice.value)
        if choice in self.fixture_paths:
            result = replay_fixture(self.adapter, self.fixture_paths[choice])
        else:
            result = self._live(choice)
        self.last_result = result
        report = CheckReport(self.adapter.name, self.adapter.version, fixtures=[result])
        self.result_view.value = Rich("", report_html(report)).html or ""
        self.events_view.value = _events_table(result.events)
        return result

    def _live(self, choice: str) -> FixtureResult:
        case = self.cases[str(self.request_choice.value)]
        result = FixtureResult(choice, "live", 200)
        if choice == MOCK:
            from ...adapters.mock.shared import shared_server

            endpoint = str(self.adapter.meta.get("endpoint", ""))
            root = shared_server().url
            base = root if endpoint.startswith(("/v1/", "/api/")) else root + "/v1"
            options = replace(case.options, base_url=base, model="echo", api_key=None)
            events, error = run_sync(collect_events(self.adapter, options))
        else:
            if self.engine is None or self.provider is None:
                raise LlmError(
                    "a live provider call needs engine= and provider=", ErrorCode.INVALID_OPTIONS
                )
            events, error = run_sync(self._provider_events(case.options))
        return settle(result, events, error)

    async def _provider_events(self, options: Any) -> tuple[list[Event], LlmError | None]:
        assert self.engine is not None
        assert self.provider is not None
        events: list[Event] = []
        try:
            async for ev in self.engine.stream(
                self.provider, messages=options.messages, system=options.system
            ):
                events.append(ev)
        except LlmError as err:
            return events, err
        return events, None

    def _ipython_display_(self) -> None:
        from .present import display_widget

        # Interactive by nature, so it stays a widget; a saved notebook shows this line instead.
        name = getattr(self.adapter, "name", "adapter")
        display_widget(
            self.widget, redact(f"Adapter playground for {name}: run the cell to use it again")
        )


def _events_table(events: Sequence[Event]) -> str:
    rows = [[str(p), t, i, shorten(d, 200)] for p, t, i, d in event_rows(events)]
    return (
        html_table(["#", "event", "index", "detail"], rows)
        + f"<div>{html.escape(redact(summarize(assemble(events))))}</div>"
    )
