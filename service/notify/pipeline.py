"""INTERIM (being replaced by the notifications work): the delivery pipeline."""

from __future__ import annotations

from typing import Any

from service.models import NotificationOutcome


class Notifier:
    def __init__(self, settings: Any, metrics: Any) -> None:
        self.settings = settings

    async def start(self) -> None:
        return None

    async def stop(self, grace: float) -> None:
        return None

    def queue_full(self) -> bool:
        return False

    def dispatch(self, classification: Any, error: Any, ruleset: Any) -> NotificationOutcome:
        return NotificationOutcome()
