"""The queue stage on Redis (ERRTRIAGE_REDIS_URL): N processes and replicas act as one service.

    dispatch() -> Outbox (outbox.py: bounded buffer; a writer takes the shared throttle verdict
                  and XADDs to the stream, one pipelined round trip per batch)
    stream errtriage:notify:stream, consumer group errtriage-notify; every process is a consumer
    (hostname:pid:random) with N worker tasks:
        XREADGROUP one entry -> rebuild the Delivery against the serving rules (entry.py)
        -> Deliverer (render, the same retry stage: backoff, Retry-After, deadline) -> channel
        -> XACK + XDEL, only once the channel accepted it or it finally failed (counted, logged)
    a housekeeping task, every tick:
        stream length and pending count into the gauges (and Redis's state for /readyz);
        every claim/3 s: XCLAIM JUSTID of the entries this process holds, which resets their idle
            time, so a long retry of a live process is never taken for a dead one's;
        every claim/2 s: XAUTOCLAIM of entries idle for ERRTRIAGE_NOTIFY_CLAIM_SECONDS (their
            process died: SIGKILL, OOM, a lost node), handed to this process's workers.

Acknowledged entries are deleted, so the stream holds exactly what is not yet delivered (that is
how it is trimmed; MAXLEN would trim entries still unacknowledged). At shutdown the outbox is
written out within the grace period, in-flight sends may finish, and what is still held stays
pending in Redis for another process to claim: it is not counted failed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError, ResponseError

from service.errors import EntryUnusable
from service.metrics import Metrics
from service.models import NotificationStatus
from service.notify.delivery import Deliverer, Delivery
from service.notify.entry import decode
from service.notify.outbox import PREFIX, Outbox
from service.notify.queue import Rules, cancel_tasks, count
from service.notify.throttle import Throttle
from service.settings import Settings

STREAM = PREFIX + "notify:stream"
GROUP = "errtriage-notify"
BLOCK_MS = 1000  # how long a worker's XREADGROUP waits; also how soon it sees a shutdown
CLAIM_BATCH = 100
SOCKET_TIMEOUT_SECONDS = 5.0  # above BLOCK_MS; a hung Redis fails an operation after this
RETRY_FIRST_SECONDS, RETRY_MAX_SECONDS = 0.1, 2.0
NOT_WRITTEN = "not written to Redis before shutdown"
# XREADGROUP's reply as this client gets it (RESP2, bytes: no decode_responses); redis-py's
# annotation is the union over every protocol and decoding.
StreamReply = list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]


def consumer_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def connect(url: str) -> Redis:
    """A client whose operations fail fast when Redis is away (one immediate retry, for a connection
    a Redis restart closed), instead of redis-py's default of three retries with backoff."""
    return Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT_SECONDS, socket_connect_timeout=2.0,
                          retry=Retry(NoBackoff(), 1), health_check_interval=30)


