"""The compiled, immutable Ruleset and classification: a pure function of (error, ruleset).

Order of evaluation, the one thing an operator must be able to predict:
  provider: the caller's hint; else the first provider evidence in the order
            gateways first, then types/codes, hosts, model names, message text;
  class:    rules by priority (higher first), then file-name order, then position
            in the file; the first rule whose conditions all hold wins; none -> unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from service.models import DecidedBy
from service.normalize import NormalizedError
from service.rules.labelled import Guess, LabelledReport
from service.rules.matcher import Entry, Fields, Hit, SetMatcher
from service.schema.classes import ClassRule, ClassSpec, RecoverySpec
from service.schema.match import MatchBlock, TextCondition
from service.schema.providers import ProviderSpec

if TYPE_CHECKING:  # the model's module loads numpy; a ruleset is served long before its fallback is trained
    from service.rules.fallback import Fallback

UNKNOWN_CLASS = "unknown"
UNKNOWN_REASON = "unclassified"
ProviderLevel = Literal["types/codes", "hosts", "models", "text"]
PROVIDER_LEVELS: tuple[ProviderLevel, ...] = ("types/codes", "hosts", "models", "text")
EVALUATION_ORDER = "priority (higher first), then file-name order, then position in file; first match wins"
CLASS_TABLE, PROVIDER_TABLE = 0, 1
DECIDED_SIZE = 1024  # distinct (satisfied conditions, hint) pairs remembered per ruleset; cleared when full


@dataclass(frozen=True, slots=True)
class ProviderVerdict:
    id: str | None
    kind: str | None
    decided_by: ProviderLevel | Literal["hint", "none"]  # the caller's hint, an evidence level, or nothing


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a rule table says about one error, before recovery advice is worked out."""

    class_: str
    reason: str
    rule: ClassRule | None
    provider: ProviderVerdict
    retryable: bool
    recovery: RecoverySpec
    captures: dict[str, str]
    explain: dict[str, Any] | None = None
    decided_by: DecidedBy = "rule"
    confidence: float = 1.0


@dataclass(frozen=True)
class FileInfo:
    path: str
    rules: int
    providers: int
    classes: int


@dataclass(frozen=True)
class Ruleset:
    """Everything one load produced. What it answers never changes: a reload builds a new one. Its
    only mutable part is `decided`, a bounded memo of answers it has already worked out."""

    version: str
    loaded_at: datetime
    files: tuple[FileInfo, ...]
    classes: dict[str, ClassSpec]
    rules: tuple[ClassRule, ...]
    providers: dict[str, ProviderSpec]
    matcher: SetMatcher  # table CLASS_TABLE: class rules; table PROVIDER_TABLE: provider evidence
    provider_entries: tuple[tuple[str, ProviderLevel], ...]
    decisions: dict[str | None, tuple[bool, RecoverySpec]]  # rule id (None: unknown) -> retryable, recovery
    by_reason: dict[tuple[str, str], tuple[bool, RecoverySpec]]  # (class, reason) -> the same, for the fallback
    aliases: dict[str, str] = field(default_factory=dict)  # lower-cased hint -> provider id
    notify: Any = None  # the compiled routes, channels, templates and silences (service.notify)
    sources: dict[str, str] = field(default_factory=dict)  # rule or provider id -> file
    fallback: Fallback | None = None  # the learned fallback for what no rule matches (None: off)
    labelled: tuple[LabelledReport, ...] = ()  # the examples/ table: what the fallback learns from
    # (satisfied conditions, provider hint) -> provider and class hit; filled and cleared by _decide.
    decided: dict[tuple[frozenset[int], str | None], tuple[ProviderVerdict, Hit | None]] = field(
        default_factory=dict, compare=False, repr=False)

    def reasons(self) -> list[tuple[str, str]]:
        return [(c.id, r) for c in self.classes.values() for r in c.reasons]



def host_pattern(host: str) -> str:
    """A listed host matches itself and its subdomains, never a longer name that ends in it
    (grok.com is not ngrok.com); one ending in a dot (`bedrock-runtime.`) names a label prefix,
    one starting with a dash (`-aiplatform.googleapis.com`) a label suffix (regional endpoints)."""
    if host.startswith("-"):
        return rf"(?:^|\.)[a-z0-9-]*{re.escape(host)}$"
    return rf"(?:^|\.){re.escape(host)}" + ("" if host.endswith(".") else "$")


