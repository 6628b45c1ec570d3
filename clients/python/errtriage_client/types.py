"""Typed answers: a Classification and its Recovery block, read leniently from the service's JSON.

Unknown keys are ignored and missing ones take the service's defaults, so a newer server
never breaks an older client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Actions an agent must act on itself (change the tool, the arguments, supply a credential,
#: check its input): `follow_recovery` hands these back as `NeedsAgent` instead of retrying.
AGENT_ACTIONS = frozenset({"fix_arguments", "discover_tool", "repair_tool_call", "provide_credentials",
                           "check_input"})


@dataclass(frozen=True)
class Recovery:
    action: str = "none"
    max_attempts: int = 1
    attempts_left: int = 0
    backoff_ms: list[int] = field(default_factory=list)
    retry_hint: str | None = None
    alternatives: list[Any] = field(default_factory=list)
    examples: list[Any] = field(default_factory=list)
    feedback_hint: str | None = None
    suggested_tools: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: Any) -> Recovery:
        data = data if isinstance(data, dict) else {}
        return cls(
            action=str(data.get("action") or "none"),
            max_attempts=int(data.get("max_attempts") or 1),
            attempts_left=int(data.get("attempts_left") or 0),
            backoff_ms=[int(ms) for ms in data.get("backoff_ms") or []],
            retry_hint=data.get("retry_hint"),
            alternatives=list(data.get("alternatives") or []),
            examples=list(data.get("examples") or []),
            feedback_hint=data.get("feedback_hint"),
            suggested_tools=[str(t) for t in data.get("suggested_tools") or []],
        )

    @property
    def next_wait_seconds(self) -> float:
        """The first wait of `backoff_ms`, in seconds (0 when there is none)."""
        return self.backoff_ms[0] / 1000 if self.backoff_ms else 0.0


@dataclass(frozen=True)
class Notification:
    status: str = "none"
    route: str | None = None
    channels: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: Any) -> Notification | None:
        if not isinstance(data, dict):
            return None
        return cls(status=str(data.get("status") or "none"), route=data.get("route"),
                   channels=[str(c) for c in data.get("channels") or []])


@dataclass(frozen=True)
class Classification:
    """The service's Classification. `class_` is the JSON `class` (a Python keyword)."""

    id: str
    class_: str
    reason: str
    provider: str | None
    provider_kind: str | None
    retryable: bool
    rule: str | None
    decided_by: str
    confidence: float
    recovery: Recovery
    details: dict[str, Any]
    rules_version: str
    notification: Notification | None = None
    explain: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Classification:
        """Raises KeyError or TypeError when `data` is not a Classification at all."""
        return cls(
            id=str(data["id"]),
            class_=str(data["class"]),
            reason=str(data["reason"]),
            provider=data.get("provider"),
            provider_kind=data.get("provider_kind"),
            retryable=bool(data["retryable"]),
            rule=data.get("rule"),
            decided_by=str(data.get("decided_by") or "rule"),
            confidence=float(data.get("confidence", 1.0)),
            recovery=Recovery.from_json(data.get("recovery")),
            details=dict(data.get("details") or {}),
            rules_version=str(data.get("rules_version") or ""),
            notification=Notification.from_json(data.get("notification")),
            explain=data.get("explain"),
        )

    @property
    def hint(self) -> str | None:
        """What to tell the agent: the retry hint, else the feedback hint."""
        return self.recovery.retry_hint or self.recovery.feedback_hint