class RedisQueue:
    def __init__(self, settings: Settings, metrics: Metrics, deliverer: Deliverer, logger: logging.Logger,
                 clock: Callable[[], float]) -> None:
        assert settings.redis_url is not None
        self._settings = settings
        self._metrics = metrics
        self._deliverer = deliverer
        self._logger = logger
        self._clock = clock
        self._claim_seconds = settings.notify_claim_seconds
        self.consumer = consumer_name()
        self._client = connect(settings.redis_url)
        self._hints = Throttle(settings.notify_throttle_max_keys)
        self._outbox = Outbox(self._client, STREAM, metrics, logger, settings.notify_queue_size,
                              settings.notify_stream_max_length, self._redis, self._hints)
        self._rules: Rules = lambda: None
        self._held: set[bytes] = set()  # entries this process read or claimed and has not acked
        self._claimed: asyncio.Queue[tuple[bytes, bytes]] = asyncio.Queue()
        self._workers: list[asyncio.Task[None]] = []
        self._background: list[asyncio.Task[None]] = []
        self._up: bool | None = None
        self._closed = False
        self._stopping = False

    # -- the request path (synchronous) -----------------------------------------------------------

    def submit(self, item: Delivery) -> NotificationStatus:
        """`throttled` at once when Redis already reported this group's window open; else buffered
        for the writer, which takes the shared verdict (counted `throttled` there if so)."""
        if self._hints.held(item.throttle_key, time.monotonic()):
            count(self._metrics, item, "throttled")
            return NotificationStatus.throttled
        return NotificationStatus.queued if self._outbox.put(item, self._closed) else NotificationStatus.dropped

    def full(self) -> bool:
        return self._outbox.full()

    def state(self) -> dict[str, str]:
        return {"redis": "up" if self._up else "down"}

    # -- Redis's health, as every operation sees it ----------------------------------------------

    def _redis(self, ok: bool, operation: str) -> None:
        if not ok:
            self._metrics.redis_errors.labels(operation).inc()
        if ok is not self._up:
            if ok:
                self._logger.info("Redis is reachable", extra={"operation": operation})
            else:
                self._logger.warning("Redis is unreachable", extra={"operation": operation})
            self._up = ok
            self._metrics.redis_up.set(1 if ok else 0)

    async def _ensure_group(self) -> None:
        try:
            await self._client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self, rules: Rules) -> None:
        if self._workers:
            return
        self._rules = rules
        try:
            await self._ensure_group()
            self._redis(True, "group")
        except RedisError as exc:  # classification must not need Redis: the workers try again
            self._redis(False, "group")
            self._logger.warning("Redis is unreachable at startup; notifications wait in the outbox",
                                 extra={"error": str(exc)})
        self._background = [asyncio.create_task(self._outbox.run(), name="errtriage-outbox"),
                            asyncio.create_task(self._housekeeping(), name="errtriage-notify-claims")]
        self._workers = [asyncio.create_task(self._work(), name=f"errtriage-notify-{n}")
                         for n in range(self._settings.notify_workers)]

    async def drain(self) -> None:
        """Wait until the outbox is written and the stream holds nothing undelivered."""
        while True:
            try:
                if not len(self._outbox) and not await self._client.xlen(STREAM):
                    return
            except RedisError:
                pass
            await asyncio.sleep(0.05)

    async def stop(self, grace: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        self._closed = True
        while len(self._outbox) and loop.time() < deadline:
            await asyncio.sleep(0.05)
        self._stopping = True  # workers take nothing new; what they hold may finish within the grace
        if self._workers:
            await asyncio.wait(self._workers, timeout=max(0.0, deadline - loop.time()))
        await cancel_tasks(self._workers + self._background, self._logger)
        self._workers, self._background = [], []
        for item in self._outbox.abandon():
            self._deliverer.fail(item, None, NOT_WRITTEN)
        if self._held:
            self._logger.info("notifications left pending in Redis for another process",
                              extra={"held": len(self._held), "consumer": self.consumer})
        await self._client.aclose()

    # -- the workers -------------------------------------------------------------------------------

    async def _work(self) -> None:
        wait = RETRY_FIRST_SECONDS
        while not self._stopping:
            try:
                entry = self._claimed.get_nowait() if not self._claimed.empty() else await self._read()
            except RedisError as exc:
                self._redis(False, "read")
                if "NOGROUP" in str(exc):  # Redis lost the group (restarted without persistence)
                    await self._recreate_group()
                await asyncio.sleep(wait)
                wait = min(wait * 2, RETRY_MAX_SECONDS)
                continue
            wait = RETRY_FIRST_SECONDS
            if entry is not None:
                await self._handle(*entry)

    async def _recreate_group(self) -> None:
        try:
            await self._ensure_group()
        except RedisError:
            self._redis(False, "group")

    async def _read(self) -> tuple[bytes, bytes] | None:
        reply = await self._client.xreadgroup(GROUP, self.consumer, {STREAM: ">"}, count=1, block=BLOCK_MS)
        self._redis(True, "read")
        if not reply:
            return None
        [(_, [(entry_id, fields)])] = cast(StreamReply, reply)
        self._held.add(entry_id)
        return entry_id, fields.get(b"n", b"")

    async def _handle(self, entry_id: bytes, data: bytes) -> None:
        """Deliver one entry, then acknowledge it. Cancelled (shutdown), it stays pending for others."""
        try:
            ruleset: Any = self._rules()
            item = decode(data, ruleset.notify if ruleset is not None else None)
        except EntryUnusable as exc:
            self._deliverer.give_up(exc.channel, exc.class_, exc.summary, str(exc))
        else:
            try:
                await self._deliverer.deliver(item)
            except asyncio.CancelledError:
                self._held.discard(entry_id)
                raise
        await self._ack(entry_id)

    async def _ack(self, entry_id: bytes) -> None:
        """XACK and XDEL, retried until Redis takes them: an entry never acked is delivered again."""
        wait = RETRY_FIRST_SECONDS
        while True:
            try:
                async with self._client.pipeline(transaction=True) as pipe:
                    pipe.xack(STREAM, GROUP, entry_id)
                    pipe.xdel(STREAM, entry_id)
                    await pipe.execute()
                self._redis(True, "ack")
                self._held.discard(entry_id)
                return
            except RedisError:
                self._redis(False, "ack")
                await asyncio.sleep(wait)
                wait = min(wait * 2, RETRY_MAX_SECONDS)

    # -- housekeeping: gauges, ownership, claims ---------------------------------------------------

    async def _housekeeping(self) -> None:
        tick = min(1.0, self._claim_seconds / 4)
        refresh_every, claim_every = self._claim_seconds / 3, self._claim_seconds / 2
        loop = asyncio.get_running_loop()
        next_refresh = next_claim = loop.time()
        while True:
            await self._step("stats", self._stats())
            now = loop.time()
            if now >= next_refresh:
                next_refresh = now + refresh_every
                await self._step("refresh", self._refresh())
            if now >= next_claim:
                next_claim = now + claim_every
                await self._step("claim", self._claim())
            await asyncio.sleep(tick)

    async def _step(self, operation: str, step: Any) -> None:
        try:
            await step
            self._redis(True, operation)
        except RedisError as exc:
            self._redis(False, operation)
            if "NOGROUP" in str(exc):
                await self._recreate_group()

    async def _stats(self) -> None:
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.xlen(STREAM)
            pipe.xpending(STREAM, GROUP)
            length, pending = await pipe.execute()
        self._metrics.stream_length.set(length)
        self._metrics.stream_pending.set(pending["pending"])

    async def _refresh(self) -> None:
        """Reset the idle time of every entry this process holds (sending, retrying or about to)."""
        if self._held:
            await self._client.xclaim(STREAM, GROUP, self.consumer, min_idle_time=0,
                                      message_ids=list(self._held), justid=True)

    async def _claim(self) -> None:
        """Take over entries no live process refreshed within the claim time."""
        reply = await self._client.xautoclaim(STREAM, GROUP, self.consumer, int(self._claim_seconds * 1000),
                                              start_id="0-0", count=CLAIM_BATCH)
        for entry_id, fields in reply[1]:
            if entry_id in self._held or not fields:
                continue
            self._held.add(entry_id)
            self._claimed.put_nowait((entry_id, fields.get(b"n", b"")))
            self._metrics.claims.inc()
            self._logger.info("notification claimed from a silent consumer",
                              extra={"entry": entry_id.decode(), "consumer": self.consumer})
