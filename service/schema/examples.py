"""The examples/ table: real errors and their right answers, which the learned fallback trains on."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from service.schema.base import Strict


class ExampleLabel(Strict):
    class_: str = Field(..., alias="class")
    reason: str
    provider: str | None = None
    retryable: bool | None = None


class LabelledExample(Strict):
    """A real error and its right answer: the learned fallback trains on these."""

    source: str = Field(..., min_length=1, description="Where the text was seen (URL or repo and path).")
    note: str | None = None
    report: dict[str, Any]
    expect: ExampleLabel
