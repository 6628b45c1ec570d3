"""Recording unknowns off the request path, and reading the inbox with drafted rules.

/v1/errors calls `record()` for a report no rule decided (decided_by "none" or "fallback"):
it appends to a bounded buffer and returns; classification never waits on it or on Redis. A
writer task takes up to BATCH reports at a time, redacts and fingerprints them (the example,
its shape, the fallback's verdict) and hands them to the store in one round trip. When the
buffer is full, or Redis is down long enough to fill it, further reports are not recorded
(counted in `dropped`); they were still classified, counted and notified.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from datetime import UTC, datetime
from typing import Any

from redis.exceptions import RedisError, ResponseError

from service.batches import write_batches
from service.models import Classification, ErrorReport
from service.normalize import normalize
from service.rules.engine import Ruleset
from service.settings import Settings
from service.unknowns.draft import draft_rule, example_of
from service.unknowns.fingerprint import shape_of
from service.unknowns.inbox import Group, Inbox, MemoryInbox, RedisInbox, Sighting

log = logging.getLogger("errtriage.unknowns")


def sighting(report: ErrorReport, decided_by: str, suggested: dict[str, Any] | None, seen: float) -> Sighting:
    example = example_of(report)
    shape = shape_of(normalize(ErrorReport.model_validate(example)))
    return Sighting(shape.key, seen, example, suggested if decided_by == "fallback" else None)


def build_inbox(settings: Settings) -> Inbox:
    if settings.redis_url is None:
        return MemoryInbox(settings.unknowns_max_groups)
    from service.notify.redis_queue import connect

    return RedisInbox(connect(settings.redis_url), settings.unknowns_max_groups)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def group_view(group: Group, ruleset: Ruleset) -> dict[str, Any]:
    """One group as GET /v1/unknowns and `errtriage suggest` show it."""
    return {"fingerprint": group.fingerprint, "count": group.count, "count_error": group.error,
            "first_seen": _iso(group.first_seen), "last_seen": _iso(group.last_seen), "example": group.example,
            "suggested": group.suggested,
            "draft_rule": draft_rule(group.example, ruleset, group.fingerprint, group.count, group.suggested)}


class Recorder:
    def __init__(self, inbox: Inbox, capacity: int) -> None:
        self.inbox = inbox
        self.dropped = 0
        self._capacity = capacity
        self._items: deque[tuple[ErrorReport, str, dict[str, Any] | None, float]] = deque()
        self._ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None

    def record(self, report: ErrorReport, classification: Classification) -> None:
        """Buffer one report (never blocks); over capacity it is counted in `dropped`."""
        if len(self._items) >= self._capacity:
            self.dropped += 1
            return
        suggested = None
        if classification.decided_by == "fallback":
            suggested = {"class": classification.class_, "reason": classification.reason,
                         "provider": classification.provider, "confidence": classification.confidence}
        self._items.append((report, classification.decided_by, suggested, time.time()))
        self._idle.clear()
        self._ready.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self, grace: float) -> None:
        await self.flush(grace)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.inbox.close()

    async def flush(self, timeout: float) -> bool:
        """Wait until what was recorded so far is in the store (True), or `timeout` passed."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False

    async def top(self, limit: int, ruleset: Ruleset) -> dict[str, Any]:
        await self.flush(1.0)
        total, groups = await self.inbox.top(limit)
        return {"total_unknown": total, "groups": [group_view(g, ruleset) for g in groups]}

    async def _run(self) -> None:
        await write_batches(self._items, self._ready, self._write, _failed, idle=self._idle)

    async def _write(self, batch: list[tuple[ErrorReport, str, dict[str, Any] | None, float]]) -> None:
        sightings = []
        for index, (report, decided_by, suggested, seen) in enumerate(batch):
            if index and not index % 32:
                await asyncio.sleep(0)  # let requests in between: fingerprinting is CPU work on the loop
            try:
                sightings.append(sighting(report, decided_by, suggested, seen))
            except Exception:  # one odd report must not stop the inbox
                log.exception("unknowns: could not fingerprint a report")
        try:
            await self.inbox.add(sightings)
        except ResponseError as exc:  # Redis answered, and refused: sending it again would not help
            log.error("unknowns: Redis refused a batch; not recorded", extra={"error": str(exc), "reports": len(batch)})


def _failed(exc: RedisError, retry_in: float) -> None:
    log.warning("unknowns: Redis write failed; retrying", extra={"error": str(exc), "retry_in_seconds": retry_in})

