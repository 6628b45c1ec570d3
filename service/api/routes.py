"""The rest of DESIGN.md's HTTP contract: rules, reload, health, metrics (the hot POST routes are
in triage_routes.py)."""

from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.responses import Response

from service.api.deps import AdminDep, ServicesDep
from service.api.problems import ProblemError, problem_responses
from service.errors import RulesInvalid

router = APIRouter()


@router.get("/v1/rules", summary="The loaded rule tables")
async def rules(services: ServicesDep) -> dict[str, Any]:
    ruleset = services.store.current
    counts = services.store.match_counts
    return {
        "version": ruleset.version,
        "loaded_at": ruleset.loaded_at.isoformat(),
        "counts": {"classes": len(ruleset.classes), "rules": len(ruleset.rules), "providers": len(ruleset.providers),
                   "examples": len(ruleset.labelled),
                   **(ruleset.notify.counts() if ruleset.notify is not None else {})},
        "fallback": _fallback(services),
        "files": [vars(f) for f in ruleset.files],
        "rules": [{"id": r.id, "class": r.class_, "reason": r.reason, "priority": r.priority,
                   "file": ruleset.sources.get(r.id), "matches": counts.get(r.id, 0)} for r in ruleset.rules],
        "providers": sorted(ruleset.providers),
        "last_reload_errors": [e.as_dict() for e in services.store.last_errors],
    }


def _fallback(services: Any) -> dict[str, Any]:
    """off | training | ready | none (too little to learn from) | failed; the threshold when on."""
    state = {"state": services.store.fallback_state}
    if services.settings.fallback == "on":
        state["min_confidence"] = services.settings.fallback_min_confidence
    return state


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
    """With ERRTRIAGE_REDIS_URL, `redis` says "up" or "down". Redis down alone keeps the process
    ready: it still classifies and counts, and holds notifications in its outbox until Redis is
    back; only a full outbox (like a full queue) makes it unready."""
    problems = []
    if not services.store.ready:
        problems.append("no ruleset loaded")
    state = services.notifier.state() if services.notifier is not None else {}
    if services.notifier is not None and services.notifier.queue_full():
        problems.append("notification queue is full" if not state else "notification outbox is full")
    if problems:
        raise ProblemError(503, "; ".join(problems) + "".join(f"; {k} {v}" for k, v in state.items()))
    return {"status": "ready", "rules_version": services.store.current.version,
            "fallback": services.store.fallback_state, "regex_scanner": services.store.scanner_state, **state}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(services: ServicesDep) -> Response:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
    else:
        registry = services.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
