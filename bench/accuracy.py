"""Accuracy of the rule tables on the labelled corpus: held-out part beside the tuning part.

    python bench/accuracy.py [--rules DIR] [--min-confidence P] [--only tune] [--misses N --part tune]

Two parts, split by source (never by line):
  held-out  tests/corpus/*.yaml: real errors no rule was written or tuned from, and that the
            fallback never trains on. Its figures are the ones that count.
  tune      rules/examples/*.yaml: the cases the rules were written from; the fallback trains
            on them, so its figures with the fallback on say only that it learned them.
Each part is scored with the fallback off (rules alone) and on. Whoever writes rules runs
`--only tune`: it scores and prints nothing of the held-out part.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.models import ErrorReport  # noqa: E402
from service.rules.engine import Ruleset, decide  # noqa: E402
from service.rules.loader import load_ruleset  # noqa: E402
from service.settings import Settings  # noqa: E402
from service.triage import triage  # noqa: E402

HELD_OUT = ROOT / "tests" / "corpus"
TUNE = ROOT / "rules" / "examples"


@dataclass
class Case:
    where: str
    report: dict[str, Any]
    expect: dict[str, Any]
    note: str = ""


@dataclass
class Score:
    cases: int = 0
    right: Counter[str] = field(default_factory=Counter)
    checked: Counter[str] = field(default_factory=Counter)
    per_class: Counter[str] = field(default_factory=Counter)
    per_class_right: Counter[str] = field(default_factory=Counter)
    decided_by: Counter[str] = field(default_factory=Counter)
    misses: list[str] = field(default_factory=list)

    def ratio(self, key: str) -> str:
        return f"{self.right[key] / self.checked[key]:6.1%}" if self.checked[key] else "     -"


def load_cases(folder: Path, section: str) -> list[Case]:
    cases = []
    for path in sorted(folder.glob("*.yaml")):
        for index, item in enumerate(yaml.safe_load(path.read_text())[section]):
            cases.append(Case(f"{path.name}#{index}", item["report"], item["expect"], str(item.get("note") or "")))
    return cases


def score(ruleset: Ruleset, cases: list[Case]) -> Score:
    result = Score()
    for case in cases:
        got, _, _ = triage(ErrorReport.model_validate(case.report), ruleset, "bench")
        want_class, want_reason = case.expect["class"], case.expect["reason"]
        want_retryable = case.expect.get("retryable", decide(want_class, want_reason, None, ruleset.classes)[0])
        checks = {"class": got.class_ == want_class, "reason": got.class_ == want_class and got.reason == want_reason,
                  "retryable": got.retryable == want_retryable}
        if "provider" in case.expect and want_class != "unknown":  # whose an unknown error is: not scored
            checks["provider"] = got.provider == case.expect["provider"]
            if "provider from context" not in case.note:  # the collector read it off the thread, not the error
                checks["provider_in_text"] = checks["provider"]
        if want_class == "unknown":
            checks["negatives"] = got.class_ == "unknown"
        result.cases += 1
        result.decided_by[got.decided_by] += 1
        result.per_class[want_class] += 1
        result.per_class_right[want_class] += checks["class"]
        for key, ok in checks.items():
            result.checked[key] += 1
            result.right[key] += ok
        if not (checks["class"] and checks["reason"]):
            result.misses.append(f"{case.where}: want {want_class}/{want_reason} got {got.class_}/{got.reason} "
                                 f"({got.decided_by} {got.confidence:.2f}) {str(case.report)[:150]!r}")
    return result


def report(columns: dict[str, Score]) -> None:
    names = list(columns)
    print(f"{'':22}" + "".join(f"{name:>20}" for name in names))
    print(f"{'cases':22}" + "".join(f"{columns[n].cases:>20}" for n in names))
    for key, label in (("class", "class"), ("reason", "reason"), ("provider", "provider"),
                       ("provider_in_text", "provider, told by text"),
                       ("retryable", "retryable"), ("negatives", "hard negatives unknown")):
        print(f"{label:22}" + "".join(f"{columns[n].ratio(key):>20}" for n in names))
    print(f"{'decided by fallback':22}" + "".join(f"{columns[n].decided_by['fallback']:>20}" for n in names))
    print("\nrecall per class")
    classes = sorted({c for s in columns.values() for c in s.per_class})
    for class_id in classes:
        cells = []
        for name in names:
            s = columns[name]
            total = s.per_class[class_id]
            cells.append(f"{s.per_class_right[class_id]:>5}/{total:<4} {s.per_class_right[class_id] / total:6.1%}"
                         if total else f"{'-':>17}")
        print(f"  {class_id:20}" + "".join(f"{cell:>20}" for cell in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rules", type=Path, default=ROOT / "rules")
    parser.add_argument("--min-confidence", type=float, default=Settings().fallback_min_confidence)
    parser.add_argument("--misses", type=int, default=0, help="print this many misses of the --part part")
    parser.add_argument("--part", choices=("tune", "held-out"), default="tune")
    parser.add_argument("--only", choices=("tune",), help="score only the tuning part (for rule writers)")
    args = parser.parse_args()
    rules_only = load_ruleset(args.rules)
    with_fallback = load_ruleset(args.rules, fallback_min_confidence=args.min_confidence)
    held_out = [] if args.only else load_cases(HELD_OUT, "cases")
    tune = load_cases(TUNE, "examples")
    total = len(held_out) + len(tune)
    print(f"corpus: {total} cases, held-out {len(held_out)} ({len(held_out) / total:.0%}), tune {len(tune)}; "
          f"fallback min confidence {args.min_confidence}\n")
    columns = {} if args.only else {
        "held-out rules": score(rules_only, held_out),
        "held-out +fallback": score(with_fallback, held_out),
    }
    columns |= {"tune rules": score(rules_only, tune), "tune +fallback*": score(with_fallback, tune)}
    report(columns)
    print("\n* the fallback trained on the tune part: that column shows it learned it, nothing more.")
    if args.misses:
        key = "tune rules" if args.part == "tune" or args.only else "held-out +fallback"
        print(f"\nmisses ({key}):")
        for line in columns[key].misses[: args.misses]:
            print(" ", line)


if __name__ == "__main__":
    main()
