"""A bounded buffer written to Redis in batches by one task, off the request path.

The notification outbox and the unknowns recorder both take what the request path hands
them without waiting and write it in pipelined batches. While Redis is unreachable the
batch stays at the head of the buffer and the write is retried after a doubling wait.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from itertools import islice
from typing import TypeVar

from redis.exceptions import RedisError

BATCH = 256
RETRY_FIRST_SECONDS, RETRY_MAX_SECONDS = 0.1, 2.0

Item = TypeVar("Item")


async def write_batches(items: deque[Item], ready: asyncio.Event, write: Callable[[list[Item]], Awaitable[None]],
                        failed: Callable[[RedisError, float], None], idle: asyncio.Event | None = None) -> None:
    """Until cancelled: when `ready` is set, `write` up to BATCH items from the head of
    `items`, then drop them from it. A RedisError keeps them there; `failed` hears of it with
    the wait before the next try. `idle` is set whenever the buffer is empty."""
    wait = RETRY_FIRST_SECONDS
    while True:
        await ready.wait()
        if not items:
            ready.clear()
            if idle is not None:
                idle.set()
            continue
        batch = list(islice(items, BATCH))
        try:
            await write(batch)
        except RedisError as exc:
            failed(exc, wait)
            await asyncio.sleep(wait)
            wait = min(wait * 2, RETRY_MAX_SECONDS)
            continue
        wait = RETRY_FIRST_SECONDS
        for _ in batch:
            items.popleft()
