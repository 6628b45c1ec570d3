"""The fallback's threshold, chosen on errors the rules had not seen: each collection's tuning
share scored by the rules and examples from before it (the commit before it landed).

    python bench/prequential.py [--collections 9] [--thresholds 0.5,0.55,0.6,0.65,0.7,0.75,0.8]

Why not cross-validation on the tuning part: its rules were written from every fold, so in CV
almost every real error is matched by a rule and what reaches the fallback is mostly hard
negatives, which pushes the threshold up. A new collection, scored before anyone wrote a rule
from it, is what the service meets in use: the fallback sees the real errors the rules miss.
The rules and examples are taken from git history; the code that loads and trains them is this
checkout's. Tuning data only: the held-out part (tests/corpus) is not read.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.models import ErrorReport  # noqa: E402
from service.rules.loader import load_ruleset  # noqa: E402
from service.triage import triage  # noqa: E402

EXAMPLES = "rules/examples"
MIN_FILES = 10  # a commit that adds this many example files is a collection


@dataclass(frozen=True)
class Scored:
    want: tuple[str, str]
    got: tuple[str, str]
    by_fallback: bool
    confidence: float

    def at(self, threshold: float) -> tuple[str, str]:
        """The answer with the fallback's minimum confidence at `threshold`."""
        kept = not self.by_fallback or self.confidence >= threshold
        return self.got if kept else ("unknown", "unclassified")


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout


def collections(count: int) -> list[str]:
    """The last `count` commits that added a collection's worth of example files."""
    found = []
    for commit in git("log", "--format=%H", "--diff-filter=A", "--", EXAMPLES).split():
        if len(added_files(commit)) >= MIN_FILES:
            found.append(commit)
        if len(found) == count:
            break
    return found


def added_files(commit: str) -> list[str]:
    return git("diff", "--name-only", "--diff-filter=A", f"{commit}^", commit, "--", EXAMPLES).split()


def score_collection(commit: str, scratch: Path) -> list[Scored]:
    """The commit's new tuning cases, triaged by the rules and a fallback trained from its parent."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", f"{commit}^", "rules"],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as rules:
        rules.extractall(scratch, filter="data")
    ruleset = load_ruleset(scratch / "rules", fallback_min_confidence=0.0)
    verdicts = []
    for path in added_files(commit):
        for item in yaml.safe_load(git("show", f"{commit}:{path}"))["examples"]:
            got, _, _ = triage(ErrorReport.model_validate(item["report"]), ruleset, "bench")
            verdicts.append(Scored((item["expect"]["class"], item["expect"]["reason"]), (got.class_, got.reason),
                                    got.decided_by == "fallback", got.confidence or 0.0))
    return verdicts


def line(verdicts: list[Scored], threshold: float) -> str:
    answers = [(v.want, v.at(threshold)) for v in verdicts]
    negatives = [got[0] == "unknown" for want, got in answers if want[0] == "unknown"]
    right: Counter[str] = Counter()
    for want, got in answers:
        right["class"] += want[0] == got[0]
        right["reason"] += want == got
    label = "rules alone" if threshold > 1 else f"fallback at {threshold:.2f}"
    return (f"{label:20} {right['class'] / len(answers):8.1%} {right['reason'] / len(answers):8.1%} "
            f"{sum(negatives) / len(negatives):11.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", type=int, default=9)
    parser.add_argument("--thresholds", default="0.5,0.55,0.6,0.65,0.7,0.75,0.8")
    args = parser.parse_args()
    if git("rev-parse", "--is-shallow-repository").strip() == "true":
        sys.exit("this needs the repository's history: run it in a full clone (git fetch --unshallow)")
    verdicts: list[Scored] = []
    for commit in collections(args.collections):
        with tempfile.TemporaryDirectory() as scratch:
            scored = score_collection(commit, Path(scratch))
        verdicts += scored
        print(f"{commit[:8]} {len(scored):4} cases  {git('log', '-1', '--format=%s', commit)[:80]}")
    print(f"\n{len(verdicts)} cases, each scored by the tables from before its collection\n")
    print(f"{'':20} {'class':>8} {'reason':>8} {'negatives':>11}")
    for threshold in [2.0, *map(float, args.thresholds.split(","))]:
        print(line(verdicts, threshold))


if __name__ == "__main__":
    main()
