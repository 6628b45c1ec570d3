"""Event-loop stalls and collection pauses while a large rule set reloads, in the serving process.

Builds the app with the shipped tables plus `--rules` synthetic ones (bench/classify_bench.py's),
runs its lifespan on an event loop, and while traffic runs on that loop (a report triaged every
millisecond, so allocations drive the collector as requests would) it edits one rule and reloads,
with the learned fallback retraining after it as in production. A 1 ms ticker on the loop records
the longest gap between its ticks; gc.callbacks record each collection's pause. Printed: the
reload's wall time, the longest loop gap and the longest collection during the reload and
training, and in the `--after` seconds that follow; the same with nothing reloading first, as the
baseline of this machine's own jitter.

    python bench/reload_bench.py [--rules 10000] [--after 10] [--reloads 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import CollectorRegistry

from bench.classify_bench import SYNTHETIC_FILE, shipped_plus
from service.api.app import create_app
from service.models import ErrorReport
from service.settings import Settings
from service.triage import triage

TICK = 0.001
REPORT = ErrorReport(message="Error code: 429 - {'error': {'message': 'Rate limit reached for gpt-4o in organization "
                             "org-x on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.', "
                             "'type': 'tokens', 'code': 'rate_limit_exceeded'}}")


@dataclass
class Watch:
    """The longest loop gap and collection pause seen since the last `reset`."""

    gap: float = 0.0
    pause: float = 0.0
    pause_generation: int = -1
    collections: int = 0
    _started: float = 0.0
    gaps: list[float] = field(default_factory=list)

    def reset(self) -> None:
        self.gap, self.pause, self.pause_generation, self.collections = 0.0, 0.0, -1, 0

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        self.collections += 1
        if took > self.pause:
            self.pause, self.pause_generation = took, info["generation"]

    async def tick(self, stop: asyncio.Event) -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            self.gap = max(self.gap, now - last - TICK)
            last = now


async def traffic(app: object, stop: asyncio.Event) -> None:
    services = app.state.services  # type: ignore[attr-defined]
    count = 0
    while not stop.is_set():
        count += 1
        report = REPORT.model_copy(update={"message": REPORT.message.replace("org-x", f"org-{count}")})
        triage(report, services.store.current, "bench")
        await asyncio.sleep(TICK)


async def until_trained(store: object, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while store.fallback_state == "training" and time.monotonic() < deadline:  # type: ignore[attr-defined]
        await asyncio.sleep(0.05)


def line(label: str, watch: Watch, seconds: float | None = None) -> str:
    took = f"{seconds:6.2f} s" if seconds is not None else " " * 8
    return (f"{label:34} {took} {watch.gap * 1000:8.1f} ms {watch.pause * 1000:8.1f} ms (gen {watch.pause_generation})"
            f" {watch.collections:6d}")


async def run(rules_dir: Path, synthetic: Path, after: float, reloads: int) -> None:
    app = create_app(Settings(rules_dir=rules_dir, reload_rules=False, log_level="warning", notify_enabled=False),
                     registry=CollectorRegistry())
    watch = Watch()
    gc.callbacks.append(watch.on_gc)
    async with app.router.lifespan_context(app):
        store = app.state.services.store
        await until_trained(store)
        stop = asyncio.Event()
        tasks = [asyncio.create_task(watch.tick(stop)), asyncio.create_task(traffic(app, stop))]
        print(f"{'':34} {'wall':>8} {'loop gap':>11} {'longest collection':>20} {'collections':>6}")
        await asyncio.sleep(1)
        watch.reset()
        await asyncio.sleep(after)
        print(line(f"nothing reloading, {after:.0f} s", watch))
        for attempt in range(reloads):
            text = synthetic.read_text()
            synthetic.write_text(text.replace("priority: -1", "priority: -2", 1) if attempt % 2 == 0
                                 else text.replace("priority: -2", "priority: -1", 1))
            watch.reset()
            started = time.perf_counter()
            await store.reload()
            swapped = time.perf_counter() - started
            print(line(f"reload {attempt + 1}: rules swapped", watch, swapped))
            watch.reset()
            started = time.perf_counter()
            await until_trained(store)
            print(line(f"reload {attempt + 1}: fallback retrained", watch, time.perf_counter() - started))
            watch.reset()
            await asyncio.sleep(after)
            print(line(f"reload {attempt + 1}: the {after:.0f} s after", watch))
        stop.set()
        await asyncio.gather(*tasks)
    gc.callbacks.remove(watch.on_gc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rules", type=int, default=10_000)
    parser.add_argument("--after", type=float, default=10.0)
    parser.add_argument("--reloads", type=int, default=3)
    opts = parser.parse_args()
    with shipped_plus(opts.rules, random.Random(7)) as (rules, _):
        asyncio.run(run(rules, rules / SYNTHETIC_FILE, opts.after, opts.reloads))
    print(f"\n{opts.rules} extra rules; traffic: one fresh report triaged per ms on the loop; 'loop gap': the longest "
          f"a {TICK * 1000:.0f} ms ticker waited past its tick; 'longest collection': from gc.callbacks.")


if __name__ == "__main__":
    main()
