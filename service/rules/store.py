"""The current Ruleset: one reference, swapped only after a complete new one is built.

A request reads `store.current` once and keeps that object, so a reload mid-request
never changes the rules it runs on. Reloads come from the file watcher (debounced),
SIGHUP, or the admin endpoint; all go through `reload()`, serialised by a lock.

The learned fallback is trained after the rules serve, in a child process watched from a
thread (training_process.py; seconds): startup and reloads never wait for it. When it is
trained, the same rules with it are swapped in, unless a newer load came first.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from watchfiles import awatch

from service.errors import RuleError, RulesInvalid
from service.metrics import Metrics
from service.pacing import lower_priority, paced, release
from service.rules.engine import Ruleset
from service.rules.loader import NotifyBuilder, gc_paused, load_ruleset
from service.rules.training_process import StaleRules, Trainer, TrainingFailed

log = logging.getLogger("errtriage.rules")

DEBOUNCE_MS = 800  # a half-saved file settles within this; a change still shows within 5 s


class RuleStore:
    def __init__(self, root: Path, metrics: Metrics, notify_builder: NotifyBuilder | None = None,
                 clock: Callable[[], float] = time.time, fallback_min_confidence: float | None = None,
                 regex_scanner: bool = False) -> None:
        self.root = root
        self._regex_scanner = regex_scanner
        self._fallback_min_confidence = fallback_min_confidence
        self._metrics = metrics
        self._notify_builder = notify_builder
        self._clock = clock
        self._current: Ruleset | None = None
        self._lock = asyncio.Lock()
        self._swap_lock = threading.Lock()
        self._trainer = Trainer()
        self._builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="errtriage-reload",
                                           initializer=lower_priority)  # its thread starts with the first reload
        self._thread: threading.Thread | None = None
        self._generation = 0  # loads swapped in so far: a training applies only to its own
        self._stopping = False
        self.fallback_state = "off" if fallback_min_confidence is None else "none"
        self.last_errors: list[RuleError] = []
        self.match_counts: dict[str, int] = {}

    @property
    def current(self) -> Ruleset:
        if self._current is None:
            raise RuntimeError("no ruleset loaded yet")
        return self._current

    @property
    def ready(self) -> bool:
        return self._current is not None

    @property
    def scanner_state(self) -> str:
        """off, compiling, ready or failed (what /readyz reports as regex_scanner)."""
        if not self._regex_scanner or self._current is None:
            return "off"
        return self._current.matcher.scanner_state()

    def load_now(self) -> Ruleset:
        """Synchronous load and swap (startup, CLI). Raises RulesInvalid; the old rules stay.

        The cyclic GC stays off from the build until everything alive is frozen (gc.freeze): a
        ruleset lives until a reload replaces it, and a collection that scanned one of 10,000
        rules paused the event loop for ~400 ms. Frozen objects are still freed by reference
        counting, so a replaced ruleset (no reference cycles; tests/test_lifecycle.py counts)
        goes when its last request lets go of it."""
        try:
            with gc_paused():
                ruleset = load_ruleset(self.root, self._notify_builder, previous=self._current)
                gc.freeze()
        except RulesInvalid as exc:
            self.last_errors = exc.errors
            self._metrics.reload_failed()
            log.error("rules reload failed", extra={"errors": [str(e) for e in exc.errors]})
            raise
        self._swap(ruleset)
        return ruleset

    async def reload(self) -> Ruleset:
        """Build off the event loop, paced (pacing.py), then swap. Raises RulesInvalid; the old
        rules keep serving."""
        async with self._lock:
            return await asyncio.get_running_loop().run_in_executor(self._builder, self._load_paced)

    def _load_paced(self) -> Ruleset:
        with paced():
            return self.load_now()

    def _swap(self, ruleset: Ruleset) -> None:
        if self._regex_scanner:
            ruleset.matcher.start_scanners()
        with self._swap_lock:
            replaced, self._current = self._current, ruleset
            self._generation += 1
        self.last_errors = []
        if self._fallback_min_confidence is not None:
            self.fallback_state = "training"
            self._trainer.stop()  # an older ruleset's training: nobody will use its answer
            self._thread = threading.Thread(target=self._train, name="errtriage-fallback",
                                            args=(ruleset.version, self._generation, self._fallback_min_confidence))
            self._thread.start()
        notify = ruleset.notify
        counts = {
            "classes": len(ruleset.classes),
            "rules": len(ruleset.rules),
            "providers": len(ruleset.providers),
            **(notify.counts() if notify is not None else {}),
        }
        self._metrics.rules_swapped(
            ruleset.version, counts, ruleset.reasons(), [r.id for r in ruleset.rules],
            notify.label_sets() if notify is not None else [], self._clock(),
        )
        log.info("rules loaded", extra={"version": ruleset.version, "rules": len(ruleset.rules)})
        if replaced is not None:  # requests read `current` once, never across an await; anyone still
            doomed = [replaced]      # holding it (a delivery under way) frees what is left when done
            del replaced
            release(doomed)

    def _train(self, version: str, generation: int, min_confidence: float) -> None:
        """Train for the load numbered `generation`; holds no ruleset, so a replaced one is
        released by the swap (release() in pacing.py), not here in one go."""
        lower_priority()
        started = time.perf_counter()
        try:
            fallback = self._trainer.train(version, self.root, min_confidence)
        except (StaleRules, TrainingFailed) as exc:
            with self._swap_lock:
                if self._generation != generation or self._stopping:
                    return  # stopped on purpose: a newer load trains its own, or the process is stopping
                self.fallback_state = "stale" if isinstance(exc, StaleRules) else "failed"
            log.error("fallback not trained; the rules alone keep serving",
                      extra={"version": version, "state": self.fallback_state, "error": str(exc)})
            return
        with self._swap_lock:
            if self._generation != generation or self._current is None:
                return  # a newer load came first: its own training is under way
            if fallback is not None:
                self._current = replace(self._current, fallback=fallback)
                # Out of the cyclic GC's sight, as load_now does for the rules: the model and the
                # scikit-learn modules it imported are ~58,000 objects, and every full collection
                # that scanned them paused the event loop for 35-70 ms.
                gc.freeze()
            self.fallback_state = "ready" if fallback is not None else "none"
        log.info("fallback trained", extra={"version": version, "state": self.fallback_state,
                                            "seconds": round(time.perf_counter() - started, 2)})

    def stop_training(self, timeout: float) -> None:
        """Terminate a training under way and wait for its thread (shutdown)."""
        self._stopping = True
        self._trainer.stop()
        if self._thread is not None:
            self._thread.join(timeout)

    def count_match(self, rule_id: str | None) -> None:
        if rule_id is not None:
            self.match_counts[rule_id] = self.match_counts.get(rule_id, 0) + 1

    async def watch(self, stop: asyncio.Event) -> None:
        """Reload on every settled change under the rules directory until `stop` is set."""
        async for _ in awatch(self.root, stop_event=stop, debounce=DEBOUNCE_MS, recursive=True):
            try:
                await self.reload()
            except RulesInvalid as exc:  # already counted and logged in detail by load_now
                log.warning("rules change refused; the last good rules keep serving",
                            extra={"error_count": len(exc.errors)})
