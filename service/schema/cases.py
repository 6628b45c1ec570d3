"""Test cases written beside a class rule or a provider: a sample report and what it must give."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from service.schema.base import Strict


class Expectation(Strict):
    class_: str | None = Field(None, alias="class")
    reason: str | None = None
    provider: str | None = None
    rule: str | None = None
    details: dict[str, Any] | None = Field(None, description="Entries the details must contain (captures).")


class RuleTest(Strict):
    """A sample report and what it must give. Without `expect`, the rule that owns it must win."""

    report: dict[str, Any]
    expect: Expectation | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, dict) and "report" not in value:
            report = {k: v for k, v in value.items() if k != "expect"}
            return {"report": report, "expect": value["expect"]} if "expect" in value else {"report": report}
        return value
