"""The notification sections of rule files: channels and routes (routes/), silences (silences/).

Strict like every rule model (unknown keys fail). Pure: pydantic and email-validator only.
A secret (SMTP password, webhook URL, signing key, auth header) is never written in a
file, only the name of the environment variable that holds it (`url_env: ERRTRIAGE_WEBHOOK_URL`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from email_validator import EmailNotValidError, validate_email
from pydantic import (
    AwareDatetime,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from service.schema.base import ID_PATTERN, Strict

TEMPLATE_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,99}$"
ENV_PATTERN = r"^[A-Z_][A-Z0-9_]{0,127}$"
HEADER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]{0,99}$"
GroupKey = Literal["class", "reason", "provider", "user", "source", "tool", "work_id"]
GROUP_KEYS: tuple[str, ...] = get_args(GroupKey)
DEFAULT_GROUP_BY: tuple[GroupKey, ...] = ("class", "provider", "user")
DEFAULT_THROTTLE_SECONDS = 3600.0
SECRET_KEYS = ("url", "password", "secret", "signing_key", "token", "api_key")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d)?$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}

EnvName = Annotated[str, Field(pattern=ENV_PATTERN, description="Name of an environment variable.")]
HeaderName = Annotated[str, Field(pattern=HEADER_PATTERN)]
# YAML may write one value or a list; the published JSON Schema says so too.
OneOrMany = Annotated[list[str], WithJsonSchema({"anyOf": [
    {"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]})]
Duration = Annotated[float, WithJsonSchema({"anyOf": [
    {"type": "number", "minimum": 0}, {"type": "string", "pattern": r"^\d+(\.\d+)?\s*(s|m|h|d)?$"}]})]


class NotifyStrict(Strict):
    """Notification models also take their fields by name (`class_=`) besides the alias."""

    model_config = ConfigDict(populate_by_name=True)


def as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def as_lower_list(value: Any) -> Any:
    value = as_list(value)
    return [item.lower() if isinstance(item, str) else item for item in value] if isinstance(value, list) else value


def parse_duration(value: Any) -> Any:
    """'90s', '30m', '1h', '1d', or a number of seconds. Other values are left for pydantic to refuse."""
    if isinstance(value, str):
        found = _DURATION.match(value.strip())
        if found is None:
            raise ValueError(f"duration {value!r} is not like 90s, 30m, 1h or 1d")
        return float(found.group(1)) * _UNITS[found.group(2)]
    return value


def checked_address(address: str) -> str:
    """The normalized address. Raises ValueError when it is not a valid email address."""
    try:
        return validate_email(address, check_deliverability=False).normalized
    except EmailNotValidError as exc:
        raise ValueError(f"invalid address {address!r}: {exc}") from exc


def _no_inline_secret(value: Any) -> Any:
    if isinstance(value, dict):
        for key in SECRET_KEYS:
            if key in value:
                raise ValueError(f"{key!r} would write a secret into the rule file; "
                                 f"name the environment variable that holds it: {key}_env")
    return value


class EmailChannelSpec(NotifyStrict):
    """Mail through the ERRTRIAGE_SMTP_* server (the log when no SMTP host is set)."""

    id: str = Field(..., pattern=ID_PATTERN)
    type: Literal["email"]
    description: str | None = None
    to: OneOrMany = Field(default_factory=list,
                          description="Fixed recipients; empty means the reporting user (context.user_email).")

    @field_validator("to", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return as_list(value)

    @field_validator("to")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        return [checked_address(address) for address in value]


class WebhookChannelSpec(NotifyStrict):
    """A JSON POST, signed with HMAC-SHA256 over the exact body bytes when `secret_env` is set."""

    id: str = Field(..., pattern=ID_PATTERN)
    type: Literal["webhook"]
    description: str | None = None
    url_env: EnvName
    secret_env: EnvName | None = Field(None, description="Shared signing key for the signature header.")
    signature_header: HeaderName = "X-Errtriage-Signature"
    headers: dict[HeaderName, str] = Field(default_factory=dict, description="Fixed, non-secret headers.")
    headers_env: dict[HeaderName, EnvName] = Field(default_factory=dict,
                                                   description="Headers whose values are secrets, by env var.")
    timeout_seconds: float = Field(10.0, gt=0, le=120)

    @field_validator("headers")
    @classmethod
    def _one_line(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
                raise ValueError(f"header {name!r} holds a control character")
        return value


class LogChannelSpec(NotifyStrict):
    """One log record per notification, with everything that would have been sent."""

    id: str = Field(..., pattern=ID_PATTERN)
    type: Literal["log"]
    description: str | None = None


ChannelSpec = Annotated[
    Annotated[EmailChannelSpec | WebhookChannelSpec | LogChannelSpec, Field(discriminator="type")],
    BeforeValidator(_no_inline_secret),
]


class RouteMatch(NotifyStrict):
    """All present fields must hold; each is any-of. Text is compared case-insensitively."""

    class_: OneOrMany = Field(..., alias="class", min_length=1)
    reason: OneOrMany | None = None
    provider: OneOrMany | None = None
    source: OneOrMany | None = None

    @field_validator("class_", "reason", "provider", "source", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return as_lower_list(value)


class RouteSpec(NotifyStrict):
    id: str = Field(..., pattern=ID_PATTERN)
    description: str | None = None
    match: RouteMatch
    channels: OneOrMany = Field(..., min_length=1)
    template: str = Field(..., pattern=TEMPLATE_PATTERN, description="templates/<template>.{subject,text,html,json}.j2")
    throttle: Duration = Field(DEFAULT_THROTTLE_SECONDS, ge=0,
                            description="One notification per group within this window (90s, 30m, 1h; 0 = off).")
    group_by: list[GroupKey] = Field(default_factory=lambda: list(DEFAULT_GROUP_BY),
                                     description="The keys that make repeats one group.")
    allow_fallback: bool = Field(False, description="Also notify verdicts of the learned fallback (no rule matched).")

    @field_validator("channels", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return as_list(value)

    @field_validator("throttle", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return parse_duration(value)


class SilenceMatch(NotifyStrict):
    class_: OneOrMany | None = Field(None, alias="class")
    provider: OneOrMany | None = None
    source: OneOrMany | None = None

    @field_validator("class_", "provider", "source", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return as_lower_list(value)

    @model_validator(mode="after")
    def _not_empty(self) -> SilenceMatch:
        if self.class_ is None and self.provider is None and self.source is None:
            raise ValueError("a silence must match on at least one of class, provider, source")
        return self


class SilenceSpec(NotifyStrict):
    id: str = Field(..., pattern=ID_PATTERN)
    match: SilenceMatch
    until: AwareDatetime = Field(..., description="When the silence ends (with a time zone).")
    comment: str = Field(..., min_length=1, description="Why, and who to ask.")
