"""The throttle stage: at most one notification per group key within the route's window.

In memory and per process (with N worker processes a group can be notified up to N
times per window). Bounded: past `max_keys`, expired keys are swept, then the oldest go.
With Redis the verdict is shared (outbox.py); a Throttle then only remembers the windows Redis
reported (`hold`), so repeats of a group already throttled are answered in process (`held`).
"""

from __future__ import annotations

from collections.abc import Hashable


class Throttle:
    def __init__(self, max_keys: int) -> None:
        self._max_keys = max_keys
        self._until: dict[Hashable, float] = {}

    def admit(self, key: Hashable, window: float, now: float) -> bool:
        """True (and the window starts) if no notification of this group went out within the window."""
        if window <= 0:
            return True
        until = self._until.get(key)
        if until is not None and now < until:
            return False
        self._until.pop(key, None)  # re-insert at the end: dict order is then oldest first
        self._until[key] = now + window
        if len(self._until) > self._max_keys:
            self._shrink(now)
        return True

    def held(self, key: Hashable, now: float) -> bool:
        """True while a window remembered for this group is still open."""
        until = self._until.get(key)
        return until is not None and now < until

    def hold(self, key: Hashable, until: float, now: float) -> None:
        """Remember that this group's window is open until `until` (as a shared store reported it)."""
        self._until.pop(key, None)
        self._until[key] = until
        if len(self._until) > self._max_keys:
            self._shrink(now)

    def release(self, key: Hashable) -> None:
        """Forget a group whose notification was never queued (dropped), so the next one may go."""
        self._until.pop(key, None)

    def __len__(self) -> int:
        return len(self._until)

    def _shrink(self, now: float) -> None:
        for key in [k for k, until in self._until.items() if until <= now]:
            del self._until[key]
        while len(self._until) > self._max_keys:
            del self._until[next(iter(self._until))]
