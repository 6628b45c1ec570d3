"""Cold start: how long `errtriage serve` takes to answer /readyz, with the shipped tables and with
`--rules` extra ones, in interleaved rounds on this machine (the shipped start is the baseline).

    python bench/start_bench.py [--rules 10000] [--rounds 5]

The service's bytecode is compiled first, as the image's `pip install .` does: with
PYTHONDONTWRITEBYTECODE set (some CI and sandbox shells), an editable checkout would otherwise
recompile every module it imports on every start (~0.15 s here). Run it with the interpreter of
the install to measure (a production install lacks the test extras' imports).
"""

from __future__ import annotations

import argparse
import compileall
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.classify_bench import SHIPPED, shipped_plus  # noqa: E402
from tests.servers import free_port  # noqa: E402


def started_in(rules: Path) -> float:
    """Seconds from spawning `errtriage serve` to its first 200 from /readyz."""
    port = free_port()
    env = {**os.environ, "ERRTRIAGE_PORT": str(port), "ERRTRIAGE_RULES_DIR": str(rules),
           "ERRTRIAGE_LOG_LEVEL": "warning", "ERRTRIAGE_RELOAD_RULES": "false"}
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "service", "serve"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - began < 60:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    return time.perf_counter() - began
            except httpx.TransportError:
                pass
            time.sleep(0.01)
        raise RuntimeError("no answer from /readyz within 60 s")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rules", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args()
    compileall.compile_dir(ROOT / "service", quiet=1)
    times: dict[str, list[float]] = {"shipped tables": [], f"+{opts.rules} rules": []}
    with shipped_plus(opts.rules, random.Random(7)) as (big, _):
        for _ in range(opts.rounds):
            times["shipped tables"].append(started_in(SHIPPED))
            times[f"+{opts.rules} rules"].append(started_in(big))
    base = statistics.median(times["shipped tables"])
    print(f"{'rules':18} {'to /readyz (median)':>20} {'range':>14} {'minus shipped':>14}")
    for label, seconds in times.items():
        median = statistics.median(seconds)
        print(f"{label:18} {median:>18.2f} s {min(seconds):>6.2f}-{max(seconds):.2f} s {median - base:>12.2f} s")
    print(f"\n{opts.rounds} interleaved rounds; from spawning `python -m service serve` to the first 200 from /readyz "
          f"(the fallback trains after that, off the request path); bytecode compiled; {sys.executable}.")


if __name__ == "__main__":
    main()
