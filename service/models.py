"""Wire models: what callers send (ErrorReport) and what they get back (Classification).

Field names are part of the public contract (DESIGN.md); change them only with it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

REPORT_KEY_FIELDS = ("message", "raw", "type", "code", "status")


class Action(StrEnum):
    """What the caller should do next: a closed vocabulary agents can switch on."""

    retry = "retry"
    retry_with_backoff = "retry_with_backoff"
    fix_arguments = "fix_arguments"
    discover_tool = "discover_tool"
    repair_tool_call = "repair_tool_call"
    provide_credentials = "provide_credentials"
    reauthenticate = "reauthenticate"
    top_up_credits = "top_up_credits"
    switch_model = "switch_model"
    check_input = "check_input"
    escalate = "escalate"
    none = "none"


DecidedBy = Literal["rule", "fallback", "none"]


class NotificationStatus(StrEnum):
    queued = "queued"
    throttled = "throttled"
    silenced = "silenced"
    no_recipient = "no_recipient"
    dropped = "dropped"
    none = "none"
    disabled = "disabled"


def _whole_number(value: Any) -> Any:
    """JSON Schema's `integer` includes 500.0; strict validation would refuse it."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


WHOLE_NUMBER = BeforeValidator(_whole_number)  # after the bounds, so the schema keeps minimum/maximum

_PRESENT = {"not": {"enum": [None, ""]}}
_REPORT_EXAMPLES = [
    {
        "message": "Error code: 429 - {'error': {'message': 'You exceeded your current quota, "
        "please check your plan and billing details.', 'type': 'insufficient_quota', "
        "'param': None, 'code': 'insufficient_quota'}}",
        "source": "agent-runner",
        "context": {"user_email": "dev@example.com", "work_id": "w-42"},
    },
    {"raw": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}},
]


def _report_schema(schema: dict[str, Any]) -> None:
    """State 'at least one field' in the schema too, so schema-driven clients and fuzzers agree
    with the validator: a key field present, or a pipeline:step-failed event posted as it is
    (seed 003), bare or wrapped, with none of the report's own fields."""
    no_report_field = {"not": {"anyOf": [{"required": [name]} for name in schema["properties"]]}}
    schema["anyOf"] = [
        *({"required": [name], "properties": {name: _PRESENT}} for name in REPORT_KEY_FIELDS),
        {"required": ["stepId", "error"], **no_report_field},
        {"required": ["event", "payload"], "properties": {"event": {"const": "pipeline:step-failed"}},
         **no_report_field},
    ]
    schema["examples"] = _REPORT_EXAMPLES


class ErrorReport(BaseModel):
    """One error as a service hit it. Every field is optional, but at least one of
    message, raw, type, code or status must carry something."""

    model_config = ConfigDict(
        extra="ignore",
        strict=True,  # as documented: `"code": false` or `"attempt": "2"` is refused, not coerced
        json_schema_extra=_report_schema,
    )

    message: str | None = Field(None, description="The error message as rendered (str(exc)).")
    type: str | None = Field(None, description="Exception or error type name, e.g. RateLimitError.")
    code: str | Annotated[int, WHOLE_NUMBER] | None = Field(None, description="Error code, e.g. insufficient_quota.")
    status: Annotated[int, Field(ge=100, le=599), WHOLE_NUMBER] | None = Field(
        None, description="HTTP status of the failing call.")
    provider: str | None = Field(None, max_length=100, description="Caller's provider hint; wins over detection.")
    tool: str | None = Field(None, max_length=200, description="Name of the tool that was called.")
    source: str | None = Field(None, max_length=200, description="The reporting service.")
    attempt: Annotated[int, Field(ge=1, le=1000), WHOLE_NUMBER] | None = Field(
        None, description="1-based try number of the failing call.")
    context: dict[str, Any] | None = Field(
        None, description="user_id, user_email, work_id, work_name, step_id, optional, available_tools, ..."
    )
    raw: Any = Field(None, description="The original error body or object, any JSON.")

    @model_validator(mode="before")
    @classmethod
    def _bare_pipeline_event(cls, data: Any) -> Any:
        """Seed 003's `pipeline:step-failed` event, posted as it is, is a report of its `raw`."""
        if isinstance(data, dict) and not data.keys() & _REPORT_FIELDS and (
                (data.get("event") == "pipeline:step-failed" and "payload" in data)
                or ("stepId" in data and "error" in data)):
            return {"raw": data}
        return data

    @model_validator(mode="after")
    def _has_content(self) -> ErrorReport:
        if all(getattr(self, name) in (None, "") for name in REPORT_KEY_FIELDS):
            raise ValueError(f"a report needs at least one of {', '.join(REPORT_KEY_FIELDS)}")
        return self


_REPORT_FIELDS = frozenset(ErrorReport.model_fields)


class BatchRequest(BaseModel):
    errors: list[ErrorReport] = Field(..., min_length=1, max_length=1000)


class Recovery(BaseModel):
    action: Action = Action.none
    max_attempts: int = 1
    attempts_left: int = 0
    backoff_ms: list[int] = Field(default_factory=list)
    retry_hint: str | None = None
    alternatives: list[Any] = Field(default_factory=list)
    examples: list[Any] = Field(default_factory=list)
    feedback_hint: str | None = None
    suggested_tools: list[str] = Field(default_factory=list)


class NotificationOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)  # shared: the notifier builds each distinct outcome once

    status: NotificationStatus = NotificationStatus.none
    route: str | None = None
    channels: list[str] = Field(default_factory=list)


def _is_none(value: Any) -> bool:
    return value is None


class Classification(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    id: str
    class_: str = Field(..., alias="class")
    reason: str
    provider: str | None
    provider_kind: str | None
    retryable: bool
    rule: str | None
    decided_by: DecidedBy = Field(
        "rule", description="rule: `rule` names it; fallback: the learned fallback (no rule matched); none: unknown.")
    confidence: float = Field(1.0, ge=0, le=1, description="1.0 for a rule; the fallback's probability otherwise.")
    recovery: Recovery
    details: dict[str, Any] = Field(default_factory=dict)
    rules_version: str
    # Present only where they apply, never as nulls.
    explain: dict[str, Any] | None = Field(None, description="Only with ?explain=true.", exclude_if=_is_none)
    notification: NotificationOutcome | None = Field(None, description="Only on /v1/errors.", exclude_if=_is_none)


class BatchResponse(BaseModel):
    results: list[Classification]


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    errors: list[dict[str, Any]] | None = None
