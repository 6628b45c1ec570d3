"""The labelled corpus of real errors: its shape and split, and the tables' accuracy on its tuning part.

Two parts, split by source (bench/split_corpus.py): rules/examples/ (tuning: rules are
written from it, the fallback learns it) and tests/corpus/ (held-out: nothing is written
or trained from it). The held-out figures are bench data (bench/accuracy.py), not
assertions; here only its shape is checked, so the split can not quietly rot.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.split_corpus import origin
from service.checks import run_case
from service.rules.engine import Ruleset
from service.rules.loader import load_ruleset
from tests.servers import wait_for

ROOT = Path(__file__).resolve().parent.parent
HELD_OUT = ROOT / "tests" / "corpus"
TUNE = ROOT / "rules" / "examples"
# The rules alone on the tuning part: a regression guard, about a point under where they stand
# (93.4% class, 92.4% reason once the twelfth collection's tuning share came in: 299 cases,
# 45 of them not yet decided right, no rule written from them; 95.3% / 94.3% before it). A new
# collection lowers it until rules are written from it.
TUNE_CLASS_FLOOR = 0.925
TUNE_REASON_FLOOR = 0.915


def _cases(folder: Path, section: str) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{path.name}#{index}", case) for path in sorted(folder.glob("*.yaml"))
            for index, case in enumerate(yaml.safe_load(path.read_text())[section])]


TUNE_CASES = _cases(TUNE, "examples")
HELD_OUT_CASES = _cases(HELD_OUT, "cases")


def test_corpus_is_large_sourced_and_split_by_source() -> None:
    total = len(TUNE_CASES) + len(HELD_OUT_CASES)
    assert total >= 2000, f"only {total} corpus cases"
    assert len(HELD_OUT_CASES) >= 0.3 * total, f"held-out part is {len(HELD_OUT_CASES)} of {total}"
    unsourced = [name for name, case in TUNE_CASES + HELD_OUT_CASES if not str(case.get("source", "")).strip()]
    assert not unsourced, f"cases without a public source: {unsourced[:10]}"
    shared = {origin(c["source"]) for _, c in TUNE_CASES} & {origin(c["source"]) for _, c in HELD_OUT_CASES}
    assert not shared, f"origins in both parts (the split is by source): {sorted(shared)[:10]}"


def test_corpus_has_hard_negatives_in_both_parts() -> None:
    for cases in (TUNE_CASES, HELD_OUT_CASES):
        negatives = sum(case["expect"]["class"] == "unknown" for _, case in cases)
        assert negatives >= 0.1 * len(cases), f"{negatives} hard negatives of {len(cases)}"


def test_held_out_labels_are_in_the_taxonomy(shipped: Ruleset) -> None:
    bad = [name for name, case in HELD_OUT_CASES
           if case["expect"]["reason"] not in shipped.classes[case["expect"]["class"]].reasons]
    assert not bad, bad[:10]


def test_tables_on_their_tuning_part(shipped: Ruleset, capsys: pytest.CaptureFixture[str]) -> None:
    """The rules alone (no fallback) on the cases they were written from."""
    totals: Counter[str] = Counter()
    right: Counter[str] = Counter()
    for name, case in TUNE_CASES:
        expected = {k: v for k, v in case["expect"].items() if k in ("class", "reason")}
        got = run_case(shipped, case["report"], expected, name, None).got
        totals[expected["class"]] += 1
        right["class"] += got["class"] == expected["class"]
        right["reason"] += got["class"] == expected["class"] and got["reason"] == expected["reason"]
        right[expected["class"]] += got["class"] == expected["class"]
    with capsys.disabled():
        print("\ntuning part, rules alone, recall by class:")
        for cls in sorted(totals):
            print(f"  {cls:15} {right[cls]:4}/{totals[cls]:<4} {right[cls] / totals[cls]:7.1%}")
    count = len(TUNE_CASES)
    assert right["class"] / count >= TUNE_CLASS_FLOOR, f"class {right['class']}/{count}"
    assert right["reason"] / count >= TUNE_REASON_FLOOR, f"reason {right['reason']}/{count}"


def test_the_regex_scanner_and_the_re2_set_read_the_tuning_part_alike() -> None:
    """A serving ruleset's message regexes go through Hyperscan (once compiled) and RE2
    confirmations instead of one RE2 set: every tuning message satisfies the same conditions."""
    on_set, scanned = load_ruleset(TUNE.parent), load_ruleset(TUNE.parent)
    scanned.matcher.start_scanners()
    wait_for(lambda: scanned.matcher.scanner_state() != "compiling", timeout=120)
    assert scanned.matcher.scanner_state() == "ready" and len(scanned.matcher._fields["message"].scan_members) > 1000
    messages = [str(case["report"]["message"]) for _, case in TUNE_CASES if case["report"].get("message")]
    differ = [m for m in messages if on_set.matcher.satisfied({"message": [m]}, None)
              != scanned.matcher.satisfied({"message": [m]}, None)]
    assert not differ, differ[:5]
