"""What the learned fallback costs: µs per classification with it on and off, side by side.

    python bench/fallback_bench.py [--rounds 5] [--messages 2000]

Two kinds of report, each a fresh message every time (the tuning part of the corpus,
rules/examples, with a counter appended so no memo helps):
  matched  a rule decides: the fallback must add nothing here (it is never consulted);
  unknown  no rule matches: the fallback's model runs (n-grams, one sparse dot product).
Also prints the fallback's training time on the shipped tables.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.models import ErrorReport  # noqa: E402
from service.normalize import NormalizedError, normalize  # noqa: E402
from service.rules.engine import Ruleset, classify  # noqa: E402
from service.rules.loader import load_ruleset  # noqa: E402
from service.rules.training import with_fallback  # noqa: E402


def _errors(ruleset: Ruleset, matched: bool, count: int) -> list[NormalizedError]:
    chosen = []
    for item in ruleset.labelled:
        error = normalize(item.report)
        if (classify(error, ruleset).rule is not None) == matched and error.message:
            chosen.append(error)
    fresh = (normalize(ErrorReport(message=f"{chosen[n % len(chosen)].message} #{n}")) for n in range(count * 2))
    return [e for e in fresh if (classify(e, ruleset).rule is not None) == matched][:count]


def _micros(ruleset: Ruleset, errors: list[NormalizedError]) -> float:
    started = time.perf_counter()
    for error in errors:
        classify(error, ruleset)
    return (time.perf_counter() - started) / len(errors) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()
    off = load_ruleset(ROOT / "rules")
    started = time.perf_counter()
    on = with_fallback(off, 0.5)
    print(f"fallback training on the shipped tables: {time.perf_counter() - started:.2f} s "
          f"({len(off.labelled)} examples plus the rules' tests)\n")
    print(f"{'report':10}{'fallback off':>16}{'fallback on':>16}{'on/off':>10}")
    for label, matched in (("matched", True), ("unknown", False)):
        errors = _errors(off, matched, args.messages)
        rows = [(_micros(off, errors), _micros(on, errors)) for _ in range(args.rounds)]
        best_off, best_on = min(r[0] for r in rows), min(r[1] for r in rows)
        ratios = [b / a for a, b in rows]
        print(f"{label:10}{best_off:13.1f} µs{best_on:13.1f} µs{statistics.median(ratios):9.2f}x "
              f"(median of {args.rounds} paired rounds; best shown)")


if __name__ == "__main__":
    main()
