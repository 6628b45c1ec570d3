"""Yield points for work done on a thread beside a serving event loop.

A rule reload builds on a worker thread while the event loop serves. Both need the GIL, and
CPython hands it over only when the holder waits or every switch interval (5 ms), to whichever
waiting thread the OS wakes: with a build and its Hyperscan thread runnable, a request's few
dozen microseconds of Python stretched to 30-60 ms. `pace()`, called in the build's loops,
sleeps briefly once per slice, so the loop gets the GIL at least that often. Outside `paced()`
(startup, the CLI) it is a no-op.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
import time
import types
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

SLICE_SECONDS = 0.001  # work this long, then
REST_SECONDS = 0.0005  # give the GIL away this long
BACKGROUND_NICE = 10  # the build's, the literal sets' and the fallback's threads (lower_priority)

_local = threading.local()
_T = TypeVar("_T")


@contextlib.contextmanager
def paced() -> Iterator[None]:
    """Make `pace()` yield on this thread until the block ends."""
    _local.since = time.perf_counter()
    try:
        yield
    finally:
        del _local.since


def lower_priority() -> None:
    """Run the calling thread at nice BACKGROUND_NICE (on Linux nice is per thread; elsewhere
    nothing). A reload's threads share two CPUs with the event loop, and at equal priority the
    loop, woken by a timer, sometimes waited a scheduler slice for a CPU: the longest gaps of a
    10,000-rule reload were 25-42 ms, 18-25 ms with the build threads at nice 10. Only threads
    made for background work call it: a thread cannot raise its priority back unprivileged."""
    if sys.platform == "linux":
        thread = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread, max(BACKGROUND_NICE, os.getpriority(os.PRIO_PROCESS, thread)))


def pace() -> None:
    since: float | None = getattr(_local, "since", None)
    if since is not None and time.perf_counter() - since > SLICE_SECONDS:
        time.sleep(REST_SECONDS)
        _local.since = time.perf_counter()


def paced_each(items: Iterable[_T], every: int = 500) -> Iterator[_T]:
    """`items`, with pace() after every `every` of them: a comprehension over the 10,000-20,000
    items of a large table's index runs 5-30 ms, too long to hold the GIL in one stretch."""
    for count, item in enumerate(items, 1):
        if count % every == 0:
            pace()
        yield item


_NOT_OWNED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)
_RELEASE_SLICE = 1_000  # referents walked, or objects freed, between two pace() calls


def release(holder: list[Any]) -> None:
    """Let go of large object graphs nobody else uses, a slice at a time; empties `holder`.

    Dropping a replaced ruleset of 10,000 rules frees its objects in one cascade of
    deallocations that holds the GIL ~50 ms. Here everything reachable (classes, modules and
    functions aside) is first held in a list, parents before children; the list is then
    dropped front to back, so each object freed finds its children still held, and pace()
    runs between slices. The roots come in a list the caller hands over with its last
    references: a root the caller still held would be freed all at once when it let go."""
    held: list[object] = list(holder)
    holder.clear()
    seen = _IdSet(map(id, held))  # no loop variable here: it would keep the last root alive
    index = 0
    budget = _RELEASE_SLICE
    while index < len(held):
        # Counted by referents, not by objects: one 10,000-rule index is a dict or tuple of
        # 10,000-20,000 items, 10-24 ms to walk, and a few of them came in one slice.
        for child in gc.get_referents(held[index]):
            budget -= 1
            if not budget:
                pace()
                budget = _RELEASE_SLICE
            if not isinstance(child, _NOT_OWNED) and seen.add(id(child)):
                held.append(child)
        index += 1
    seen.clear()
    held.reverse()  # parents last, so deleting from the end frees parents first
    while held:
        pace()
        del held[-_RELEASE_SLICE:]


class _IdSet:
    """A set of ids in many small sets: a 10,000-rule ruleset is ~2 million objects, and one set
    of their ids stalled the loop 25 ms each time it grew (rehashing) and again when cleared."""

    def __init__(self, values: Iterable[int], shards: int = 1024) -> None:
        self._shards: list[set[int]] = [set() for _ in range(shards)]
        for value in values:
            self.add(value)

    def add(self, value: int) -> bool:
        """Add `value`; whether it was new."""
        shard = self._shards[(value >> 4) % len(self._shards)]
        if value in shard:
            return False
        shard.add(value)
        return True

    def clear(self) -> None:
        for shard in self._shards:
            pace()
            shard.clear()
