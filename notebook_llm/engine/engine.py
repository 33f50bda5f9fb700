"""The engine: the public calls of the package, each a short delegation to the module that
does the job.

``Engine`` is what users and the upper layers (tools, chat, magics) hold. It owns one of each
part and wires them together; the parts know nothing of each other:

* adapters by name, loading, hot reload, unload and overrides: :mod:`notebook_llm.engine.routing.catalog`;
* provider routes: :mod:`notebook_llm.engine.routing.registry`, provider settings: :mod:`notebook_llm.engine.providers`;
* API keys, ``.env`` and the hint when one is missing: :mod:`notebook_llm.engine.credentials`;
* the request (:class:`~notebook_llm.engine.request.Request`, the one list of options, checked
  when it is built) and the :class:`~notebook_llm.core.protocol.GenerateOptions` an adapter
  receives: :mod:`notebook_llm.engine.request`;
* one guarded request and THE retry loop: :mod:`notebook_llm.engine.streaming`;
* record/replay taps (per engine, no globals): :mod:`notebook_llm.wire.tap`.

What stays here is the wiring of one request: the route, the provider settings, the key and
the transport it runs with.
Nothing here knows about notebooks; the magics and widgets consume the events it yields.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import aclosing
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from ..adapters.base import LlmAdapter
from ..core.background_loop import run_sync
from ..core.cancel import StopSignal
from ..core.completion import Completion, assemble
from ..core.errors import ErrorCode, LlmError
from ..core.protocol import Event, GenerateOptions, ModelInfo
from ..core.redaction import Secret
from .credentials import Credentials, key_hint
from .providers import FileConfig, ProviderConfig, load_file_config, resolve_provider_config
from .request import (
    Request,
    RequestOptions,
    build_options,
    check_reasoning,
    check_request,
    request_of,
)
from .routing.catalog import AdapterResolver, Catalog
from .routing.registry import AdapterHandle, Registry
from .streaming import RetryPolicy, attempts

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import httpx

    from ..core.timeouts import Timeouts
    from ..wire.tap import Recorder, Replayer
    from .routing.plugins import AdapterSource

    Tap = Recorder | Replayer

__all__ = ["AdapterResolver", "Engine", "Request"]


class Engine:
    """Routes requests to adapters and yields protocol events.

    >>> Engine().complete_sync(provider="mock", model="echo", prompt="hello").text
    'hello'
    """

    def __init__(
        self,
        *,
        config_file: Path | str | bool | None = None,
        retries: int = 2,
        retry_base: float = 0.5,
        retry_cap: float = 30.0,
        env_file: Path | str | bool | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        """``config_file=False`` ignores the user's config file (tests); ``retries`` is the number
        of extra attempts for retryable errors that happen before any event was yielded;
        ``transport`` carries this engine's HTTP requests (httpx-style; default: the network);
        ``timeouts``: each request's deadline and longest wait for an event (default
        ``notebook_llm.core.timeouts.DEFAULT_TIMEOUTS``; a request's ``timeouts=`` wins)."""
        self.registry = Registry()
        self._installing_plugins = False
        self.retries = retries
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self._rng = random.Random()
        self.catalog = Catalog()
        self._providers: dict[str, ProviderConfig] = {}
        self._provider_handles: dict[str, AdapterHandle] = {}
        #: The providers the plugins declared (bound to their routes on first use).
        self._declared: dict[str, ProviderConfig] = {}
        #: The adapters the plugins ship, by name (found by the built-in plugin's catalog).
        self.adapter_sources: dict[str, AdapterSource] = {}
        self.transport = transport
        self.timeouts = timeouts
        self._tap: Tap | None = None
        #: The session's engine (``notebook_llm.session_engine()``): its errors name it so.
        self.is_session_engine = False
        if config_file is False:
            self.file_config = FileConfig()
        else:
            self.file_config = load_file_config(
                Path(config_file) if isinstance(config_file, str | Path) else None
            )
        self.credentials = Credentials(env_file)
        from .routing.plugins import install_plugins

        # What plugins bind is fixed; what the session binds later, a re-run cell may bind again.
        self._installing_plugins = True
        try:
            install_plugins(self)
        finally:
            self._installing_plugins = False
        self.credentials.register_known(self.file_config, self._declared.values())

    # ------------------------------------------------------------------ adapters and routes

    def register_adapter(self, routes: Iterable[str] | str, adapter: LlmAdapter) -> AdapterHandle:
        """Bind provider ``routes`` to ``adapter`` (all or nothing); the adapter becomes known by
        its ``name`` too, so ``add_provider(adapter=name)`` can use it.

        Routes bound earlier in the session are taken over (re-running the cell that registered
        them); a plugin's route is a conflict (``DUPLICATE_ADAPTER``), and then nothing is bound."""
        handle = self._register(routes, adapter)
        for route in handle.routes:  # a route add_provider had set up loses its old settings
            self._providers.pop(route, None)
            self._provider_handles.pop(route, None)
        self.catalog.know(adapter)
        return handle

    def add_adapter(self, adapter: LlmAdapter, *, name: str | None = None) -> str:
        """Make ``adapter`` known by name (session-loaded adapters win over all others)."""
        return self.catalog.add(adapter, name=name)

    def add_adapter_source(self, name: str, source: AdapterSource) -> None:
        """Ship the adapter called ``name`` (a plugin's): a ``.lua`` file, an adapter, or a
        function that makes one, loaded on first use. A user's own file of that name wins."""
        self.adapter_sources[name] = source

    def add_adapter_resolver(self, resolver: AdapterResolver) -> None:
        """Add a fallback that finds adapters by name (used by the Lua adapter catalog)."""
        self.catalog.add_resolver(resolver)

    def adapter(self, name: str) -> LlmAdapter:
        """The adapter called ``name``: session-loaded or registered first, then resolvers."""
        try:
            return self.catalog.get(name)
        except LlmError as err:
            if err.code == ErrorCode.NO_ADAPTER and not self.is_session_engine:
                # The usual way here: a %%adapter cell loaded it into the session's engine,
                # and this is an Engine() of the user's own.
                err.message += (
                    "; an adapter loaded by a %%adapter cell is in the session's engine: "
                    f'bind it there with notebook_llm.session_engine().add_provider("{name}", '
                    f'adapter="{name}", ...)'
                )
            raise

    def load_adapter(
        self, path_or_source: str | Path, *, name: str | None = None, origin: str | None = None
    ) -> str:
        """Load a Lua adapter from a file path or from source text; returns its name.

        If an adapter of that name is already known and is a Lua adapter, it is hot-reloaded in
        place (providers using it switch at their next request); a failed load keeps the previous
        version active and raises ``LlmError(INVALID_ADAPTER)`` with the Lua message and line.
        """
        return self.catalog.load(path_or_source, name=name, origin=origin)

    def reload_adapter(self, name: str) -> LlmAdapter:
        """Re-read a file-backed Lua adapter (failure keeps the previous version)."""
        return self.catalog.reload(name)

    def unload_adapter(self, name: str) -> None:
        """Forget a session-loaded adapter and the provider routes that use it; an adapter that
        replaced a built-in (or user file, or a plugin's) one gives the original back."""
        adapter = self.catalog.unload(name)
        if adapter is None:
            return
        for route, held in self.registry.routes().items():
            if held is adapter:
                self.remove_provider(route)
                handle = self.registry.handle(route)
                if handle is not None:
                    handle()

    def adapter_names(self) -> set[str]:
        return self.catalog.names()

    # ------------------------------------------------------------------ providers

    def add_provider(
        self,
        name: str,
        *,
        adapter: str | LlmAdapter,
        base_url: str | None = None,
        model: str | None = None,
        api_key_env: str | None = None,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        extra_body: dict[str, Any] | None = None,
        needs_key: bool | None = None,
        models: Sequence[str] | None = None,
        prices: dict[str, tuple[float, float]] | None = None,
        max_tokens_field: str | None = None,
    ) -> AdapterHandle:
        """Register route ``name`` served by ``adapter`` with these connection settings.

        ``max_tokens_field`` names the body field that carries ``max_tokens`` (``"max_tokens"``
        for OpenAI-compatible servers, ``"max_completion_tokens"`` for OpenAI's own API);
        ``None`` keeps the adapter's choice.

        Adding a provider again under the same name replaces what the session defined before
        (re-running the cell); the name of a plugin's provider (``mock``, ``mock-direct``, an
        installed package's) is a conflict, ``LlmError(DUPLICATE_ADAPTER)``."""
        instance = adapter if isinstance(adapter, LlmAdapter) else self.adapter(adapter)
        adapter_name = adapter if isinstance(adapter, str) else instance.name
        config = ProviderConfig(
            name,
            adapter_name,
            base_url,
            model,
            api_key_env,
            Secret(api_key) if api_key else None,
            dict(headers or {}),
            dict(extra_body or {}),
            needs_key=(api_key_env is not None or api_key is not None)
            if needs_key is None
            else needs_key,
            models=list(models or []),
            prices=dict(prices or {}),
            max_tokens_field=max_tokens_field,
        )
        return self._bind_provider(config, instance)

    def declare_provider(self, config: ProviderConfig) -> None:
        """Declare a provider (a plugin's way: adapter, base URL, key variable, default model,
        models, prices, capabilities in one :class:`ProviderConfig`). Nothing is loaded now:
        the route is bound on its first use, after the config file and the environment have
        overlaid the declaration (``engine/providers.py``)."""
        source = config.source
        if source == "code" and self._installing_plugins:
            source = "plugin"
        self._declared[config.name] = replace(config, source=source)

    def declarations(self) -> dict[str, ProviderConfig]:
        """The declared providers, by name (the built-in ones and the plugins')."""
        return dict(self._declared)

    def _register(self, routes: Iterable[str] | str, adapter: LlmAdapter) -> AdapterHandle:
        if self._installing_plugins:
            return self.registry.register(routes, adapter, fixed=True)
        return self.registry.register(routes, adapter, replace=True)

    def _bind_provider(self, config: ProviderConfig, adapter: LlmAdapter) -> AdapterHandle:
        if self._installing_plugins:  # a plugin's provider with its adapter: declared and held
            config = replace(config, source="plugin")
            self._declared[config.name] = config
        handle = self._register([config.name], adapter)
        self._provider_handles.pop(config.name, None)
        self._providers[config.name] = config
        self._provider_handles[config.name] = handle
        return handle

    def remove_provider(self, name: str) -> None:
        handle = self._provider_handles.pop(name, None)
        if handle is not None:
            handle()
        self._providers.pop(name, None)

    def provider(self, name: str) -> ProviderConfig:
        """The configuration of provider ``name`` (preset and config-file providers are added on
        first use)."""
        self._ensure_route(name)
        config = self._providers.get(name)
        if config is None:  # a route registered with register_adapter, without settings
            adapter = self.registry.get(name)
            assert adapter is not None
            config = ProviderConfig(name, adapter.name, needs_key=False)
        return config

    def provider_names(self) -> list[str]:
        names = set(self._declared) | set(self.file_config.providers) | set(self.registry.routes())
        return sorted(names)

    def adapter_of(self, provider: str) -> LlmAdapter:
        """The adapter that serves ``provider`` (a preset or config-file provider is added on
        first use); ``LlmError(NO_ADAPTER)`` if there is none."""
        return self._ensure_route(provider)

    def _ensure_route(self, name: str) -> LlmAdapter:
        adapter = self.registry.get(name)
        if adapter is not None:
            return adapter
        config = resolve_provider_config(name, self.file_config, self._declared)
        if config is None and name in self.adapter_names():
            raise LlmError(
                f"{name!r} is an adapter, not a provider: bind it to a server first with "
                f'{self._called}.add_provider("{name}", adapter="{name}", base_url="https://...", '
                f'api_key_env="..."){self._whose}, or a [providers.{name}] table with '
                f'adapter = "{name}" and base_url in config.toml',
                ErrorCode.NO_ADAPTER,
                provider=name,
            )
        if config is None:
            also = (
                f"; a provider added to an Engine() of your own is not one of these: add it with "
                f'{self._called}.add_provider("{name}", ...){self._whose}'
                if self.is_session_engine
                else ""
            )
            raise LlmError(
                f"no provider or adapter route named {name!r}; known providers: "
                f"{', '.join(self.provider_names())}{also}",
                ErrorCode.NO_ADAPTER,
                provider=name,
            )
        instance = self.adapter(config.adapter)
        if self.registry.get(name) is None:
            self._bind_provider(config, instance)
        return instance

    @property
    def _called(self) -> str:
        """How a message names this engine: the session's by its public accessor."""
        return "notebook_llm.session_engine()" if self.is_session_engine else "engine"

    @property
    def _whose(self) -> str:
        return (
            " (the engine %%llm, Chat and map use; an Engine() you make is another one)"
            if self.is_session_engine
            else ""
        )

    # ------------------------------------------------------------------ keys

    def set_key(self, provider: str, key: str) -> None:
        """Use ``key`` for ``provider`` for this session only (kept in memory, never shown)."""
        self.credentials.set(provider, key)

    def has_key(self, provider: str) -> bool:
        return self.credentials.key_for(self.provider(provider)) is not None

    def key_hint(self, provider: str) -> str:
        """What to do to give ``provider`` a key (names the variable, never shows a value)."""
        return key_hint(provider, self.provider(provider))

    # ------------------------------------------------------------------ requests

    def _options(self, request: Request) -> tuple[LlmAdapter, GenerateOptions]:
        adapter = self._ensure_route(request.provider)
        config = self.provider(request.provider)
        msgs = check_request(request)
        api_key = self.credentials.require(config, replaying=self.is_replaying)
        options = build_options(
            config,
            msgs,
            request,
            api_key=api_key,
            make_transport=self._make_transport(),
            timeouts=request.timeouts or self.timeouts,
        )
        return adapter, options

    def request_options(self, request: Request) -> tuple[LlmAdapter, GenerateOptions]:
        """The adapter that serves ``request`` and the options it would receive (route,
        provider settings, key, this engine's transport), checked as :meth:`stream` checks
        them, with nothing sent. A provider's batch API builds each row's body from these
        (:mod:`notebook_llm.api.batch_api`)."""
        return self._options(request)

    def stream(
        self,
        provider: str | Request,
        model: str | None = None,
        **options: Unpack[RequestOptions],
    ) -> AsyncIterator[Event]:
        """Stream the events of one generation: of a :class:`Request`
        (``engine.stream(request)``), or of the one the keywords make
        (``engine.stream("mock", "echo", prompt="hi")``; the options are its fields).

        A bad option raises ``LlmError(INVALID_OPTIONS)`` here, when the request is built; an
        unknown keyword a ``TypeError`` that names the close ones. Other configuration problems
        raise ``LlmError`` at the first iteration, before any I/O (``NO_ADAPTER``,
        ``MISSING_CREDENTIAL``, ``UNSUPPORTED_REASONING_EFFORT``). Everything that goes wrong
        afterwards ends the stream with ``finish`` of kind ``error`` (or ``aborted`` after
        ``stop_signal.set()`` / a cancelled consumer), never a bare exception. Retryable errors
        that happen before the first event are retried with backoff, by the engine's one retry
        policy (``Engine(retries=, retry_base=, retry_cap=)``); ``retries`` overrides the count
        for this call only. ``stop_sequences``: strings the model stops before (``stop_signal``
        ends a running stream). ``schema``: a pydantic model, dataclass or JSON Schema dict the
        answer must follow (:mod:`notebook_llm.core.response_schema`); an answer that does not
        validate ends the stream with ``finish{error: SCHEMA_MISMATCH}``. ``images``: a path,
        bytes, PIL image, matplotlib Figure or URL (or a list of them) sent with the prompt
        (:mod:`notebook_llm.core.images`).
        """
        request = request_of(provider, model, options, "stream")

        async def prepare() -> tuple[LlmAdapter, GenerateOptions]:
            adapter, options = self._options(request)
            await check_reasoning(adapter, options)
            return adapter, options

        # The retry loop's generator IS the stream (no pass-through layer per event); it runs
        # prepare() at its first step, so a configuration error still raises from the first
        # iteration, as it did from an async-generator method.
        policy = self._retry_policy(request.retries)
        events = attempts(prepare, request.stop_signal, policy, False)
        if request.schema is None:
            return events
        from ..core.response_schema import check_events

        return check_events(events, request.schema)

    def _retry_policy(self, retries: int | None) -> RetryPolicy:
        """The engine's policy, with ``retries`` overriding the count for one call."""
        count = self.retries if retries is None else max(0, retries)
        return RetryPolicy(count, self.retry_base, self.retry_cap, self._rng)

    async def complete(
        self,
        provider: str | Request,
        model: str | None = None,
        **options: Unpack[RequestOptions],
    ) -> Completion:
        """Run one generation to the end and return the :class:`Completion`.

        Raises the stream's ``LlmError`` when it ends with an error or is aborted; the partial
        completion is attached to the error as ``err.details['completion']``. Takes what
        :meth:`stream` takes; a retryable error is retried even after some output (none was
        shown), within the same ``1 + retries`` requests.

        With ``schema=``, ``completion.parsed`` holds the validated answer (the model instance,
        the dataclass, or a dict for a JSON Schema); an answer that does not validate raises
        ``LlmError(SCHEMA_MISMATCH)`` (the raw text and the validation message are in its
        ``details``), after ``schema_retries`` more tries (default 0) that feed the message back.
        """
        request = request_of(provider, model, options, "complete")
        from ..core.response_schema import parse_into

        adapter, generate = self._options(request)
        await check_reasoning(adapter, generate)
        usage = None
        for attempt in range(1 + request.schema_retries):
            ready = _ready(adapter, generate)
            policy = self._retry_policy(request.retries)
            async with aclosing(attempts(ready, request.stop_signal, policy, True)) as evs:
                events = [ev async for ev in evs]
            completion = assemble(events)
            if usage is not None and completion.usage is not None:
                completion.usage = usage + completion.usage  # every try is paid for
            usage = completion.usage
            if request.schema is None or completion.error is not None:
                break
            mismatch = parse_into(completion, request.schema)
            if mismatch is None or attempt >= request.schema_retries:
                break
            from ..core.response_schema import retry_messages

            generate = replace(generate, messages=retry_messages(generate.messages, mismatch))
        completion.provider = request.provider
        completion.model = request.model or self.provider(request.provider).model
        if completion.error is not None:
            err = completion.error
            err.details["completion"] = completion
            if err.provider is None:
                err.provider = request.provider
            raise err
        return completion

    def complete_sync(
        self,
        provider: str | Request,
        model: str | None = None,
        **options: Unpack[RequestOptions],
    ) -> Completion:
        """:meth:`complete` from synchronous code, also inside a running loop (Jupyter).

        Ctrl-C / kernel interrupt stops the stream cleanly and raises ``LlmError('ABORTED')``.
        """
        request = request_of(provider, model, options, "complete_sync")
        stop = request.stop_signal or StopSignal()
        return run_sync(self.complete(replace(request, stop_signal=stop)), on_interrupt=stop.set)

    # ------------------------------------------------------------------ transport, record, replay

    @property
    def tap(self) -> Tap | None:
        """This engine's active recording or replay (``None`` when neither)."""
        return self._tap

    @property
    def is_replaying(self) -> bool:
        """Whether requests are answered from a recording (then no key is needed)."""
        return self._tap is not None and self._tap.replays

    def set_tap(self, tap: Tap | None) -> Tap | None:
        """Send this engine's requests through ``tap`` (a ``Recorder`` or ``Replayer`` of
        :mod:`notebook_llm.wire.tap`; ``None``: the engine's own transport again) and return the
        previous one. Other engines are not affected. :meth:`recording` and :meth:`replaying`
        are the ``with`` forms."""
        previous, self._tap = self._tap, tap
        return previous

    @contextlib.contextmanager
    def recording(self, path: str | Path) -> Iterator[Recorder]:
        """``with engine.recording(path):`` writes every HTTP exchange of this engine to
        ``path`` (no keys; see :mod:`notebook_llm.api.recording`)."""
        from ..wire.tap import Recorder

        with self._tapped(Recorder(path)) as recorder:
            yield recorder

    @contextlib.contextmanager
    def replaying(
        self, path: str | Path, *, strict: bool = False, chunk_delay: float = 0.0
    ) -> Iterator[Replayer]:
        """``with engine.replaying(path):`` answers this engine's requests from ``path``: no
        network, and providers that need a key run without one."""
        from ..wire.tap import Replayer

        with self._tapped(Replayer(path, strict=strict, chunk_delay=chunk_delay)) as replayer:
            yield replayer

    @contextlib.contextmanager
    def _tapped(self, tap: Any) -> Iterator[Any]:
        previous = self.set_tap(tap)
        try:
            yield tap
        finally:
            if self._tap is tap:
                self.set_tap(previous)

    def _make_transport(self) -> Callable[[], httpx.AsyncBaseTransport] | None:
        """What makes one request's transport (a fresh one per stream, as httpx clients close
        theirs); ``None`` for the adapter's default network transport."""
        tap, own = self._tap, self.transport
        if tap is not None:
            return lambda: tap.transport(own)
        if own is not None:
            return lambda: own
        return None

    async def list_models(self, provider: str) -> list[ModelInfo]:
        """The models of ``provider``: the adapter's list; for a server that lists them
        (``ProviderConfig.lists_models``: by default a provider on the ``openai`` adapter, not
        OpenAI's own) the server's own ``GET {base_url}/models``; else the configured
        ``models``."""
        adapter = self._ensure_route(provider)
        models = await adapter.list_models(provider)
        if models:
            return models
        config = self.provider(provider)
        if config.base_url and config.serves_model_list():
            from ..wire.models import fetch_openai_models

            try:
                served = await fetch_openai_models(
                    config.base_url,
                    provider=provider,
                    api_key=self.credentials.key_for(config),
                    headers=config.headers,
                    make_transport=self._make_transport(),
                    timeouts=self.timeouts,
                )
            except LlmError:
                if not config.models:
                    raise
                served = []
            if served:
                return served
        return [ModelInfo(m) for m in config.models]


def _ready(
    adapter: LlmAdapter, options: GenerateOptions
) -> Callable[[], Awaitable[tuple[LlmAdapter, GenerateOptions]]]:
    """A ``prepare`` for :func:`attempts` that hands over what is already prepared."""

    async def ready() -> tuple[LlmAdapter, GenerateOptions]:
        return adapter, options

    return ready
