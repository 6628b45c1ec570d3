"""The baselines: a bare FastAPI endpoint that only parses the same body with pydantic, and a raw
ASGI app that reads the body and answers a fixed JSON (what uvicorn and the kernel cost alone)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from service.models import ErrorReport

app = FastAPI()


@app.post("/v1/classify")
async def classify(report: ErrorReport) -> dict[str, bool]:
    return {"ok": report.message is not None}


_FIXED = b'{"ok":true}'
_HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(_FIXED)).encode())]


async def raw_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":  # lifespan: nothing to set up
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": _FIXED})
