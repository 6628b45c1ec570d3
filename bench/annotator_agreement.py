"""How far a reader of the report alone gets: a second annotator against the corpus's labels.

The collectors labelled each case with the issue thread or the source around it in view; the
service sees only the report. bench/second_annotator.yaml holds a second annotator's labels for
300 held-out cases, made from the report alone. Printed: how often the two agree (class,
reason, provider, hard negatives kept unknown), and the tables' score on the same cases, with
and without the fallback, also on the cases where the two annotators agree.

    python bench/annotator_agreement.py [--min-confidence P]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.accuracy import HELD_OUT, load_cases  # noqa: E402
from service.models import ErrorReport  # noqa: E402
from service.rules.engine import Ruleset  # noqa: E402
from service.rules.loader import load_ruleset  # noqa: E402
from service.settings import Settings  # noqa: E402
from service.triage import triage  # noqa: E402

LABELS = ROOT / "bench" / "second_annotator.yaml"


def _share(hits: int, total: int) -> str:
    return f"{hits}/{total} = {hits / total:.1%}" if total else "-"


def _class_of(ruleset: Ruleset, report: dict[str, object]) -> str:
    return triage(ErrorReport.model_validate(report), ruleset, "bench")[0].class_


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--min-confidence", type=float, default=Settings().fallback_min_confidence)
    opts = parser.parse_args()
    cases = {case.where: case for case in load_cases(HELD_OUT, "cases")}
    second = yaml.safe_load(LABELS.read_text())["labels"]
    pairs = [(cases[label["case"]], label) for label in second]
    rules = load_ruleset(ROOT / "rules")
    with_fallback = load_ruleset(ROOT / "rules", fallback_min_confidence=opts.min_confidence)
    first_class = [case.expect["class"] for case, _ in pairs]
    agree = [case.expect["class"] == label["class"] for case, label in pairs]
    reason = sum(case.expect["class"] == label["class"] and case.expect["reason"] == label["reason"]
                 for case, label in pairs)
    told = [(case, label) for case, label in pairs if case.expect["class"] != "unknown" and "provider" in case.expect]
    provider = sum(case.expect["provider"] == label["provider"] for case, label in told)
    negatives = [label["class"] == "unknown" for case, label in pairs if case.expect["class"] == "unknown"]
    print(f"{len(pairs)} held-out cases, second annotator vs the collectors' labels:")
    print(f"  class    {_share(sum(agree), len(pairs))}")
    print(f"  reason   {_share(reason, len(pairs))}")
    print(f"  provider {_share(provider, len(told))}")
    print(f"  hard negatives left unknown {_share(sum(negatives), len(negatives))}")
    for name, ruleset in (("rules", rules), (f"rules + fallback ({opts.min_confidence})", with_fallback)):
        got = [_class_of(ruleset, case.report) for case, _ in pairs]
        right = [g == want for g, want in zip(got, first_class, strict=True)]
        where_agreed = [ok for ok, same in zip(right, agree, strict=True) if same]
        print(f"the tables, {name}: class {_share(sum(right), len(right))}; "
              f"on the cases the annotators agree on {_share(sum(where_agreed), len(where_agreed))}")


if __name__ == "__main__":
    main()
