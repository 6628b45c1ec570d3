"""errtriage's own exceptions. Each names the step that failed and carries attributes, not prose.

    ErrtriageError
    ├── RulesInvalid          a rules directory did not load; .errors lists every RuleError
    ├── SettingsInvalid       a setting is out of range or malformed (startup stops)
    ├── DeliveryError         a channel could not send; .transient says if a retry may help
    │   └── DeliveryTimeout   (also a TimeoutError) the send took longer than its timeout
    └── EntryUnusable         a stored notification cannot be delivered any more (its route or
                              channel is gone, or it does not decode); .channel, .class_, .summary
"""

from __future__ import annotations

from dataclasses import dataclass


class ErrtriageError(Exception):
    """Base of every error errtriage raises on purpose."""


@dataclass(frozen=True, slots=True)
class RuleError:
    """One problem in one rule file: where it is and what is wrong."""

    file: str
    line: int
    rule: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        rule = f" [{self.rule}]" if self.rule else ""
        return f"{where}{rule}: {self.message}"

    def as_dict(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, "rule": self.rule, "message": self.message}


class RulesInvalid(ErrtriageError):
    def __init__(self, errors: list[RuleError]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors[:5]) + (" ..." if len(errors) > 5 else ""))


class SettingsInvalid(ErrtriageError):
    pass


class DeliveryError(ErrtriageError):
    def __init__(self, message: str, transient: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after


class DeliveryTimeout(DeliveryError, TimeoutError):
    def __init__(self, message: str) -> None:
        super().__init__(message, transient=True)


class EntryUnusable(ErrtriageError):
    def __init__(self, message: str, channel: str, class_: str, summary: dict[str, object]) -> None:
        super().__init__(message)
        self.channel = channel
        self.class_ = class_
        self.summary = summary
