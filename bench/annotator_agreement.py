"""How far a reader of the report alone gets: two more annotators against the corpus's labels.

The collectors labelled each case with the issue thread or the source around it in view; the
service sees only the report. bench/second_annotator.yaml and bench/third_annotator.yaml hold
two independent annotators' labels for the same 300 held-out cases, each made from the report
alone. Printed: how often each agrees with the collectors (class, reason, provider, hard
negatives kept unknown) and with the other, and the tables' class accuracy on the same cases,
with and without the fallback, also on the cases where both annotators agree with the
collectors (what the text decides), and against the readers' own label where they agree.

    python bench/annotator_agreement.py [--min-confidence P]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.accuracy import HELD_OUT, Case, load_cases  # noqa: E402
from service.models import ErrorReport  # noqa: E402
from service.rules.engine import Ruleset  # noqa: E402
from service.rules.loader import load_ruleset  # noqa: E402
from service.settings import Settings  # noqa: E402
from service.triage import triage  # noqa: E402

ANNOTATORS = {"second": ROOT / "bench" / "second_annotator.yaml", "third": ROOT / "bench" / "third_annotator.yaml"}


def _share(hits: int, total: int) -> str:
    return f"{hits}/{total} = {hits / total:.1%}" if total else "-"


def _class_of(ruleset: Ruleset, report: dict[str, object]) -> str:
    return triage(ErrorReport.model_validate(report), ruleset, "bench")[0].class_


def _agreement(cases: list[Case], labels: list[dict[str, Any]]) -> None:
    """One annotator against the collectors' labels."""
    pairs = list(zip(cases, labels, strict=True))
    reason = sum(case.expect["class"] == label["class"] and case.expect["reason"] == label["reason"]
                 for case, label in pairs)
    told = [(case, label) for case, label in pairs if case.expect["class"] != "unknown" and "provider" in case.expect]
    negatives = [label["class"] == "unknown" for case, label in pairs if case.expect["class"] == "unknown"]
    print(f"  class {_share(sum(case.expect['class'] == label['class'] for case, label in pairs), len(pairs))}; "
          f"reason {_share(reason, len(pairs))}; "
          f"provider {_share(sum(case.expect['provider'] == label['provider'] for case, label in told), len(told))}; "
          f"hard negatives left unknown {_share(sum(negatives), len(negatives))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--min-confidence", type=float, default=Settings().fallback_min_confidence)
    opts = parser.parse_args()
    by_case = {case.where: case for case in load_cases(HELD_OUT, "cases")}
    annotators = {name: yaml.safe_load(path.read_text())["labels"] for name, path in ANNOTATORS.items()}
    second, third = annotators.values()
    cases = [by_case[label["case"]] for label in second]
    assert [label["case"] for label in third] == [case.where for case in cases], "the annotators' cases differ"
    for name, labels in annotators.items():
        print(f"{name} annotator vs the collectors, {len(cases)} held-out cases:")
        _agreement(cases, labels)
    with_each_other = sum(a["class"] == b["class"] for a, b in zip(second, third, strict=True))
    print(f"second vs third annotator: class {_share(with_each_other, len(cases))}")
    decided = [case.expect["class"] == a["class"] == b["class"]
               for case, a, b in zip(cases, second, third, strict=True)]
    for name, ruleset in (("rules", load_ruleset(ROOT / "rules")),
                          (f"rules + fallback ({opts.min_confidence})",
                           load_ruleset(ROOT / "rules", fallback_min_confidence=opts.min_confidence))):
        got = [_class_of(ruleset, case.report) for case in cases]
        right = [g == case.expect["class"] for g, case in zip(got, cases, strict=True)]
        where_decided = [ok for ok, sure in zip(right, decided, strict=True) if sure]
        as_readers = [g == a["class"] for g, a, b in zip(got, second, third, strict=True) if a["class"] == b["class"]]
        print(f"the tables, {name}: class {_share(sum(right), len(right))}; on the {len(where_decided)} cases "
              f"both annotators label as the collectors did {_share(sum(where_decided), len(where_decided))}; "
              f"against the two readers' own label where they agree {_share(sum(as_readers), len(as_readers))}")


if __name__ == "__main__":
    main()
