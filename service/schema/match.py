"""The match language of class rules: text conditions (any-of) in match blocks (all-of)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator, model_validator

from service.schema.base import Strict

_STATUS_RANGE = re.compile(r"^([1-5])xx$|^([1-5]\d\d)-([1-5]\d\d)$")


def as_list(value: Any) -> Any:
    """One value (text or a number) as a list of one; anything else is left for pydantic."""
    return [value] if isinstance(value, (str, int)) else value


class TextCondition(Strict):
    """Any-of: the field matches when one literal, regex or exact value matches (case-insensitive)."""

    contains: list[str] = Field(default_factory=list, description="Literal substrings.")
    regex: list[str] = Field(default_factory=list, description="RE2 regexes; named groups go to details.")
    equals: list[str] = Field(default_factory=list, description="Whole values.")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, (str, list)):
            return {"contains": as_list(value)}
        if isinstance(value, dict):
            return {k: as_list(v) for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> TextCondition:
        if not (self.contains or self.regex or self.equals):
            raise ValueError("a condition needs at least one of contains, regex, equals")
        if any(not s for s in (*self.contains, *self.equals, *self.regex)):
            raise ValueError("empty strings match everything; remove them")
        return self


StatusItem = int | str


class MatchBlock(Strict):
    """All present fields must match (AND)."""

    message: TextCondition | None = None
    type: TextCondition | None = None
    code: TextCondition | None = None
    tool: TextCondition | None = None
    provider: TextCondition | None = None
    provider_kind: TextCondition | None = None
    source: TextCondition | None = None
    host: TextCondition | None = None
    model: TextCondition | None = None
    shape: TextCondition | None = None
    status: list[StatusItem] | None = Field(None, description="Codes (429) or ranges ('5xx', '500-504').")

    @field_validator("status", mode="before")
    @classmethod
    def _status_list(cls, value: Any) -> Any:
        return as_list(value)

    @field_validator("status")
    @classmethod
    def _status_values(cls, value: list[StatusItem] | None) -> list[StatusItem] | None:
        for item in value or []:
            if isinstance(item, int) and not 100 <= item <= 599:
                raise ValueError(f"status {item} is not an HTTP status")
            if isinstance(item, str) and not _STATUS_RANGE.match(item):
                raise ValueError(f"status {item!r} is neither a code, 'Nxx', nor 'NNN-NNN'")
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> MatchBlock:
        if not self.conditions():
            raise ValueError("a match block needs at least one field")
        return self

    def conditions(self) -> dict[str, TextCondition | list[StatusItem]]:
        return {name: value for name, value in self.__dict__.items() if value is not None}
