"""What every route needs, declared once: the composed services and the admin check.

Both are `async def` on purpose: FastAPI runs a plain `def` dependency in a thread pool,
a thread hop on every request.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from prometheus_client import CollectorRegistry

from service.api.problems import ProblemError
from service.metrics import Metrics
from service.rules.store import RuleStore
from service.settings import Settings


@dataclass
class Services:
    settings: Settings
    metrics: Metrics
    registry: CollectorRegistry
    store: RuleStore
    notifier: Any = None  # service.notify.pipeline.Notifier once started
    unknowns: Any = None  # service.unknowns.recorder.Recorder: the unknowns inbox


async def get_services(request: Request) -> Services:
    return request.app.state.services  # type: ignore[no-any-return]


ServicesDep = Annotated[Services, Depends(get_services)]


async def require_admin(request: Request, services: ServicesDep) -> None:
    """Bearer ERRTRIAGE_ADMIN_TOKEN; with no token set, admin endpoints are disabled (403)."""
    token = services.settings.admin_token
    if token is None or not token.get_secret_value():
        raise ProblemError(403, "Admin endpoints are disabled: set ERRTRIAGE_ADMIN_TOKEN to enable them.")
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), token.get_secret_value().encode()):
        raise ProblemError(401, "A valid bearer token is required.", headers={"WWW-Authenticate": "Bearer"})


AdminDep = Depends(require_admin)
