"""The shipped tables against a corpus of real error payloads (tests/corpus/*.yaml, each with its source).

Reports accuracy per class and fails on any mismatch, naming the case.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from service.rules.checks import run_case
from service.rules.engine import Ruleset

CORPUS = Path(__file__).resolve().parent / "corpus"


def _cases() -> list[tuple[str, dict[str, Any]]]:
    cases = []
    for path in sorted(CORPUS.glob("*.yaml")):
        for index, case in enumerate(yaml.safe_load(path.read_text())["cases"]):
            cases.append((f"{path.name}#{index}", case))
    return cases


CASES = _cases()


def test_corpus_is_large_and_sourced() -> None:
    assert len(CASES) >= 300, f"only {len(CASES)} corpus cases"
    unsourced = [name for name, case in CASES if not str(case.get("source", "")).strip()]
    assert not unsourced, f"cases without a public source: {unsourced[:10]}"


def test_corpus_accuracy(shipped: Ruleset, capsys: pytest.CaptureFixture[str]) -> None:
    totals: Counter[str] = Counter()
    correct: Counter[str] = Counter()
    failures = []
    for name, case in CASES:
        expected = {k: v for k, v in case["expect"].items() if k in ("class", "reason", "provider")}
        result = run_case(shipped, case["report"], expected, name, None)
        totals[expected["class"]] += 1
        if result.ok:
            correct[expected["class"]] += 1
        else:
            failures.append(f"{name} ({case.get('note') or case.get('source')}): {result.error or result.mismatches}")
    with capsys.disabled():
        print("\ncorpus accuracy by class:")
        for cls in sorted(totals):
            print(f"  {cls:15} {correct[cls]:4}/{totals[cls]:<4} {correct[cls] / totals[cls]:7.1%}")
        print(f"  {'all':15} {sum(correct.values()):4}/{sum(totals.values()):<4}")
    assert not failures, f"{len(failures)} corpus mismatches:\n" + "\n".join(failures)
