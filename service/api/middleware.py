"""Pure ASGI middleware: request ids (taken or made, always returned) and HTTP request metrics."""

from __future__ import annotations

import itertools
import os
import re
import time

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.logs import request_id
from service.metrics import Children

_VALID_ID = re.compile(rb"^[A-Za-z0-9._:-]{1,128}$")


class _Ids:
    """32 hex digits: 64 random bits drawn once per process (and again in a forked child), then a
    counter. Unique across replicas and restarts without a getrandom syscall per request
    (os.urandom was ~4% of a request's samples under load); a request id need not be secret."""

    def __init__(self) -> None:
        self.reset()
        os.register_at_fork(after_in_child=self.reset)

    def reset(self) -> None:
        self.prefix = os.urandom(8).hex()
        self.counter = itertools.count()

    def next(self) -> str:
        return f"{self.prefix}{next(self.counter):016x}"


new_id = _Ids().next


class RequestMiddleware:
    """Request ids (taken from `x-request-id` or made, always returned) and HTTP request metrics,
    in one layer: each layer costs a coroutine and a send wrapper per request.

    Metrics are per route template (the route FastAPI or the triage lane already matched, so
    label values are bounded by the routes; unmatched paths count as one `unmatched`). A
    prometheus-fastapi-instrumentator replacement: it matched every route a second time, ~30%
    of a /healthz call."""

    def __init__(self, app: ASGIApp, registry: CollectorRegistry | None, skip: tuple[str, ...] = ("/metrics",)) -> None:
        self.app = app
        self.skip = skip
        self.requests = Counter("errtriage_http_requests", "HTTP requests by method, route and status.",
                                ["method", "handler", "status"], registry=registry)
        self.latency = Histogram("errtriage_http_request_duration_seconds", "HTTP request latency by route.",
                                 ["method", "handler"], registry=registry,
                                 buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5))
        self.request_count = Children(self.requests)
        self.latency_of = Children(self.latency)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == b"x-request-id"), None)
        rid = given if given is not None and _VALID_ID.match(given) else new_id().encode()
        token = request_id.set(rid.decode())
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid)]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            request_id.reset(token)
            if scope["path"] not in self.skip:
                self._count(scope, status, time.perf_counter() - started)

    def _count(self, scope: Scope, status: int, elapsed: float) -> None:
        handler = getattr(scope.get("route"), "path", None) or "unmatched"
        method = scope["method"] if scope["method"] in _METHODS else "other"
        self.request_count(method, handler, str(status)).inc()
        self.latency_of(method, handler).observe(elapsed)


_METHODS = frozenset({"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"})
