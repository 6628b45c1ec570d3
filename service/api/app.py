"""The composition root: settings in, a wired FastAPI app out. No module-level singletons."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from prometheus_client import CollectorRegistry
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.body import refuse_declared_over
from service.api.console import install_console
from service.api.deps import Services
from service.api.middleware import RequestMiddleware
from service.api.notify_routes import router as notify_router
from service.api.problems import ProblemError, install_handlers, problem_response
from service.api.routes import router
from service.api.triage_routes import TriageLane, openapi_paths
from service.errors import RulesInvalid
from service.metrics import Metrics
from service.models import BatchRequest, BatchResponse, Classification, ErrorReport, Problem
from service.notify.config import build_notify
from service.notify.pipeline import Notifier
from service.rules.store import RuleStore
from service.settings import Settings
from service.unknowns.recorder import Recorder, build_inbox

log = logging.getLogger("errtriage.app")
_TASK_STOP_SECONDS = 5.0
_TRAINING_STOP_SECONDS = 30.0


def _install_sighup(loop: asyncio.AbstractEventLoop, store: RuleStore, tasks: set[asyncio.Task[Any]]) -> None:
    async def _reload() -> None:
        try:
            await store.reload()
        except RulesInvalid as exc:  # counted and logged in detail by the store
            log.warning("SIGHUP reload refused", extra={"error_count": len(exc.errors)})

    def _on_hup() -> None:
        task = loop.create_task(_reload())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread / no signals
        loop.add_signal_handler(signal.SIGHUP, _on_hup)


def _lifespan(services: Services) -> Any:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # What is loaded so far (modules, settings) lives as long as the process: load_now freezes
        # it with the ruleset, out of the cyclic GC's sight (a full collection over it took ~85 ms
        # with the shipped tables, ~400 ms with 10,000 more rules: a stall on every one). No
        # collection first: it took ~60 ms of every start to find ~150 garbage objects.
        services.store.load_now()
        stop = asyncio.Event()
        tasks: set[asyncio.Task[Any]] = set()
        if services.settings.reload_rules:
            tasks.add(asyncio.create_task(services.store.watch(stop)))
        _install_sighup(asyncio.get_running_loop(), services.store, tasks)
        if services.notifier is not None:
            await services.notifier.start(lambda: services.store.current)
        services.unknowns.start()
        try:
            yield
        finally:
            stop.set()
            if services.notifier is not None:
                await services.notifier.stop(services.settings.shutdown_grace_seconds)
            await services.unknowns.stop(min(services.settings.shutdown_grace_seconds, _TASK_STOP_SECONDS))
            for task in list(tasks):
                task.cancel()
            if tasks:  # bounded: the file watcher's thread may take a moment to see the stop
                await asyncio.wait(tasks, timeout=_TASK_STOP_SECONDS)
            await asyncio.to_thread(services.store.stop_training, _TRAINING_STOP_SECONDS)

    return lifespan


def _openapi(app: FastAPI) -> Any:
    """The generated document, plus the raw ASGI routes' paths and the schemas they use."""

    def build() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        schema["paths"] = {**openapi_paths(), **schema["paths"]}
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model, mode in _DOCUMENTED_MODELS:
            generated = model.model_json_schema(ref_template="#/components/schemas/{model}", mode=mode)
            components.update(generated.pop("$defs", {}))
            components[model.__name__] = generated
        app.openapi_schema = schema
        return schema

    return build


_DOCUMENTED_MODELS: tuple[tuple[type[BaseModel], JsonSchemaMode], ...] = (
    (ErrorReport, "validation"), (BatchRequest, "validation"), (Problem, "serialization"),
    (Classification, "serialization"), (BatchResponse, "serialization"),
)


class ErrtriageApp(FastAPI):
    """FastAPI behind errtriage's own front: request ids and HTTP metrics around every request,
    then the triage lane (triage_routes.py), then FastAPI's stack for everything else."""

    front: ASGIApp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.front(scope, receive, send)

    async def serve_fastapi(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":  # a body declared over the limit is refused before any route runs
            try:                     # (an admin check answering first would leave it unread: a reset)
                await refuse_declared_over(scope, receive, self.state.services.settings.max_body_bytes)
            except ProblemError as exc:
                await problem_response(exc.status, exc.detail, exc.errors, exc.headers)(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


NotifierFactory = Callable[[Settings, Metrics], Any]


def create_app(settings: Settings, registry: CollectorRegistry | None = None,
               notifier_factory: NotifierFactory | None = None) -> ErrtriageApp:
    """Wire everything. `notifier_factory` is the seam tests use to inject a clock or an HTTP transport."""
    registry = registry if registry is not None else CollectorRegistry()
    metrics = Metrics(registry)
    store = RuleStore(settings.rules_dir, metrics, notify_builder=build_notify,
                      fallback_min_confidence=settings.fallback_threshold,
                      regex_scanner=settings.regex_scanner == "on")
    factory = notifier_factory or Notifier
    notifier = factory(settings, metrics) if settings.notify_enabled else None
    unknowns = Recorder(build_inbox(settings), settings.unknowns_buffer_size)
    services = Services(settings=settings, metrics=metrics, registry=registry, store=store, notifier=notifier,
                        unknowns=unknowns)
    app = ErrtriageApp(
        docs_url=None,  # console.py serves /docs with Swagger UI's assets from the package, not a CDN
        title="errtriage",
        version="0.1.0",
        description="Classify raw errors, advise recovery, notify, count. See DESIGN.md for the contract.",
        lifespan=_lifespan(services),
    )
    app.state.services = services
    install_handlers(app)
    app.include_router(router)
    app.include_router(notify_router)
    install_console(app)
    app.front = RequestMiddleware(TriageLane(app.serve_fastapi, services), registry=registry)
    app.openapi = _openapi(app)  # type: ignore[method-assign]
    return app
