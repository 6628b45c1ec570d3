"""The rule-file models: a closed, strict schema (unknown keys fail) for every table.

`errtriage schema` publishes the JSON Schema of RuleFile for editors.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from service.models import Action
from service.notify.schema import ChannelSpec, RouteSpec, SilenceSpec

ID_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,99}$"
NAME_PATTERN = r"^[a-z][a-z0-9_]{0,49}$"
_STATUS_RANGE = re.compile(r"^([1-5])xx$|^([1-5]\d\d)-([1-5]\d\d)$")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _as_list(value: Any) -> Any:
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
            return {"contains": _as_list(value)}
        if isinstance(value, dict):
            return {k: _as_list(v) for k, v in value.items()}
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
        return _as_list(value)

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


class RecoverySpec(Strict):
    """Recovery defaults; every field optional so class, reason and rule can each override a part."""

    action: Action | None = None
    max_attempts: int | None = Field(None, ge=1, le=3, description="Hard cap of 3 per tool per task.")
    backoff_ms: list[int] | None = Field(None, max_length=10)
    retry_hint: str | None = None
    alternatives: list[Any] | None = None
    examples: list[Any] | None = None
    feedback_hint: str | None = None


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


class ProviderSpec(Strict):
    """How a provider is recognised. Evidence is tried in order: types/codes, hosts, models, text."""

    id: str = Field(..., pattern=NAME_PATTERN)
    kind: Literal["ai", "git", "other"]
    name: str | None = None
    gateway: bool = Field(False, description="Routes to other providers' models; wins over the model it serves.")
    aliases: list[str] = Field(default_factory=list, description="Other names callers hint with (gemini -> google).")
    types: list[str] = Field(default_factory=list, description="Substrings of exception type names.")
    codes: list[str] = Field(default_factory=list, description="Exact error codes or types only this provider uses.")
    hosts: list[str] = Field(default_factory=list, description="Host name substrings (api.openai.com).")
    models: list[str] = Field(default_factory=list, description="RE2 regexes over model names (and the message).")
    text: list[str] = Field(default_factory=list, description="RE2 regexes over the message.")
    tests: list[RuleTest] = Field(default_factory=list)


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


class RuleFile(Strict):
    """One YAML file of any table. Each table's folder takes only its own sections."""

    classes: list[ClassSpec] = Field(default_factory=list, description="classes/: the class and reason vocabulary.")
    rules: list[ClassRule] = Field(default_factory=list, description="classes/: class rules.")
    providers: list[ProviderSpec] = Field(default_factory=list, description="providers/: provider detection.")
    channels: list[ChannelSpec] = Field(default_factory=list, description="routes/: notification channels.")
    routes: list[RouteSpec] = Field(default_factory=list, description="routes/: notification routes, first match wins.")
    silences: list[SilenceSpec] = Field(default_factory=list, description="silences/: muted notifications.")
    examples: list[LabelledExample] = Field(default_factory=list,
                                            description="examples/: labelled reports the fallback learns from.")
