"""POST /v1/notifications/test: one test message through a named channel, sent now (admin only)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.api.body import read_model
from service.api.deps import AdminDep, ServicesDep
from service.api.problems import PROBLEM_JSON, ProblemError, problem_responses
from service.notify.probe import ProbeResult
from service.schema.notify import checked_address

router = APIRouter()


class ChannelTestRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    channel: str = Field(..., min_length=1, max_length=100, description="A channel id from rules/routes/.")
    to: Annotated[str, Field(max_length=320, json_schema_extra={"format": "email"})] | None = Field(
        None, description="Recipient for an email channel (else its fixed `to`).")

    @field_validator("to")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        return checked_address(value) if value else None


_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {
    "description": "No channel with this id in the loaded routes.",
    "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
}}
_BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": ChannelTestRequest.model_json_schema()}}}}


@router.post("/v1/notifications/test", dependencies=[AdminDep], response_model=ProbeResult,
             responses={**problem_responses(400, 401, 403, 413, 422, 503), **_NOT_FOUND}, openapi_extra=_BODY,
             summary="Send a test message through one channel and report the result")
async def test_channel(request: Request, services: ServicesDep) -> ProbeResult:
    body = await read_model(request, ChannelTestRequest, services.settings.max_body_bytes)
    if services.notifier is None:
        raise ProblemError(503, "Notifications are disabled (ERRTRIAGE_NOTIFY_ENABLED=false).")
    result = await services.notifier.send_test(body.channel, body.to, services.store.current)
    if result is None:
        raise ProblemError(404, f"No channel {body.channel!r} in the loaded routes.")
    return result  # type: ignore[no-any-return]