def provider_entries(providers: list[ProviderSpec]) -> tuple[list[Entry], list[tuple[str, ProviderLevel]]]:
    """Provider evidence as matcher entries, in detection order (gateways first, then by level)."""
    ranked: list[tuple[int, int, int, Entry, tuple[str, ProviderLevel]]] = []
    for order, spec in enumerate(providers):
        levels: list[list[MatchBlock]] = [[], [], [], []]
        if spec.types:
            levels[0].append(MatchBlock(type=TextCondition(contains=spec.types)))
        if spec.codes:
            levels[0].append(MatchBlock(code=TextCondition(equals=spec.codes)))
            levels[0].append(MatchBlock(type=TextCondition(equals=spec.codes)))
        if spec.hosts:
            levels[1].append(MatchBlock(host=TextCondition(regex=[host_pattern(host) for host in spec.hosts])))
        if spec.models:
            levels[2].append(MatchBlock(model=TextCondition(regex=spec.models)))
            levels[2].append(MatchBlock(message=TextCondition(regex=spec.models)))
        if spec.text:
            levels[3].append(MatchBlock(message=TextCondition(regex=spec.text)))
        for level, blocks in enumerate(levels):
            if blocks:
                key = (spec.id, PROVIDER_LEVELS[level])
                ranked.append((0 if spec.gateway else 1, level, order, Entry(key, blocks), key))
    ranked.sort(key=lambda item: item[:3])
    return [item[3] for item in ranked], [item[4] for item in ranked]


def _fields(error: NormalizedError) -> Fields:
    fields: Fields = {
        "message": [error.message] if error.message else [],
        "type": error.types,
        "code": error.codes,
        "host": error.hosts,
        "model": error.models,
        "shape": [error.shape],
    }
    for name, value in (("tool", error.tool), ("source", error.source)):
        if value:
            fields[name] = [value]
    return fields


def _provider_fields(provider: ProviderVerdict) -> Fields:
    fields: Fields = {"provider": [provider.id]} if provider.id else {}
    if provider.kind:
        fields["provider_kind"] = [provider.kind]
    return fields


def detect_provider(hint: str | None, ruleset: Ruleset, found: set[int]) -> ProviderVerdict:
    if hint:
        provider_id = ruleset.aliases.get(hint, hint)
        spec = ruleset.providers.get(provider_id)
        return ProviderVerdict(provider_id, spec.kind if spec else None, "hint")
    hit = ruleset.matcher.first(PROVIDER_TABLE, found)
    if hit is None:
        return ProviderVerdict(None, None, "none")
    provider_id, level = ruleset.provider_entries[hit.entry]
    return ProviderVerdict(provider_id, ruleset.providers[provider_id].kind, level)


def provider_of(error: NormalizedError, ruleset: Ruleset) -> ProviderVerdict:
    """The provider alone, as classify would detect it."""
    return detect_provider(error.provider_hint, ruleset, ruleset.matcher.satisfied(_fields(error), error.status))


def _overlay(*specs: RecoverySpec | None) -> RecoverySpec:
    merged: dict[str, Any] = {}
    for spec in specs:
        if spec is not None:
            merged.update(spec.model_dump(exclude_none=True))
    return RecoverySpec(**merged)


def decide(class_id: str, reason: str, rule: ClassRule | None,
           classes: dict[str, ClassSpec]) -> tuple[bool, RecoverySpec]:
    """Retryable and recovery for a rule (or unknown): rule over reason over class. Done at load."""
    spec = classes.get(class_id)
    if spec is None:
        return False, _overlay(rule.recovery if rule else None)
    reason_spec = spec.reasons.get(reason)
    retryable = spec.retryable
    if reason_spec is not None and reason_spec.retryable is not None:
        retryable = reason_spec.retryable
    if rule is not None and rule.retryable is not None:
        retryable = rule.retryable
    recovery = _overlay(spec.recovery, reason_spec.recovery if reason_spec else None, rule.recovery if rule else None)
    return retryable, recovery


Decision = tuple[bool, RecoverySpec]  # retryable, recovery


def reason_decisions(classes: dict[str, ClassSpec]) -> dict[tuple[str, str], Decision]:
    """Every declared class and reason's own decision: what rules without overrides and the
    fallback's verdicts take. Done at load."""
    return {(spec.id, reason): decide(spec.id, reason, None, classes) for spec in classes.values()
            for reason in spec.reasons}


def decisions_for(rules: tuple[ClassRule, ...], classes: dict[str, ClassSpec],
                  by_reason: dict[tuple[str, str], Decision]) -> dict[str | None, Decision]:
    """Rules that override neither retryable nor recovery share their class and reason's decision."""
    decisions: dict[str | None, Decision] = {
        rule.id: by_reason[(rule.class_, rule.reason)] if rule.retryable is None and rule.recovery is None
        else decide(rule.class_, rule.reason, rule, classes) for rule in rules}
    decisions[None] = decide(UNKNOWN_CLASS, UNKNOWN_REASON, None, classes)
    return decisions


