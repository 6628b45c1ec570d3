"""Rule test cases and payload previews: what `errtriage check`, `test` and `diff` run.

Pure given a Ruleset: each case is a plain function call, so the same code runs in the
CLI, in CI and in the corpus test. It runs `triage`, so it sits beside the CLI, above
the rules package triage is built on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from service.models import Classification, ErrorReport
from service.rules.engine import Ruleset
from service.schema.cases import Expectation, RuleTest
from service.triage import triage

_EXPECTED_KEYS = ("class", "reason", "provider", "rule", "details")


@dataclass(frozen=True)
class CaseResult:
    owner: str  # "rule X" / "provider X" / a payload file
    file: str | None
    got: dict[str, Any]
    expected: dict[str, Any]
    error: str | None = None

    @property
    def mismatches(self) -> dict[str, tuple[Any, Any]]:
        found = {k: (v, self.got.get(k)) for k, v in self.expected.items() if k != "details" and self.got.get(k) != v}
        got_details = self.got.get("details", {})
        for key, value in (self.expected.get("details") or {}).items():
            if got_details.get(key) != value:
                found[f"details.{key}"] = (value, got_details.get(key))
        return found

    @property
    def ok(self) -> bool:
        return self.error is None and not self.mismatches


def summarize(classification: Classification) -> dict[str, Any]:
    return {"class": classification.class_, "reason": classification.reason,
            "provider": classification.provider, "rule": classification.rule,
            "retryable": classification.retryable, "action": classification.recovery.action.value,
            "details": classification.details}


def expected_of(expect: Expectation | dict[str, Any] | None, default: dict[str, Any]) -> dict[str, Any]:
    if expect is None:
        return default
    if isinstance(expect, Expectation):
        return expect.model_dump(by_alias=True, exclude_unset=True)
    return {k: expect[k] for k in _EXPECTED_KEYS if k in expect}


def run_case(ruleset: Ruleset, report: dict[str, Any], expected: dict[str, Any], owner: str,
             file: str | None) -> CaseResult:
    try:
        parsed = ErrorReport.model_validate(report)
    except ValidationError as exc:
        return CaseResult(owner, file, {}, expected, f"invalid report: {exc.errors()[0]['msg']}")
    classification, _, _ = triage(parsed, ruleset, "check")
    return CaseResult(owner, file, summarize(classification), expected)


def _rule_cases(ruleset: Ruleset) -> Iterable[tuple[str, str | None, RuleTest, dict[str, Any]]]:
    for rule in ruleset.rules:
        for test in rule.tests:
            yield f"rule {rule.id}", ruleset.sources.get(rule.id), test, {"rule": rule.id}
    for provider in ruleset.providers.values():
        for test in provider.tests:
            yield (f"provider {provider.id}", ruleset.sources.get(f"provider:{provider.id}"), test,
                   {"provider": provider.id})


def check_ruleset(ruleset: Ruleset) -> tuple[list[CaseResult], list[str]]:
    """Run every rule's and provider's test cases. Returns (results, ids of rules no case exercises)."""
    results = [
        run_case(ruleset, test.report, expected_of(test.expect, default), owner, file)
        for owner, file, test, default in _rule_cases(ruleset)
    ]
    exercised = {r.got.get("rule") for r in results}
    idle = [f"{ruleset.sources.get(r.id)} [{r.id}]" for r in ruleset.rules if r.id not in exercised]
    return results, idle
