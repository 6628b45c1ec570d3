"""The `log` channel: the whole notification as one log record. Never fails."""

from __future__ import annotations

import logging

from service.notify.outgoing import Outgoing


class LogChannel:
    def __init__(self, logger: logging.Logger, note: str | None = None) -> None:
        self._logger = logger
        self._note = note

    async def send(self, out: Outgoing) -> None:
        extra = out.summary()
        if self._note:
            extra["note"] = self._note
        self._logger.info("notification", extra=extra)
