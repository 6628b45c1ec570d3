"""What every rule-file model shares: frozen, unknown keys refused, and the id patterns."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

ID_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,99}$"
NAME_PATTERN = r"^[a-z][a-z0-9_]{0,49}$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
