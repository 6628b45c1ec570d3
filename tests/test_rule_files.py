"""Invalid rule files: one file per error, each refused with file, line, rule id and an exact message."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from service.errors import RulesInvalid
from service.rules.loader import load_ruleset
from tests.conftest import RULES

INVALID = Path(__file__).resolve().parent / "data" / "invalid"
TAXONOMY = "classes:\n  - id: demo\n    reasons: {a: {}}\n"

EXPECTED = {
    "yaml-syntax": "classes/x.yaml:5: YAML: did not find expected ',' or ']'",
    "unknown-key": "classes/x.yaml:6 [typo]: rules.0.matches: Extra inputs are not permitted",
    "undefined-class": "classes/x.yaml:2 [nowhere]: undefined class 'nosuch'",
    "undefined-reason": "classes/x.yaml:2 [wrong-reason]: reason 'zzz' is not declared for class 'demo'",
    "duplicate-id": "classes/x.yaml:6 [twice]: duplicate rule id 'twice' (first in classes/x.yaml)",
    "bad-regex": "classes/x.yaml:2 [lookahead]: message: regex '(?=never)x' does not compile under RE2: "
                 "invalid perl operator: (?=",
    "bad-status": "classes/x.yaml:5 [status-typo]: rules.0.match.0.status: Value error, "
                  "status '6xx' is neither a code, 'Nxx', nor 'NNN-NNN'",
    "empty-match": "classes/x.yaml:5 [matches-nothing]: rules.0.match.0: Value error, "
                   "a match block needs at least one field",
    "empty-literal": "classes/x.yaml:5 [matches-everything]: rules.0.match.0.message: Value error, "
                     "empty strings match everything; remove them",
    "wrong-section": "classes/x.yaml:1: section 'providers' does not belong in classes/",
}


def rules_dir_with(tmp_path: Path, case: str) -> Path:
    root = tmp_path / "rules"
    (root / "classes").mkdir(parents=True)
    (root / "classes" / "00-taxonomy.yaml").write_text(TAXONOMY)
    shutil.copy(INVALID / f"{case}.yaml", root / "classes" / "x.yaml")
    return root


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_invalid_file_is_refused_with_exact_message(tmp_path: Path, case: str) -> None:
    with pytest.raises(RulesInvalid) as caught:
        load_ruleset(rules_dir_with(tmp_path, case))
    messages = [str(e) for e in caught.value.errors]
    assert EXPECTED[case] in messages, messages


def test_every_invalid_file_has_an_expectation() -> None:
    assert sorted(p.stem for p in INVALID.glob("*.yaml")) == sorted(EXPECTED)


def test_all_errors_are_reported_together(tmp_path: Path) -> None:
    root = rules_dir_with(tmp_path, "undefined-class")
    shutil.copy(INVALID / "undefined-reason.yaml", root / "classes" / "y.yaml")
    with pytest.raises(RulesInvalid) as caught:
        load_ruleset(root)
    assert len(caught.value.errors) == 2


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service", *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


def test_check_passes_on_the_shipped_rules() -> None:
    result = run_cli("check")
    assert result.returncode == 0, result.stderr
    assert " 0 failed, 0 rules unexercised" in result.stdout


def test_check_names_file_and_rule_on_errors(tmp_path: Path) -> None:
    result = run_cli("check", str(rules_dir_with(tmp_path, "undefined-class")))
    assert result.returncode == 1
    assert "classes/x.yaml:2 [nowhere]: undefined class 'nosuch'" in result.stderr


def test_check_fails_on_a_failing_case_and_an_unexercised_rule(tmp_path: Path) -> None:
    root = rules_dir_with(tmp_path, "undefined-class")
    (root / "classes" / "x.yaml").write_text(
        "rules:\n"
        "  - {id: tested, class: demo, reason: a, match: {message: boom}, tests: [{message: 'no match'}]}\n"
        "  - {id: untested, class: demo, reason: a, match: {message: bang}}\n")
    result = run_cli("check", str(root))
    assert result.returncode == 1
    assert "rule tested: rule: expected 'tested', got None" in result.stderr
    assert "classes/x.yaml [untested]: no test case exercises this rule" in result.stderr


def test_check_reads_expect_beside_a_shorthand_report_including_details(tmp_path: Path) -> None:
    root = rules_dir_with(tmp_path, "undefined-class")
    (root / "classes" / "x.yaml").write_text(
        "rules:\n"
        "  - id: key\n    class: demo\n    reason: a\n"
        "    match: {message: {regex: ['pass via (?P<key_argument>\\w+)']}}\n"
        "    tests:\n"
        "      - {message: 'pass via _apiKey', expect: {rule: key, details: {key_argument: _apiKey}}}\n"
        "      - {message: 'pass via _apiKey', expect: {details: {key_argument: _apikey}}}\n")
    result = run_cli("check", str(root))
    assert result.returncode == 1
    assert "details.key_argument: expected '_apikey', got '_apiKey'" in result.stderr
    assert "1 passed, 1 failed" in result.stdout


def test_classify_cli_reads_stdin() -> None:
    result = run_cli("classify", stdin=json.dumps({"raw": {"type": "error", "error": {
        "type": "overloaded_error", "message": "Overloaded"}}}))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert (out["class"], out["reason"], out["provider"]) == ("ai_provider", "overloaded", "anthropic")
    assert run_cli("classify", stdin="{nope").returncode == 2


def test_schema_cli_matches_the_committed_schema() -> None:
    result = run_cli("schema")
    schema = json.loads(result.stdout)
    assert {"rules", "classes", "providers"} <= set(schema["properties"])
    committed = Path(__file__).resolve().parent.parent / "rules" / "schema.json"
    assert json.loads(committed.read_text()) == schema, "run: errtriage schema > rules/schema.json"


def _many_rules(count: int) -> str:
    lines = ["rules:"]
    for i in range(count):
        lines += [f"  - id: many-{i}", "    class: unknown", "    reason: unclassified", "    priority: -1",
                  f"    match: {{message: {{contains: ['phrase number {i}']}}}}"]
    return "\n".join(lines) + "\n"


def test_a_large_file_parses_and_validates_in_slices_to_the_same_model(tmp_path: Path) -> None:
    from service.rules.loader import _item_slices, load_yaml, validate_file
    from service.schema.rulefile import RuleFile

    text = _many_rules(3000)
    assert len(_item_slices(text)[1]) > 3  # type: ignore[index]
    data = load_yaml(text)
    assert data == yaml.safe_load(text)
    model, errors = validate_file(data)
    assert errors == [] and model == RuleFile.model_validate(data)
    # an alias of an anchor in another slice: parsed whole, the same as any YAML parser reads it
    last = "  - {id: last, class: *c, reason: unclassified, match: {message: {contains: [x]}}}\n"
    aliased = text.replace("    class: unknown\n", "    class: &c unknown\n", 1) + last
    assert load_yaml(aliased) == yaml.safe_load(aliased)


def test_an_error_deep_in_a_large_file_names_its_line_and_rule(tmp_path: Path) -> None:
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    text = _many_rules(1000).replace("    class: unknown\n    reason: unclassified\n    priority: -1\n"
                                     "    match: {message: {contains: ['phrase number 700']}}",
                                     "    class: unknown\n    reason: unclassified\n    priority: high\n"
                                     "    match: {message: {contains: ['phrase number 700']}}")
    (root / "classes" / "99-many.yaml").write_text(text)
    with pytest.raises(RulesInvalid) as caught:
        load_ruleset(root)
    (error,) = caught.value.errors
    assert (error.file, error.rule) == ("classes/99-many.yaml", "many-700")
    assert error.line == 2 + 700 * 5 and "rules.700.priority" in error.message
