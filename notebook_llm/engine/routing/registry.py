"""Routes -> adapters, all or nothing.

Who bound a route decides whether it may be bound again. A plugin's routes (the built-in
``mock`` providers, an installed package's) are *fixed*: registering over one is a conflict,
and a registration that meets one binds none of its routes. A route bound from the session
(``add_provider`` or ``register_adapter`` in a cell, a preset bound on first use) is not: a
registration with ``replace=True`` takes it over, which is what re-running a cell does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from ...adapters.base import LlmAdapter
from ...core.errors import ErrorCode, LlmError


class AdapterHandle:
    """Returned by :meth:`Registry.register`. Call it to dispose the routes."""

    def __init__(
        self, registry: Registry, routes: list[str], adapter: LlmAdapter, *, fixed: bool = False
    ) -> None:
        self._registry = registry
        self.routes = routes
        self.adapter = adapter
        #: Bound by a plugin: no later registration may take these routes over.
        self.fixed = fixed
        self.disposed = False

    def __call__(self) -> None:
        """Dispose the routes (idempotent)."""
        self._registry._dispose(self)

    def replace(self, routes: Iterable[str]) -> None:
        """Bind the adapter to ``routes`` instead, with the same checks (all or nothing)."""
        self._registry._replace(self, list(routes))

    def __repr__(self) -> str:
        state = "disposed" if self.disposed else ", ".join(self.routes)
        return f"<AdapterHandle {self.adapter.name}: {state}>"


class Registry:
    """Provider routes bound to adapters. Thread-safe."""

    def __init__(self) -> None:
        self._routes: dict[str, LlmAdapter] = {}
        self._handles: dict[str, AdapterHandle] = {}
        self._lock = threading.RLock()

    def _check(
        self,
        routes: list[str],
        adapter: object,
        allow: AdapterHandle | None = None,
        replace: bool = False,
    ) -> None:
        if not isinstance(adapter, LlmAdapter):
            raise LlmError(
                f"{adapter!r} is not an LlmAdapter (subclass notebook_llm.LlmAdapter)",
                ErrorCode.INVALID_ADAPTER,
            )
        if not routes:
            raise LlmError("register_adapter needs at least one route", ErrorCode.INVALID_ADAPTER)
        seen: set[str] = set()
        for route in routes:
            if not isinstance(route, str) or not route.strip():
                raise LlmError(f"invalid route name {route!r}", ErrorCode.INVALID_ADAPTER)
            if route in seen:
                raise LlmError(f"route {route!r} is listed twice", ErrorCode.DUPLICATE_ADAPTER)
            seen.add(route)
            holder = self._handles.get(route)
            if holder is None or holder is allow or (replace and not holder.fixed):
                continue
            if holder.fixed:
                raise LlmError(
                    f"provider {route!r} comes from a plugin (built in or installed) and "
                    "cannot be replaced; give yours another name",
                    ErrorCode.DUPLICATE_ADAPTER,
                )
            raise LlmError(
                f"route {route!r} is already served by adapter {holder.adapter.name!r}",
                ErrorCode.DUPLICATE_ADAPTER,
            )

    def register(
        self,
        routes: Iterable[str] | str,
        adapter: LlmAdapter,
        *,
        replace: bool = False,
        fixed: bool = False,
    ) -> AdapterHandle:
        """Bind ``routes`` to ``adapter``, all or nothing. ``replace=True`` takes over routes
        that a non-fixed handle holds (a re-run cell); a fixed route is a conflict either way.
        ``fixed=True`` marks the new routes as a plugin's."""
        route_list = [routes] if isinstance(routes, str) else list(routes)
        with self._lock:
            self._check(route_list, adapter, replace=replace)
            for route in route_list:
                old = self._handles.get(route)
                if old is not None:
                    self._release(old, route)
            handle = AdapterHandle(self, route_list, adapter, fixed=fixed)
            for route in route_list:
                self._routes[route] = adapter
                self._handles[route] = handle
            return handle

    def _release(self, handle: AdapterHandle, route: str) -> None:
        """Take ``route`` away from ``handle`` (disposed once it holds no route)."""
        self._routes.pop(route, None)
        self._handles.pop(route, None)
        handle.routes = [r for r in handle.routes if r != route]
        if not handle.routes:
            handle.disposed = True

    def _dispose(self, handle: AdapterHandle) -> None:
        with self._lock:
            if handle.disposed:
                return
            for route in handle.routes:
                if self._handles.get(route) is handle:
                    del self._routes[route]
                    del self._handles[route]
            handle.disposed = True

    def _replace(self, handle: AdapterHandle, routes: list[str]) -> None:
        with self._lock:
            if handle.disposed:
                raise LlmError("this adapter handle was disposed", ErrorCode.INVALID_ADAPTER)
            self._check(routes, handle.adapter, allow=handle)
            for route in handle.routes:
                self._routes.pop(route, None)
                self._handles.pop(route, None)
            for route in routes:
                self._routes[route] = handle.adapter
                self._handles[route] = handle
            handle.routes = routes

    def get(self, route: str) -> LlmAdapter | None:
        return self._routes.get(route)

    def handle(self, route: str) -> AdapterHandle | None:
        return self._handles.get(route)

    def routes(self) -> dict[str, LlmAdapter]:
        with self._lock:
            return dict(self._routes)
