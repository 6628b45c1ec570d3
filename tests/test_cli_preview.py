"""`errtriage test` and `errtriage diff`: preview a rule change on sample payloads before shipping it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import RULES
from tests.test_rule_files import run_cli

QUOTA = {"message": "You exceeded your current quota, please check your plan and billing details.",
         "provider": "openai"}
PLAN = {"message": "Generation failed: frobnicator quota hit"}


def payloads(tmp_path: Path) -> Path:
    folder = tmp_path / "payloads"
    folder.mkdir()
    (folder / "quota.json").write_text(json.dumps({"report": QUOTA, "expect": {"class": "ai_credits"}}))
    (folder / "plan.json").write_text(json.dumps(PLAN))
    (folder / "wrong.json").write_text(json.dumps({"report": PLAN, "expect": {"class": "account_level"}}))
    return folder


def test_test_prints_a_table_and_fails_on_a_mismatch(tmp_path: Path) -> None:
    result = run_cli("test", str(payloads(tmp_path)), "--rules", str(RULES))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["payload", "class", "reason", "provider"]
    quota = next(line for line in lines if line.startswith("quota.json"))
    assert "ai_credits" in quota and quota.rstrip().endswith("ok")
    assert "MISMATCH class: expected 'account_level', got 'unknown'" in next(
        line for line in lines if line.startswith("wrong.json"))
    assert lines[-1] == "3 payloads: 2 passed, 1 failed"


def test_diff_shows_what_a_rule_change_reclassifies_and_reroutes(tmp_path: Path) -> None:
    import shutil

    new = tmp_path / "new"
    shutil.copytree(RULES, new)
    (new / "classes" / "90-ours.yaml").write_text(
        "rules:\n  - id: ours-frobnicator\n    class: account_level\n    reason: plan_limit\n    priority: 500\n"
        "    match: {message: frobnicator quota}\n    tests: [{message: frobnicator quota hit}]\n")
    result = run_cli("diff", str(payloads(tmp_path)), "--rules", str(RULES), "--rules", str(new))
    assert result.returncode == 0, result.stderr
    changed = [line for line in result.stdout.splitlines() if line.startswith(("plan.json", "wrong.json"))]
    assert len(changed) == 2
    assert "class 'unknown' -> 'account_level'" in changed[0] and "route None -> 'account-level-user'" in changed[0]
    assert result.stdout.splitlines()[-1] == "3 payloads, 2 changed"
