"""The HTTP contract of DESIGN.md. Routes stay thin: read, triage, count, notify, answer."""

from __future__ import annotations

import logging
import os
import time
import uuid
from typing import Any

import orjson
from fastapi import APIRouter, Query, Request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.responses import Response

from service.api.body import read_model
from service.api.deps import AdminDep, Services, ServicesDep
from service.api.problems import ProblemError, problem_responses
from service.errors import RulesInvalid
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

router = APIRouter()
log = logging.getLogger("errtriage.triage")

_REPORT_BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": {"$ref": "#/components/schemas/ErrorReport"}}}}}
_BATCH_BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": {"$ref": "#/components/schemas/BatchRequest"}}}}}
_BODY_PROBLEMS = problem_responses(400, 413, 422)
_EXCLUDE_UNSET = {"explain", "notification"}


def _json(model: Classification | BatchResponse | dict[str, Any], status: int = 200) -> Response:
    if isinstance(model, dict):
        return Response(orjson.dumps(model), status_code=status, media_type="application/json")
    return Response(model.model_dump_json(exclude_none=False, exclude=_exclusions(model)),
                    status_code=status, media_type="application/json")


def _exclusions(model: Classification | BatchResponse) -> Any:
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


@router.post("/v1/errors", response_model=Classification, responses=_BODY_PROBLEMS, openapi_extra=_REPORT_BODY,
             summary="Report an error: classify, count, notify")
async def report_error(request: Request, services: ServicesDep) -> Response:
    report = await read_model(request, ErrorReport, services.settings.max_body_bytes)
    return _json(_report(services, services.store.current, report))


@router.post("/v1/errors/batch", response_model=BatchResponse, responses=_BODY_PROBLEMS, openapi_extra=_BATCH_BODY,
             summary="Report up to 1000 errors; results in order")
async def report_batch(request: Request, services: ServicesDep) -> Response:
    batch = await read_model(request, BatchRequest, services.settings.max_body_bytes)
    ruleset = services.store.current
    return _json(BatchResponse(results=[_report(services, ruleset, r) for r in batch.errors]))


@router.post("/v1/classify", response_model=Classification, responses=_BODY_PROBLEMS, openapi_extra=_REPORT_BODY,
             summary="Classify without side effects")
async def classify_error(
    request: Request, services: ServicesDep,
    explain: bool = Query(False, description="Add the rules tried, in order, and why the winner matched."),
) -> Response:
    report = await read_model(request, ErrorReport, services.settings.max_body_bytes)
    classification, _, _ = triage(report, services.store.current, uuid.uuid4().hex, explain=explain)
    return _json(classification)


@router.get("/v1/rules", summary="The loaded rule tables")
async def rules(services: ServicesDep) -> dict[str, Any]:
    ruleset = services.store.current
    counts = services.store.match_counts
    return {
        "version": ruleset.version,
        "loaded_at": ruleset.loaded_at.isoformat(),
        "counts": {"classes": len(ruleset.classes), "rules": len(ruleset.rules), "providers": len(ruleset.providers),
                   **(ruleset.notify.counts() if ruleset.notify is not None else {})},
        "files": [vars(f) for f in ruleset.files],
        "rules": [{"id": r.id, "class": r.class_, "reason": r.reason, "priority": r.priority,
                   "file": ruleset.sources.get(r.id), "matches": counts.get(r.id, 0)} for r in ruleset.rules],
        "providers": sorted(ruleset.providers),
        "last_reload_errors": [e.as_dict() for e in services.store.last_errors],
    }


@router.post("/v1/rules/reload", dependencies=[AdminDep], responses=problem_responses(401, 403, 422),
             summary="Reload the rule tables now")
async def reload_rules(services: ServicesDep) -> dict[str, Any]:
    try:
        ruleset = await services.store.reload()
    except RulesInvalid as exc:
        raise ProblemError(422, f"The rules did not load; version {services.store.current.version} keeps serving.",
                           [e.as_dict() for e in exc.errors]) from exc
    return {"version": ruleset.version, "loaded_at": ruleset.loaded_at.isoformat(), "rules": len(ruleset.rules)}


@router.get("/healthz", summary="Liveness")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", responses=problem_responses(503), summary="Readiness: rules loaded, queue not full")
async def readyz(services: ServicesDep) -> dict[str, Any]:
    problems = []
    if not services.store.ready:
        problems.append("no ruleset loaded")
    if services.notifier is not None and services.notifier.queue_full():
        problems.append("notification queue is full")
    if problems:
        raise ProblemError(503, "; ".join(problems))
    return {"status": "ready", "rules_version": services.store.current.version}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(services: ServicesDep) -> Response:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
    else:
        registry = services.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
