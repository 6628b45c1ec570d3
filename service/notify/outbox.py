"""The outbox: notifications dispatch() produced, on their way to the shared Redis stream.

dispatch() appends to a bounded in-process buffer and returns: the request never waits on
Redis. A writer task takes up to BATCH items at a time and sends them in one pipelined round
trip; per item, one Lua script takes the throttle verdict and writes the entry atomically:

    stream full (XLEN >= ERRTRIAGE_NOTIFY_STREAM_MAX_LENGTH) -> -1, counted `dropped`
    SET NX PX on the group's throttle key fails               ->  0, counted `throttled`
    else XADD                                                 ->  1, queued in the stream

Every process and replica shares the throttle keys, so a group is notified once per window
whatever process took the report. The script also answers how long the group's window stays
open; the process remembers it (`hints`, bounded), so further repeats of that group are answered
`throttled` by dispatch() itself without a trip to Redis. The hint never outlives the key: it is
measured from before the batch was sent (a FLUSHALL of Redis would not shorten it). Redis down
or slow: items stay in the buffer (at most ERRTRIAGE_NOTIFY_QUEUE_SIZE; past it new ones are
`dropped`, counted and logged) and the writer tries again with backoff. A batch whose reply
was lost may have been written: sent again, its items find their throttle keys taken (counted
`throttled`, the entry is in the stream already); an unthrottled route's item is written twice
(at least once: receivers deduplicate on the id).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import deque
from collections.abc import Callable, Hashable

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from service.batches import write_batches
from service.metrics import Metrics
from service.notify.delivery import Delivery
from service.notify.entry import encode
from service.notify.queue import count, dropped
from service.notify.throttle import Throttle

PREFIX = "errtriage:"
THROTTLE_PREFIX = PREFIX + "throttle:"

ADMIT = """
if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[2]) then return {-1, 0} end
if tonumber(ARGV[1]) > 0 and not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[1]) then
  return {0, redis.call('PTTL', KEYS[2])}
end
redis.call('XADD', KEYS[1], '*', 'n', ARGV[3])
return {1, tonumber(ARGV[1])}
"""  # KEYS: the stream, the group's throttle key. ARGV: window in ms (0: never throttle), max length, entry.
# Returns {verdict, ms the group's window stays open}.


def throttle_key(key: Hashable) -> str:
    """The Redis key of a throttle group (route, channel, group values): the same in every process."""
    return THROTTLE_PREFIX + hashlib.sha256(orjson.dumps(key)).hexdigest()[:32]


class Outbox:
    def __init__(self, client: Redis, stream: str, metrics: Metrics, logger: logging.Logger, capacity: int,
                 max_length: int, on_redis: Callable[[bool, str], None], hints: Throttle) -> None:
        self._client = client
        self._stream = stream
        self._metrics = metrics
        self._logger = logger
        self._capacity = capacity
        self._max_length = max_length
        self._on_redis = on_redis  # (ok, operation): the queue's view of Redis's health
        self._hints = hints  # open windows Redis reported, on time.monotonic()
        self._items: deque[Delivery] = deque()
        self._ready = asyncio.Event()
        self._script = client.register_script(ADMIT)

    def __len__(self) -> int:
        return len(self._items)

    def full(self) -> bool:
        return len(self._items) >= self._capacity

    def put(self, item: Delivery, closed: bool) -> bool:
        """Buffer one notification; False (counted `dropped`, logged) when full or shutting down."""
        if closed or self.full():
            dropped(self._metrics, self._logger, item, "shutting down" if closed else "the outbox is full")
            return False
        self._items.append(item)
        self._metrics.outbox_depth.set(len(self._items))
        self._ready.set()
        return True

    async def run(self) -> None:
        """The writer: until cancelled, write what is buffered, retrying while Redis is unreachable."""
        await write_batches(self._items, self._ready, self._write, self._failed)

    def _failed(self, exc: RedisError, retry_in: float) -> None:
        self._on_redis(False, "write")
        self._logger.warning("notification outbox: Redis write failed; retrying",
                             extra={"error": str(exc), "held": len(self._items), "retry_in_seconds": retry_in})

    async def _write(self, batch: list[Delivery]) -> None:
        """One pipelined round trip: the throttle verdict and the XADD of each item, atomically."""
        sent_at = time.monotonic()
        async with self._client.pipeline(transaction=False) as pipe:
            for item in batch:
                window_ms = int(item.throttle_window * 1000)
                await self._script(keys=[self._stream, throttle_key(item.throttle_key)],
                                   args=[window_ms, self._max_length, encode(item)], client=pipe)
            verdicts = [(int(verdict), int(open_ms)) for verdict, open_ms in await pipe.execute()]
        self._on_redis(True, "write")
        for item, (verdict, open_ms) in zip(batch, verdicts, strict=True):
            if open_ms > 0:
                self._hints.hold(item.throttle_key, sent_at + open_ms / 1000, sent_at)
            if verdict == 0:
                count(self._metrics, item, "throttled")
            elif verdict == -1:
                dropped(self._metrics, self._logger, item, "the Redis stream is full")
        self._metrics.outbox_depth.set(len(self._items) - len(batch))  # the batch leaves the buffer next

    def abandon(self) -> list[Delivery]:
        """Empty the buffer (at shutdown, when Redis did not take it in time); returns what it held."""
        left = list(self._items)
        self._items.clear()
        self._metrics.outbox_depth.set(0)
        return left
