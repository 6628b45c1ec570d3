"""The three hot routes, POST /v1/errors, /v1/errors/batch and /v1/classify, as raw ASGI endpoints.

Why not FastAPI routes: per call, FastAPI builds a Request, solves dependencies inside two
exit stacks and wraps exceptions a second time; on one core that cost 2.3x the whole
classification of a typical report. These endpoints sit in the same router (so the
request-id and HTTP-metrics middleware and the problem+json handlers apply unchanged: a
ProblemError raised here is answered by them), read the body with the size cap, parse and
validate it in one pydantic pass, and answer with bytes. `openapi_paths` documents them.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from pydantic import TypeAdapter, ValidationError
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from service.api.body import parse_model, read_body
from service.api.deps import Services
from service.api.problems import ProblemError, field_errors, problem_responses
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
_EXCLUDE_UNSET = ("explain", "notification")
_BOOL = TypeAdapter(bool)

Handler = Callable[[Services, bytes, Scope], Classification | BatchResponse]


def _body_bytes(model: Classification | BatchResponse) -> bytes:
    return model.model_dump_json(exclude=_exclusions(model)).encode()


def _exclusions(model: Classification | BatchResponse) -> Any:
    """`explain` and `notification` appear only where they apply (not as nulls)."""
    if isinstance(model, Classification):
        return {name for name in _EXCLUDE_UNSET if getattr(model, name) is None}
    return {"results": {i: _exclusions(r) for i, r in enumerate(model.results)}}


def _provider_label(classification: Classification, ruleset: Ruleset) -> str:
    if classification.provider is None:
        return NO_PROVIDER
    return classification.provider if classification.provider in ruleset.providers else OTHER_PROVIDER


def _report(services: Services, ruleset: Ruleset, report: ErrorReport) -> Classification:
    """Triage one report with every side effect of /v1/errors: counters, notification, log line."""
    started = time.perf_counter()
    classification, error, _ = triage(report, ruleset, uuid.uuid4().hex)
    elapsed = time.perf_counter() - started
    metrics = services.metrics
    metrics.classify_seconds.observe(elapsed)
    metrics.errors.labels(classification.class_, classification.reason, _provider_label(classification, ruleset)).inc()
    if classification.rule is not None:
        metrics.rule_matches.labels(classification.rule).inc()
        services.store.count_match(classification.rule)
    classification.notification = _notify(services, ruleset, classification, error)
    if log.isEnabledFor(logging.INFO):
        log.info("classified", extra={
            "id": classification.id, "class": classification.class_, "reason": classification.reason,
            "provider": classification.provider, "rule": classification.rule, "source": report.source,
            "latency_ms": round(elapsed * 1000, 3), "notification": classification.notification.status.value,
        })
    return classification


def _notify(services: Services, ruleset: Ruleset, classification: Classification, error: Any) -> NotificationOutcome:
    if not services.settings.notify_enabled:
        return NotificationOutcome(status=NotificationStatus.disabled)
    if services.notifier is None or ruleset.notify is None:
        return NotificationOutcome(status=NotificationStatus.none)
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
    classification, _, _ = triage(report, services.store.current, uuid.uuid4().hex, explain=explain)
    return classification


def _explain_flag(query: bytes) -> bool:
    """`?explain=` read as FastAPI would read a bool query parameter (true/1/yes/on...), else 422."""
    if not query:
        return False
    values = [value for name, value in parse_qsl(query.decode("latin-1")) if name == "explain"]
    if not values:
        return False
    try:
        return _BOOL.validate_python(values[-1])
    except ValidationError as exc:
        errors = [{**error, "loc": ["query", "explain"]} for error in field_errors(exc)]
        raise ProblemError(422, "The request does not fit the schema.", errors) from exc


class _Endpoint:
    """An ASGI app (a class, not a function: Starlette would wrap a function in its Request machinery)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        services: Services = scope["app"].state.services
        body = await read_body(scope, receive, services.settings.max_body_bytes)
        payload = _body_bytes(self.handler(services, body, scope))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*_JSON_HEADERS, (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})


def triage_routes() -> list[Route]:
    """Placed before the FastAPI routes: a hot path is matched first."""
    return [Route(path, _Endpoint(handler), methods=["POST"], include_in_schema=False)
            for path, (handler, _, _, _) in _OPERATIONS.items()]


_OPERATIONS: dict[str, tuple[Handler, str, str, str]] = {  # path -> handler, request, response, summary
    "/v1/errors": (report_error, "ErrorReport", "Classification", "Report an error: classify, count, notify"),
    "/v1/errors/batch": (report_batch, "BatchRequest", "BatchResponse", "Report up to 1000 errors; results in order"),
    "/v1/classify": (classify_error, "ErrorReport", "Classification", "Classify without side effects"),
}
_EXPLAIN_PARAMETER = {"name": "explain", "in": "query", "required": False, "schema": {"type": "boolean", "default": False},
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
