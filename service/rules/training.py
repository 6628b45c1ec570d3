"""What the learned fallback trains on: the examples/ table and every rule's own test cases."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from pydantic import ValidationError

from service.models import ErrorReport
from service.normalize import normalize
from service.rules.engine import Ruleset, provider_of
from service.rules.labelled import Example, LabelledReport


def _rule_tests(ruleset: Ruleset) -> Iterator[LabelledReport]:
    """A rule's test teaches its expected class (the rule's own when it names none). Tests that
    expect a class without a reason, or whose report does not validate, teach nothing."""
    for rule in ruleset.rules:
        for test in rule.tests:
            expect = test.expect
            class_id = expect.class_ if expect and expect.class_ else rule.class_
            reason = expect.reason if expect and expect.reason else rule.reason if class_id == rule.class_ else None
            if reason is None:
                continue
            try:
                report = ErrorReport.model_validate(test.report)
            except ValidationError:
                continue  # `errtriage check` reports it
            yield LabelledReport(report, class_id, reason, f"rule {rule.id}")


def training_set(ruleset: Ruleset) -> list[Example]:
    """Normalized, with the provider each one is detected as (its kind is a feature)."""
    labelled = [item for item in (*ruleset.labelled, *_rule_tests(ruleset))
                 if (item.class_, item.reason) in ruleset.by_reason]  # a test may expect an undeclared pair
    normalized = [(item, normalize(item.report)) for item in labelled]
    return [Example(error, provider_of(error, ruleset).kind, item.class_, item.reason, item.origin)
            for item, error in normalized]


def with_fallback(ruleset: Ruleset, min_confidence: float) -> Ruleset:
    """The same rules with a fallback trained on their examples and tests (seconds with the
    shipped tables). The ruleset is unchanged when there is too little to learn from."""
    from service.rules.fallback import train  # numpy and scikit-learn: only where a fallback is trained

    fallback = train(training_set(ruleset), min_confidence)
    return replace(ruleset, fallback=fallback) if fallback is not None else ruleset
