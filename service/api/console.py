"""The operator's side of the service: the unknowns inbox, the web console at /ui/ and /docs, all
served from files in the package (no CDN: it works air-gapped)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Query
from fastapi.openapi.docs import get_swagger_ui_html
from redis.exceptions import RedisError
from starlette.responses import HTMLResponse, RedirectResponse
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.deps import AdminDep, ServicesDep
from service.api.problems import ProblemError, problem_responses

UI_DIR = Path(__file__).resolve().parent.parent / "ui" / "static"
DOCS_ASSETS = "/docs/assets"

router = APIRouter()


@router.get("/v1/unknowns", dependencies=[AdminDep], responses=problem_responses(401, 403, 422, 503),
            summary="The unknowns inbox: groups of reports no rule decided, each with a drafted rule")
async def unknowns(services: ServicesDep, limit: int = Query(50, ge=1, le=1000)) -> dict[str, Any]:
    """Most frequent first. A group's `draft_rule` is YAML for rules/classes/ with a test case made
    from its redacted `example`; `errtriage check` accepts it as it stands."""
    try:
        view = await services.unknowns.top(limit, services.store.current)
    except RedisError as exc:
        raise ProblemError(503, "The unknowns inbox is on Redis, which did not answer.") from exc
    view["dropped"] = services.unknowns.dropped
    return view  # type: ignore[no-any-return]


@router.get("/", include_in_schema=False)
async def root() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui", include_in_schema=False)
async def ui_bare() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/docs", include_in_schema=False)
async def docs() -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/openapi.json", title="errtriage: API",
                               swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
                               swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
                               swagger_favicon_url="/ui/favicon.svg")


def swagger_assets() -> Path:
    """Swagger UI's files as fastapi-offline ships them (Swagger UI 5: it renders OpenAPI 3.1, which
    FastAPI writes; swagger-ui-bundle on PyPI stops at Swagger UI 4, which shows 3.1 as invalid)."""
    import fastapi_offline

    return Path(fastapi_offline.__file__).resolve().parent / "static"


# The console's own files only: no inline script or style, no other origin, no framing.
CONSOLE_HEADERS = [
    (b"content-security-policy", (b"default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                                  b"form-action 'self'; frame-ancestors 'none'")),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class Hardened:
    """ASGI: the wrapped app's responses with CONSOLE_HEADERS added."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_hardened(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *CONSOLE_HEADERS]
            await send(message)

        await self.app(scope, receive, send_hardened)


def install_console(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/ui", Hardened(StaticFiles(directory=UI_DIR, html=True)), name="ui")
    app.mount(DOCS_ASSETS, StaticFiles(directory=swagger_assets()), name="docs-assets")