def classify(error: NormalizedError, ruleset: Ruleset, explain: bool = False) -> Verdict:
    """Decide class, reason and provider for one normalized error. Pure and total.

    One scan of the fields serves both tables: provider evidence first, then, with the
    provider's own fields added, the class rules. When no rule matches, the learned
    fallback (if the ruleset has one) may decide; otherwise the answer is unknown.
    """
    fields = _fields(error)
    found = ruleset.matcher.satisfied(fields, error.status)
    provider, hit = _decide(ruleset, found, error.provider_hint)
    fields.update(_provider_fields(provider))
    rule = ruleset.rules[hit.entry] if hit else None
    guess = ruleset.fallback.predict(error, provider.kind, explain) if rule is None and ruleset.fallback else None
    if guess is not None:
        retryable, recovery = ruleset.by_reason[(guess.class_, guess.reason)]
    else:
        retryable, recovery = ruleset.decisions[rule.id if rule else None]
    return Verdict(
        class_=rule.class_ if rule else guess.class_ if guess else UNKNOWN_CLASS,
        reason=rule.reason if rule else guess.reason if guess else UNKNOWN_REASON,
        rule=rule,
        provider=provider,
        retryable=retryable,
        recovery=recovery,
        captures=ruleset.matcher.captures(hit, fields) if hit else {},
        explain=_explain(error, fields, provider, rule, ruleset, guess) if explain else None,
        decided_by="rule" if rule else "fallback" if guess else "none",
        confidence=1.0 if rule else guess.confidence if guess else 0.0,
    )


def _decide(ruleset: Ruleset, found: set[int], hint: str | None) -> tuple[ProviderVerdict, Hit | None]:
    """The provider, then the class rule with the provider's own fields added: a pure function of
    the satisfied conditions and the hint. Messages that differ only in ids and numbers satisfy
    the same conditions, so the answer is remembered (about 10 µs a report)."""
    key = (frozenset(found), hint)
    decided = ruleset.decided.get(key)
    if decided is None:
        provider = detect_provider(hint, ruleset, found)
        extra = _provider_fields(provider)
        if extra:
            ruleset.matcher.satisfied(extra, None, found=found)
        if len(ruleset.decided) >= DECIDED_SIZE:
            ruleset.decided.clear()
        decided = ruleset.decided[key] = (provider, ruleset.matcher.first(CLASS_TABLE, found))
    return decided


def _explain(error: NormalizedError, fields: Fields, provider: ProviderVerdict, rule: ClassRule | None,
             ruleset: Ruleset, guess: Guess | None) -> dict[str, Any]:
    tried = []
    for step in ruleset.matcher.explain(CLASS_TABLE, fields, error.status):
        candidate = ruleset.rules[step["entry"]]
        tried.append(
            {
                "rule": candidate.id,
                "file": ruleset.sources.get(candidate.id),
                "priority": candidate.priority,
                "block": step["block"],
                "matched": step["matched"],
                "won": rule is not None and candidate.id == rule.id and step["matched"],
                "conditions": step["conditions"],
                "missing": step["missing"],
                "excluded_by_not": step["excluded_by_not"],
            }
        )
    return {
        "order": EVALUATION_ORDER,
        "normalized": {
            "message": error.message[:500],
            "types": error.types,
            "codes": error.codes,
            "status": error.status,
            "hosts": error.hosts,
            "models": error.models,
            "shape": error.shape,
            "tool": error.tool,
        },
        "provider": {"id": provider.id, "decided_by": provider.decided_by},
        "rules_tried": tried,
        "winner": rule.id if rule else None,
        "fallback": _explain_fallback(ruleset, rule, guess),
    }


def _explain_fallback(ruleset: Ruleset, rule: ClassRule | None, guess: Guess | None) -> dict[str, Any] | None:
    if rule is not None:
        return None
    if ruleset.fallback is None:
        return {"used": False, "why": "no fallback is loaded (ERRTRIAGE_FALLBACK=off, or no examples)"}
    if guess is None:
        return {"used": False, "min_confidence": ruleset.fallback.min_confidence,
                "why": "the model said unknown, or was less sure than min_confidence"}
    return {"used": True, "class": guess.class_, "reason": guess.reason, "confidence": guess.confidence,
            "min_confidence": ruleset.fallback.min_confidence, **guess.leaned_on}
