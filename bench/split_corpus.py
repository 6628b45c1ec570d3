"""Add collected cases to the corpus, split by source into the held-out and tuning parts.

    python bench/split_corpus.py COLLECTED_DIR [--held-out-percent 45]

COLLECTED_DIR holds one folder per collector, each with YAML files of `cases:` (source,
note, report, expect). Every case is checked (a valid report, a declared class and reason);
a case whose message the corpus already has is skipped. The part a case goes to depends
only on its source's origin (a GitHub repository, or a web site's host), hashed: all
cases from one origin land in the same part, and an origin either part already has keeps
its new cases there (the second collection went to the held-out part whole, whatever the
hash), so no rule written from the tuning part has seen a phrasing from a held-out origin.
  held-out -> tests/corpus/<collector>-<file>.yaml   (`cases:`; never shipped, never trained on)
  tune     -> rules/examples/<collector>-<file>.yaml (`examples:`; the fallback learns from it)
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pydantic import ValidationError  # noqa: E402

from service.models import ErrorReport  # noqa: E402
from service.rules.loader import load_ruleset  # noqa: E402

HELD_OUT, TUNE = ROOT / "tests" / "corpus", ROOT / "rules" / "examples"
_GITHUB = re.compile(r"github\.com/([\w.-]+/[\w.-]+)")
_REPO_PATH = re.compile(r"^([\w.-]+/[\w.-]+)(?:\s|$|@|:)")
_HOST = re.compile(r"https?://(?:www\.)?([^/\s]+)")


def origin(source: str) -> str:
    """The repository or site a source belongs to: what the split hashes."""
    source = source.strip()
    for pattern in (_GITHUB, _HOST, _REPO_PATH):
        found = pattern.search(source)
        if found:
            return found.group(1).lower().removesuffix(".git")
    return source.split()[0].lower() if source else ""


def held_out(source: str, percent: int) -> bool:
    return int(hashlib.sha256(origin(source).encode()).hexdigest(), 16) % 100 < percent


def _key(report: dict[str, Any]) -> str:
    text = report.get("message") or yaml.safe_dump(report.get("raw"), sort_keys=True)
    return " ".join(str(text).split()).lower()


def _origins(folder: Path, section: str) -> set[str]:
    """Origins a part already has: their new cases join it."""
    return {origin(str(item["source"])) for path in folder.glob("*.yaml")
            for item in yaml.safe_load(path.read_text())[section]}


def _known_messages() -> set[str]:
    seen = set()
    for folder, section in ((HELD_OUT, "cases"), (TUNE, "examples")):
        for path in folder.glob("*.yaml"):
            seen.update(_key(item["report"]) for item in yaml.safe_load(path.read_text())[section])
    return seen


def _problem(case: Any, vocabulary: dict[str, set[str]]) -> str | None:
    if not isinstance(case, dict) or not {"source", "report", "expect"} <= case.keys():
        return "needs source, report and expect"
    expect = case["expect"]
    if expect.get("class") not in vocabulary or expect.get("reason") not in vocabulary[expect["class"]]:
        return f"label {expect.get('class')}/{expect.get('reason')} is not in the taxonomy"
    try:
        ErrorReport.model_validate(case["report"])
    except ValidationError as exc:
        return f"invalid report: {exc.errors()[0]['msg']}"
    return None


def _write(path: Path, section: str, header: str, cases: list[dict[str, Any]]) -> None:
    kept = [{k: case[k] for k in ("source", "note", "report", "expect") if k in case} for case in cases]
    text = yaml.safe_dump({section: kept}, sort_keys=False, allow_unicode=True, width=120)
    path.write_text(header + text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("collected", type=Path)
    parser.add_argument("--held-out-percent", type=int, default=45)
    args = parser.parse_args()
    vocabulary = {c.id: set(c.reasons) for c in load_ruleset(ROOT / "rules").classes.values()}
    seen = _known_messages()
    tuning, kept_out = _origins(TUNE, "examples"), _origins(HELD_OUT, "cases")
    counts: Counter[str] = Counter()
    for path in sorted(args.collected.glob("*/*.yaml")):
        parts: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
        for index, case in enumerate((yaml.safe_load(path.read_text()) or {}).get("cases") or []):
            problem = _problem(case, dict(vocabulary))
            if problem is not None:
                print(f"{path}#{index}: skipped: {problem}", file=sys.stderr)
                counts["invalid"] += 1
                continue
            key = _key(case["report"])
            if key in seen:
                counts["duplicate"] += 1
                continue
            seen.add(key)
            source = str(case["source"])
            where = origin(source)
            known = where in kept_out or where in tuning
            parts[where in kept_out if known else held_out(source, args.held_out_percent)].append(case)
        name = f"{path.parent.name}-{path.stem}.yaml"
        where = ("# Collected from public sources (each case names its own); "
                 "split by source: see bench/split_corpus.py.\n")
        if parts[True]:
            _write(HELD_OUT / name, "cases", "# errtriage corpus, HELD-OUT part: no rule is written or tuned from it.\n"
                   + where, parts[True])
        if parts[False]:
            _write(TUNE / name, "examples", "# yaml-language-server: $schema=../schema.json\n"
                   "# errtriage corpus, tuning part: rules are written from it and the fallback learns it.\n"
                   + where, parts[False])
        counts["held-out"] += len(parts[True])
        counts["tune"] += len(parts[False])
    print(dict(counts))


if __name__ == "__main__":
    main()
