"""The providers/ table: how a provider is recognised in a report."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from service.schema.base import NAME_PATTERN, Strict
from service.schema.cases import RuleTest


class ProviderSpec(Strict):
    """How a provider is recognised. Evidence is tried in order: types/codes, hosts, models, text."""

    id: str = Field(..., pattern=NAME_PATTERN)
    kind: Literal["ai", "git", "other"]
    name: str | None = None
    gateway: bool = Field(False, description="Routes to other providers' models; wins over the model it serves.")
    aliases: list[str] = Field(default_factory=list, description="Other names callers hint with (gemini -> google).")
    types: list[str] = Field(default_factory=list, description="Substrings of exception type names.")
    codes: list[str] = Field(default_factory=list, description="Exact error codes or types only this provider uses.")
    hosts: list[str] = Field(default_factory=list, description=(
        "Hosts: each matches itself and its subdomains (api.openai.com); `x.` a label prefix, `-x` a label suffix."))
    models: list[str] = Field(default_factory=list, description="RE2 regexes over model names (and the message).")
    text: list[str] = Field(default_factory=list, description="RE2 regexes over the message.")
    tests: list[RuleTest] = Field(default_factory=list)
