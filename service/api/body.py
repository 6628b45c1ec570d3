"""Read a JSON body with a size cap, then parse and validate it into a model."""

from __future__ import annotations

import asyncio
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive, Scope

from service.api.problems import ProblemError, field_errors

Model = TypeVar("Model", bound=BaseModel)


DRAIN_BYTES = 64 * 1024 * 1024  # what is read and discarded of a body over the limit, at most
DRAIN_SECONDS = 5.0  # and for how long
_CLOSE = {"Connection": "close"}


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The body, or 413 as soon as it is known to exceed `limit` (never buffering past it).

    Before the 413 goes out, the rest of the body is read and discarded (at most DRAIN_BYTES, for
    at most DRAIN_SECONDS) and the connection is then closed: a client that writes its whole body
    before reading (Python's urllib and requests do) would otherwise meet a closed socket and see
    a connection reset instead of the answer."""
    await refuse_declared_over(scope, receive, limit)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        more = message.get("more_body", False)
        if size > limit:
            if more:
                await _drain(receive)
            raise ProblemError(413, f"The body is over the limit of {limit} bytes.", headers=_CLOSE)
        chunks.append(chunk)
        if not more:
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def refuse_declared_over(scope: Scope, receive: Receive, limit: int) -> None:
    """Raise the 413 problem (after draining the body) when Content-Length declares more than `limit`."""
    declared = next((value for name, value in scope["headers"] if name == b"content-length"), None)
    if declared is not None and declared.isdigit() and int(declared) > limit:
        await _drain(receive)
        raise ProblemError(413, f"The body is {declared.decode()} bytes; the limit is {limit}.", headers=_CLOSE)


async def _drain(receive: Receive) -> None:
    """Read and drop what is left of the body, bounded in bytes and time; never raises."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DRAIN_SECONDS
    drained = 0
    while drained < DRAIN_BYTES:
        left = deadline - loop.time()
        if left <= 0:
            return
        try:
            message = await asyncio.wait_for(receive(), left)
        except TimeoutError:
            return
        if message["type"] == "http.disconnect" or not message.get("more_body", False):
            return
        drained += len(message.get("body", b""))


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
        message = invalid["msg"].removeprefix("Invalid JSON: ")
        raise ProblemError(400, f"The body is not valid JSON: {message}.") from exc


async def read_model(request: Request, model: type[Model], limit: int) -> Model:
    return parse_model(model, await read_body(request.scope, request.receive, limit))
