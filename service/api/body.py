"""Read and parse a JSON body with a size cap, before pydantic sees it."""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from service.api.problems import ProblemError, field_errors

Model = TypeVar("Model", bound=BaseModel)


async def read_body(request: Request, limit: int) -> bytes:
    """The body, or 413 as soon as it is known to exceed `limit` (never buffering past it)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ProblemError(413, f"The body is {declared} bytes; the limit is {limit}.")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ProblemError(413, f"The body is over the limit of {limit} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(body: bytes) -> Any:
    """Raises a 400 problem for a body that is not UTF-8 JSON (or nests deeper than 1024)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            raise ProblemError(400, "The body is not valid UTF-8.") from exc
        raise ProblemError(400, f"The body is not valid JSON: {exc.msg} at position {exc.pos}.") from exc


def validate(model: type[Model], data: Any) -> Model:
    """Raises a 422 problem listing every field error."""
    if not isinstance(data, dict):
        raise ProblemError(422, "The body must be a JSON object.",
                           [{"loc": [], "msg": f"expected an object, got {type(data).__name__}", "type": "type"}])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ProblemError(422, "The body does not fit the schema.", field_errors(exc)) from exc
    except RecursionError as exc:
        raise ProblemError(422, "The body nests too deeply.") from exc


async def read_model(request: Request, model: type[Model], limit: int) -> Model:
    return validate(model, parse_json(await read_body(request, limit)))
