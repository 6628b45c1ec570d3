"""The baseline: a bare FastAPI endpoint that only parses the same body with pydantic."""

from __future__ import annotations

from fastapi import FastAPI

from service.models import ErrorReport

app = FastAPI()


@app.post("/v1/classify")
async def classify(report: ErrorReport) -> dict[str, bool]:
    return {"ok": report.message is not None}
