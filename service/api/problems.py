"""RFC 9457 problem+json: every error errtriage itself answers with."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

PROBLEM_JSON = "application/problem+json"
log = logging.getLogger("errtriage.api")


class ProblemError(Exception):
    """Raised anywhere in a request to answer with a problem document."""

    def __init__(self, status: int, detail: str, errors: list[dict[str, Any]] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors
        self.headers = headers


def problem_response(status: int, detail: str | None = None, errors: list[dict[str, Any]] | None = None,
                     headers: dict[str, str] | None = None) -> Response:
    body: dict[str, Any] = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status}
    if detail:
        body["detail"] = detail
    if errors is not None:
        body["errors"] = errors
    return Response(orjson.dumps(body), status_code=status, media_type=PROBLEM_JSON, headers=headers)


def internal_error(path: str) -> Response:
    """Log the exception being handled (with its traceback), answer a bare 500 problem."""
    log.exception("unhandled error", extra={"path": path})
    return problem_response(500, "Internal error; it has been logged.")


def field_errors(exc: ValidationError | RequestValidationError) -> list[dict[str, Any]]:
    """Every field error, without echoing the input (it may hold secrets)."""
    raw = exc.errors(include_url=False, include_input=False) if isinstance(exc, ValidationError) else exc.errors()
    return [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
            for e in raw]


def _openapi_entry(description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}}


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the problems a path can answer with."""
    texts = {
        400: "The body is not JSON or not UTF-8.",
        401: "Missing or wrong bearer token.",
        403: "Admin endpoints are disabled (no ERRTRIAGE_ADMIN_TOKEN).",
        413: "The body is larger than ERRTRIAGE_MAX_BODY_BYTES.",
        422: "The body or a query parameter does not fit the schema; every field error is listed.",
        503: "Not ready.",
    }
    return {status: _openapi_entry(texts[status]) for status in statuses}


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ProblemError)
    async def _problem(_: Request, exc: ProblemError) -> Response:
        return problem_response(exc.status, exc.detail, exc.errors, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _request_validation(_: Request, exc: RequestValidationError) -> Response:
        return problem_response(422, "The request does not fit the schema.", field_errors(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> Response:
        return problem_response(exc.status_code, str(exc.detail) if exc.detail else None,
                                headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        return internal_error(request.url.path)
