"""What the fallback learns from and answers, as plain data: the engine, the loader and the
training set read these without loading the model's numerical stack (numpy, scikit-learn),
which only a trained fallback needs (fallback.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.models import ErrorReport
from service.normalize import NormalizedError


@dataclass(frozen=True, slots=True)
class LabelledReport:
    """A report and its right answer, as read from the examples/ table or a rule's test."""

    report: ErrorReport
    class_: str
    reason: str
    origin: str  # file#index, or the rule whose test it is


@dataclass(frozen=True, slots=True)
class Example:
    """One labelled report, normalized: what the fallback learns from."""

    error: NormalizedError
    provider_kind: str | None
    class_: str
    reason: str
    origin: str  # the examples file or rule it came from (shown in explain)


@dataclass(frozen=True, slots=True)
class Guess:
    class_: str
    reason: str
    confidence: float
    leaned_on: dict[str, Any]
