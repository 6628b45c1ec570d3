"""Read a JSON body with a size cap, then parse and validate it into a model."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive, Scope

from service.api.problems import ProblemError, field_errors

Model = TypeVar("Model", bound=BaseModel)


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The body, or 413 as soon as it is known to exceed `limit` (never buffering past it)."""
    declared = next((value for name, value in scope["headers"] if name == b"content-length"), None)
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ProblemError(413, f"The body is {declared.decode()} bytes; the limit is {limit}.")
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise ProblemError(413, f"The body is over the limit of {limit} bytes.")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def parse_model(model: type[Model], body: bytes) -> Model:
    """Parse and validate in one pass (pydantic's JSON parser: exact big integers, a nesting limit).

    Raises a 400 problem for a body that is not UTF-8 JSON (or nests too deep), a 422 problem
    listing every field error otherwise.
    """
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        invalid = next((e for e in exc.errors(include_url=False) if e["type"] == "json_invalid"), None)
        if invalid is None:
            raise ProblemError(422, "The body does not fit the schema.", field_errors(exc)) from exc
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            raise ProblemError(400, "The body is not valid UTF-8.") from exc
        raise ProblemError(400, f"The body is not valid JSON: {invalid['msg'].removeprefix('Invalid JSON: ')}.") from exc


async def read_model(request: Request, model: type[Model], limit: int) -> Model:
    return parse_model(model, await read_body(request.scope, request.receive, limit))
