"""The three hot routes, POST /v1/errors, /v1/errors/batch and /v1/classify, served in front of FastAPI.

Why not FastAPI routes: per call, FastAPI and Starlette pass a request through eight layers
(telemetry, server errors, body limit, exception handlers, an exit stack, the router, the
route's own Request and dependency solving); on one core that cost more than classifying a
typical report. `TriageLane` sits inside the request-id and HTTP-metrics middleware and
outside FastAPI: it answers these paths itself (body read with the size cap, parsed and
validated in one pydantic pass, bytes out, problem+json on any error) and hands every other
request to FastAPI. `openapi_paths` documents them in FastAPI's OpenAPI document.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from pydantic import TypeAdapter, ValidationError
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.body import parse_model, read_body
from service.api.deps import Services
from service.api.middleware import new_id
from service.api.problems import ProblemError, field_errors, internal_error, problem_response, problem_responses
from service.metrics import NO_PROVIDER, OTHER_PROVIDER
from service.models import (
    BatchRequest,
    BatchResponse,
    Classification,
    ErrorReport,
    NotificationOutcome,
    NotificationStatus,
)
from service.rules.engine import Ruleset
from service.triage import triage

log = logging.getLogger("errtriage.triage")

_JSON_HEADERS = [(b"content-type", b"application/json")]
_BOOL = TypeAdapter(bool)

Handler = Callable[[Services, bytes, Scope], Classification | BatchResponse]


def _body_bytes(model: Classification | BatchResponse) -> bytes:
    return model.__pydantic_serializer__.to_json(model)


def _provider_label(classification: Classification, ruleset: Ruleset) -> str:
    if classification.provider is None:
        return NO_PROVIDER
    return classification.provider if classification.provider in ruleset.providers else OTHER_PROVIDER


def _report(services: Services, ruleset: Ruleset, report: ErrorReport) -> Classification:
    """Triage one report with every side effect of /v1/errors: counters, notification, log line."""
    started = time.perf_counter()
    classification, error, _ = triage(report, ruleset, new_id())
    elapsed = time.perf_counter() - started
    metrics = services.metrics
    metrics.classify_seconds.observe(elapsed)
    metrics.error_count(classification.class_, classification.reason, _provider_label(classification, ruleset)).inc()
    if classification.rule is not None:
        metrics.rule_match_count(classification.rule).inc()
        services.store.count_match(classification.rule)
    classification.notification = _notify(services, ruleset, classification, error)
    if classification.decided_by != "rule" and services.unknowns is not None:
        services.unknowns.record(report, classification)  # a deque append: recorded off the request path
    if log.isEnabledFor(logging.INFO):
        log.info("classified", extra={
            "id": classification.id, "class": classification.class_, "reason": classification.reason,
            "provider": classification.provider, "rule": classification.rule, "source": report.source,
            "latency_ms": round(elapsed * 1000, 3), "notification": classification.notification.status.value,
        })
    return classification


_DISABLED = NotificationOutcome(status=NotificationStatus.disabled)  # frozen: one for every report


def _notify(services: Services, ruleset: Ruleset, classification: Classification, error: Any) -> NotificationOutcome:
    if services.notifier is None:  # create_app makes none when notify_enabled is off
        return _DISABLED
    return services.notifier.dispatch(classification, error, ruleset)  # type: ignore[no-any-return]


def report_error(services: Services, body: bytes, scope: Scope) -> Classification:
    return _report(services, services.store.current, parse_model(ErrorReport, body))


def report_batch(services: Services, body: bytes, scope: Scope) -> BatchResponse:
    batch = parse_model(BatchRequest, body)
    ruleset = services.store.current
    return BatchResponse(results=[_report(services, ruleset, report) for report in batch.errors])


def classify_error(services: Services, body: bytes, scope: Scope) -> Classification:
    explain = _explain_flag(scope["query_string"])
    report = parse_model(ErrorReport, body)
    ruleset = services.store.current
    classification, _, _ = triage(report, ruleset, new_id(), explain=explain)
    if explain and classification.explain is not None:
        classification.explain["notification"] = _route_preview(ruleset, classification, report)
    return classification


def _route_preview(ruleset: Ruleset, classification: Classification, report: ErrorReport) -> dict[str, Any]:
    """The route /v1/errors would take for this report (silences, recipients and throttle aside)."""
    route = ruleset.notify.route_for(classification, report) if ruleset.notify is not None else None
    if route is None:
        why = ("a learned fallback's verdict notifies only through routes with allow_fallback: true"
               if classification.decided_by == "fallback" else f"no route matches class {classification.class_}")
        return {"route": None, "channels": [], "why": why}
    return {"route": route.id, "channels": list(route.channels), "template": route.template,
            "throttle_seconds": route.throttle}


def _explain_flag(query: bytes) -> bool:
    """`?explain=` read as FastAPI would read a bool query parameter (true/1/yes/on...), else 422."""
    if not query:
        return False
    values = [value for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True) if name == "explain"]
    if not values:
        return False
    try:
        return _BOOL.validate_python(values[-1])
    except ValidationError as exc:
        errors = [{**error, "loc": ["query", "explain"]} for error in field_errors(exc)]
        raise ProblemError(422, "The request does not fit the schema.", errors) from exc


@dataclass(frozen=True, slots=True)
class LaneRoute:
    """What `scope["route"]` holds for a lane request: the HTTP metrics label it by `path`."""

    path: str
    handler: Handler


class TriageLane:
    """ASGI: the hot routes answered here, everything else passed to `app` (FastAPI)."""

    def __init__(self, app: ASGIApp, services: Services) -> None:
        self.app = app
        self.services = services
        self.routes = {path: LaneRoute(path, handler) for path, (handler, _, _, _) in _OPERATIONS.items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.routes.get(scope["path"]) if scope["type"] == "http" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        scope["route"] = route
        try:
            payload = await self._answer(route, scope, receive)
        except ClientDisconnect:
            return  # nobody to answer
        except ProblemError as exc:
            await problem_response(exc.status, exc.detail, exc.errors, exc.headers)(scope, receive, send)
            return
        except Exception:  # noqa: BLE001 - any bug is logged and answered with a 500 problem
            await internal_error(scope["path"])(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*_JSON_HEADERS, (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})

    async def _answer(self, route: LaneRoute, scope: Scope, receive: Receive) -> bytes:
        if scope["method"] != "POST":
            raise ProblemError(405, f"{route.path} takes POST.", headers={"Allow": "POST"})
        body = await read_body(scope, receive, self.services.settings.max_body_bytes)
        return _body_bytes(route.handler(self.services, body, scope))


_OPERATIONS: dict[str, tuple[Handler, str, str, str]] = {  # path -> handler, request, response, summary
    "/v1/errors": (report_error, "ErrorReport", "Classification", "Report an error: classify, count, notify"),
    "/v1/errors/batch": (report_batch, "BatchRequest", "BatchResponse", "Report up to 1000 errors; results in order"),
    "/v1/classify": (classify_error, "ErrorReport", "Classification", "Classify without side effects"),
}
_EXPLAIN_PARAMETER = {"name": "explain", "in": "query", "required": False,
                      "schema": {"type": "boolean", "default": False},
                      "description": "Add the rules tried, in order, and why the winner matched."}


def openapi_paths() -> dict[str, Any]:
    """The OpenAPI path items of the routes above; their schemas go under components (app.py)."""
    paths: dict[str, Any] = {}
    for path, (handler, request, response, summary) in _OPERATIONS.items():
        operation: dict[str, Any] = {
            "summary": summary,
            "operationId": handler.__name__,
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{request}"}}}},
            "responses": {
                "200": {"description": "Successful Response", "content": {"application/json": {
                    "schema": {"$ref": f"#/components/schemas/{response}"}}}},
                **{str(status): entry for status, entry in problem_responses(400, 413, 422).items()},
            },
        }
        if handler is classify_error:
            operation["parameters"] = [_EXPLAIN_PARAMETER]
        paths[path] = {"post": operation}
    return paths
