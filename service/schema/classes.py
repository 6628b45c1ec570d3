"""The classes/ table: the class and reason vocabulary, their recovery defaults, and class rules."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from service.models import Action
from service.schema.base import ID_PATTERN, NAME_PATTERN, Strict
from service.schema.cases import RuleTest
from service.schema.match import MatchBlock


class RecoverySpec(Strict):
    """Recovery defaults; every field optional so class, reason and rule can each override a part."""

    action: Action | None = None
    max_attempts: int | None = Field(None, ge=1, le=3, description="Hard cap of 3 per tool per task.")
    backoff_ms: list[int] | None = Field(None, max_length=10)
    retry_hint: str | None = None
    alternatives: list[Any] | None = None
    examples: list[Any] | None = None
    feedback_hint: str | None = None


class ReasonSpec(Strict):
    description: str | None = None
    retryable: bool | None = None
    recovery: RecoverySpec | None = None


class ClassSpec(Strict):
    id: str = Field(..., pattern=NAME_PATTERN)
    description: str | None = None
    retryable: bool = False
    recovery: RecoverySpec = RecoverySpec()
    reasons: dict[str, ReasonSpec] = Field(..., min_length=1)

    @field_validator("reasons")
    @classmethod
    def _reason_names(cls, value: dict[str, ReasonSpec]) -> dict[str, ReasonSpec]:
        for name in value:
            if not re.match(NAME_PATTERN, name):
                raise ValueError(f"reason {name!r} must match {NAME_PATTERN}")
        return value


def _match_one_or_many(schema: dict[str, Any]) -> None:
    """Editors should accept the single-block form the validator accepts."""
    many = schema["properties"]["match"]
    description = many.pop("description", None)
    schema["properties"]["match"] = {"anyOf": [many["items"], many], "description": description}


class ClassRule(Strict):
    model_config = ConfigDict(json_schema_extra=_match_one_or_many)

    id: str = Field(..., pattern=ID_PATTERN)
    description: str | None = None
    class_: str = Field(..., alias="class")
    reason: str
    priority: int = Field(0, description="Higher first; equal priorities keep file order.")
    match: list[MatchBlock] = Field(..., min_length=1, description="A block, or a list of blocks (any of).")
    not_: MatchBlock | None = Field(None, alias="not", description="The rule is skipped when any field here matches.")
    retryable: bool | None = None
    recovery: RecoverySpec | None = None
    tests: list[RuleTest] = Field(default_factory=list)

    @field_validator("match", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict) else value

    def blocks(self) -> list[MatchBlock]:
        return self.match
