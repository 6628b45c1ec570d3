"""pacing.py: a build beside the event loop yields the GIL; a replaced graph is freed a slice at a time."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import weakref
from collections import Counter

import pytest

from service import pacing
from service.pacing import lower_priority, pace, paced, release


class Leaf:
    pass


def test_release_frees_every_object_and_empties_the_holder() -> None:
    leaves = [Leaf() for _ in range(5000)]
    refs = [weakref.ref(leaf) for leaf in leaves]
    graph = {"rules": tuple({"id": i, "leaf": leaf} for i, leaf in enumerate(leaves)), "by_id": dict(enumerate(leaves))}
    holder: list[object] = [graph]
    del graph, leaves
    was = gc.isenabled()
    gc.disable()  # freed by reference counting alone, as a frozen ruleset is
    try:
        release(holder)
        assert holder == [] and all(ref() is None for ref in refs)
    finally:
        if was:
            gc.enable()


def test_release_frees_a_slice_at_a_time_never_in_one_cascade(monkeypatch: pytest.MonkeyPatch) -> None:
    """Objects die between pace() calls, a slice at a time; none waits for the root to go at the
    end (a leftover reference to the root would free the whole graph in one cascade)."""
    paces = [0]
    deaths: list[int] = []

    class Counted:
        def __del__(self) -> None:
            deaths.append(paces[0])

    monkeypatch.setattr(pacing, "pace", lambda: paces.__setitem__(0, paces[0] + 1))
    holder: list[object] = [{"rules": [[Counted()] for _ in range(10_000)]}]
    release(holder)
    assert len(deaths) == 10_000
    assert max(Counter(deaths).values()) <= pacing._RELEASE_SLICE


def test_release_leaves_alone_what_someone_else_still_holds() -> None:
    """It only drops its own references: a container still held elsewhere keeps its contents,
    and what only the released graph held is freed."""
    shared = [Leaf(), Leaf()]
    lone = Leaf()
    gone = weakref.ref(lone)
    holder: list[object] = [{"shared": shared, "lone": [lone]}]
    del lone
    release(holder)
    assert len(shared) == 2 and all(isinstance(leaf, Leaf) for leaf in shared)
    assert gone() is None


def test_pace_lets_another_thread_in_only_inside_paced() -> None:
    def busy(seconds: float, inside: bool) -> int:
        """Spin for `seconds` while another thread counts how often it ran."""
        runs = 0
        stop = threading.Event()

        def counter() -> None:
            nonlocal runs
            while not stop.is_set():
                runs += 1
                time.sleep(0)

        thread = threading.Thread(target=counter)
        thread.start()
        end = time.perf_counter() + seconds
        if inside:
            with paced():
                while time.perf_counter() < end:
                    pace()
        else:
            while time.perf_counter() < end:
                pace()
        stop.set()
        thread.join()
        return runs

    assert busy(0.2, inside=True) > 2 * busy(0.2, inside=False)


def test_release_walks_a_wide_container_a_slice_of_items_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """One index of a large ruleset holds tens of thousands of items (10-24 ms to walk): the walk
    paces by items seen, not by containers, so no slice is a whole container."""
    seen_since_pace = [0]
    most = [0]
    real_add = pacing._IdSet.add

    def counting_add(self: pacing._IdSet, value: int) -> bool:
        seen_since_pace[0] += 1
        most[0] = max(most[0], seen_since_pace[0])
        return real_add(self, value)

    monkeypatch.setattr(pacing, "pace", lambda: seen_since_pace.__setitem__(0, 0))
    monkeypatch.setattr(pacing._IdSet, "add", counting_add)
    holder: list[object] = [tuple(Leaf() for _ in range(5 * pacing._RELEASE_SLICE))]
    release(holder)
    assert pacing._RELEASE_SLICE // 2 < most[0] <= pacing._RELEASE_SLICE


@pytest.mark.skipif(sys.platform != "linux", reason="nice is per thread on Linux only")
def test_lower_priority_lowers_only_the_calling_thread() -> None:
    niceness: list[int] = []

    def background() -> None:
        lower_priority()
        niceness.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    thread = threading.Thread(target=background)
    thread.start()
    thread.join()
    assert niceness == [max(before, pacing.BACKGROUND_NICE)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before
