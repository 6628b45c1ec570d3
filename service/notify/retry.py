"""The retry stage: the only place that waits and tries again.

Only transient failures (DeliveryError.transient: connection errors, timeouts, SMTP 4xx,
HTTP 408/429/5xx) are retried, with exponential backoff and jitter, never sooner than a
Retry-After the channel reported, and never past the overall deadline.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from service.errors import DeliveryError

Sleep = Callable[[float], Awaitable[object]]


@dataclass(frozen=True)
class Backoff:
    base: float
    cap: float
    jitter: Callable[[], float]  # uniform in [0, 1)

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Equal jitter: half of the exponential step fixed, half random; at least Retry-After."""
        step = min(self.cap, self.base * 2.0**retry)
        return max(step / 2 + self.jitter() * step / 2, retry_after or 0.0)


@dataclass(frozen=True)
class Retrier:
    backoff: Backoff
    clock: Callable[[], float]
    sleep: Sleep

    async def run(self, attempt: Callable[[], Awaitable[None]], deadline: float,
                  on_retry: Callable[[DeliveryError, float], None]) -> int:
        """Call `attempt` until it returns; returns the number of attempts made.
        Raises the last DeliveryError when it is permanent or the next try would pass the deadline."""
        retry = 0
        while True:
            try:
                await attempt()
                return retry + 1
            except DeliveryError as exc:
                delay = self.backoff.delay(retry, exc.retry_after)
                if not exc.transient or self.clock() + delay > deadline:
                    raise
                on_retry(exc, delay)
            await self.sleep(delay)
            retry += 1
