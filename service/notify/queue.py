"""Where dispatch() puts a notification, and who takes it out: the queue stage, two ways.

    MemoryQueue (the embedded default): the throttle and a bounded asyncio queue of this
        process, N worker tasks. Per process: N processes may notify a group N times a window,
        and a killed process loses what it held.
    RedisQueue (ERRTRIAGE_REDIS_URL, redis_queue.py): a bounded outbox, a shared throttle and a
        Redis Stream with one consumer group, so every process and replica acts as one service.

Both take a Delivery from dispatch() without waiting and hand it to the same Deliverer
(render -> retry -> channel); this module also holds the pieces they share.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from service.metrics import Metrics
from service.models import NotificationStatus
from service.notify.delivery import Deliverer, Delivery
from service.notify.throttle import Throttle
from service.settings import Settings

Deliver = Callable[[Delivery], Awaitable[None]]
Rules = Callable[[], Any]  # the serving Ruleset, read when a stored notification is delivered
NOT_DELIVERED = "not delivered before shutdown"
_CANCEL_ROUNDS = 5
_CANCEL_WAIT_SECONDS = 1.0


class DeliveryQueue(Protocol):
    def submit(self, item: Delivery) -> NotificationStatus:
        """Synchronous, never waits: queued, throttled or dropped (each counted)."""

    def full(self) -> bool: ...

    def state(self) -> dict[str, str]:
        """What /readyz adds about the queue's backing store."""

    async def start(self, rules: Rules) -> None: ...

    async def drain(self) -> None:
        """Wait until everything queued was delivered or finally failed."""

    async def stop(self, grace: float) -> None: ...


def count(metrics: Metrics, item: Delivery, outcome: str) -> None:
    metrics.notification_count(item.channel.id, item.class_, outcome).inc()


def dropped(metrics: Metrics, logger: logging.Logger, item: Delivery, why: str) -> NotificationStatus:
    count(metrics, item, "dropped")
    logger.warning(f"notification dropped: {why}",
                   extra={"notification_id": item.notification_id, "channel": item.channel.id})
    return NotificationStatus.dropped


async def cancel_tasks(tasks: list[asyncio.Task[None]], logger: logging.Logger) -> None:
    """Cancel the tasks, and again if one swallowed it: on Python 3.11 a cancellation that lands
    as an inner wait_for finishes can be lost (gh-86296), and a worker stuck in a send must never
    hold shutdown forever."""
    pending = set(tasks)
    for _ in range(_CANCEL_ROUNDS):
        if not pending:
            return
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=_CANCEL_WAIT_SECONDS)
    if pending:
        logger.error("notification workers did not stop", extra={"workers": len(pending)})


class MemoryQueue:
    """The throttle and a bounded queue of this process; N worker tasks deliver."""

    def __init__(self, settings: Settings, metrics: Metrics, deliver: Deliverer, logger: logging.Logger) -> None:
        self._settings = settings
        self._metrics = metrics
        self._deliverer = deliver
        self._logger = logger
        self._queue: asyncio.Queue[Delivery] = asyncio.Queue(settings.notify_queue_size)
        metrics.queue_capacity.set(settings.notify_queue_size)
        self._throttle = Throttle(settings.notify_throttle_max_keys)
        self._workers: list[asyncio.Task[None]] = []
        self._closed = False

    def submit(self, item: Delivery) -> NotificationStatus:
        if not self._throttle.admit(item.throttle_key, item.throttle_window, item.created):
            count(self._metrics, item, "throttled")
            return NotificationStatus.throttled
        if self._closed or self._queue.full():
            self._throttle.release(item.throttle_key)  # never queued: the next one of the group may go
            return dropped(self._metrics, self._logger, item, "shutting down" if self._closed else "the queue is full")
        self._queue.put_nowait(item)
        self._metrics.queue_depth.set(self._queue.qsize())
        return NotificationStatus.queued

    def full(self) -> bool:
        return self._queue.full()

    def state(self) -> dict[str, str]:
        return {}

    async def start(self, rules: Rules) -> None:
        if not self._workers:
            self._workers = [asyncio.create_task(self._work(), name=f"errtriage-notify-{n}")
                             for n in range(self._settings.notify_workers)]

    async def _work(self) -> None:
        while True:
            item = await self._queue.get()
            self._metrics.queue_depth.set(self._queue.qsize())
            try:
                await self._deliverer.deliver(item)
            except asyncio.CancelledError:
                self._deliverer.fail(item, None, NOT_DELIVERED)
                raise
            finally:
                self._queue.task_done()

    async def drain(self) -> None:
        await self._queue.join()

    async def stop(self, grace: float) -> None:
        """Stop taking notifications, drain for up to `grace` seconds, then cancel the workers.
        Whatever was not delivered by then is logged and counted `failed`."""
        self._closed = True
        if self._workers:
            try:
                await asyncio.wait_for(self._queue.join(), timeout=grace)
            except TimeoutError:
                self._logger.warning("notification queue not drained within the grace period",
                                     extra={"grace_seconds": grace, "queued": self._queue.qsize()})
        await cancel_tasks(self._workers, self._logger)
        self._workers = []
        while not self._queue.empty():
            self._deliverer.fail(self._queue.get_nowait(), None, NOT_DELIVERED)
            self._queue.task_done()
        self._metrics.queue_depth.set(0)
