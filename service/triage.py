"""One report in, one Classification out: normalize -> classify -> recovery. Pure given the id."""

from __future__ import annotations

from service.models import Classification, ErrorReport
from service.normalize import NormalizedError, normalize
from service.recovery import build_recovery, details_of
from service.rules.engine import Ruleset, Verdict, classify


def triage(
    report: ErrorReport, ruleset: Ruleset, report_id: str, explain: bool = False
) -> tuple[Classification, NormalizedError, Verdict]:
    error = normalize(report)
    verdict = classify(error, ruleset, explain=explain)
    details = details_of(verdict, error)
    retryable, recovery = build_recovery(verdict, error, details)
    classification = Classification(
        id=report_id,
        class_=verdict.class_,
        reason=verdict.reason,
        provider=verdict.provider.id,
        provider_kind=verdict.provider.kind,
        retryable=retryable,
        rule=verdict.rule.id if verdict.rule else None,
        decided_by=verdict.decided_by,
        confidence=verdict.confidence,
        recovery=recovery,
        details=details,
        rules_version=ruleset.version,
        explain=verdict.explain,
    )
    return classification, error, verdict
