"""A drafted rule for a group of unknown reports: YAML for rules/classes/ that `errtriage check` accepts. Pure.

The rule matches on the longest distinctive literal run of the group's masked message (words
between the masked placeholders: at least 3 words or 12 characters, nothing secret-looking;
the example is redacted first), so it catches the next report of that shape whatever its ids
and numbers. A message with no such run gets an RE2 pattern of its masked shape (placeholders
as character classes) instead; a report with no message, its type or code. The status joins
the match when the report had one.

Class and reason: the learned fallback's verdict when it decided the group; otherwise its most
probable class other than `unknown`, below the confidence it needs to decide on its own (a
rule must name a real class, so this is the best available guess; the operator reviews it).
With no fallback at all (ERRTRIAGE_FALLBACK=off, too little to learn from) the draft says
`tool_error/internal`. Priority -40 is below every shipped rule (the lowest is -30): the draft
only catches what nothing else catches. Its test case is the redacted example, expecting this
rule, class and reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson
import re2

from service.models import ErrorReport
from service.normalize import NormalizedError, normalize
from service.redact import REDACTED, redact_value
from service.rules.engine import UNKNOWN_CLASS, Ruleset, provider_of
from service.unknowns.fingerprint import PLACEHOLDER, mask

DRAFT_PRIORITY = -40
DEFAULT_GUESS = ("tool_error", "internal")
LITERAL_CAP = 120
EXAMPLE_CAP = 16 * 1024  # a bigger report keeps only its normalized fields in the example
_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@([A-Za-z0-9.-]+\.[A-Za-z]{2,})\b")
_SECRETISH = re.compile(r"[A-Za-z0-9_+/=-]{20,}")
_EDGES = " \t\r\n:;,.()[]{}'\"`=|-<>"
_SHAPE_PATTERNS = {"<n>": r"[0-9a-fA-Fx.,]+", "<q>": r"[^'\"`\n]{1,200}", "<id>": r"[\w.:-]+",
                   "<hash>": r"[0-9a-fA-F]+", "<email>": r"\S+@\S+", "<path>": r"\S*"}
_WORD = re.compile(r"[a-z0-9]+")


def example_of(report: ErrorReport) -> dict[str, Any]:
    """The report as the inbox keeps and shows it: secrets redacted, email addresses replaced
    (user@ plus the domain kept), and, past 16 KiB, only the fields that classify it."""
    data = report.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    data = _unmail(redact_value(data))
    if len(orjson.dumps(data)) <= EXAMPLE_CAP:
        return data  # type: ignore[no-any-return]
    error = normalize(report)
    small = {"message": error.message[:4000], "type": error.types[0] if error.types else None,
             "code": error.codes[0] if error.codes else None, "status": report.status, "tool": report.tool,
             "source": report.source, "provider": report.provider}
    return _unmail({k: v for k, v in small.items() if v is not None})  # type: ignore[no-any-return]


def _unmail(value: Any) -> Any:
    if isinstance(value, str):
        return _EMAIL.sub(r"user@\1", value)
    if isinstance(value, dict):
        return {k: _unmail(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unmail(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Guess:
    class_: str
    reason: str
    confidence: float
    decided: bool  # the fallback decided it (at or above its minimum confidence)


def guess_for(error: NormalizedError, ruleset: Ruleset) -> Guess:
    """The class and reason a draft names (see the module docstring)."""
    fallback = ruleset.fallback
    if fallback is None:
        return Guess(*DEFAULT_GUESS, 0.0, False)
    kind = provider_of(error, ruleset).kind
    probabilities = fallback.probabilities(error, kind)
    by_class: dict[str, float] = {}
    best: dict[str, tuple[float, str]] = {}
    for label, p in zip(fallback.labels, probabilities, strict=True):
        class_id, reason = label.split("/", 1)
        by_class[class_id] = by_class.get(class_id, 0.0) + float(p)
        if float(p) > best.get(class_id, (-1.0, ""))[0]:
            best[class_id] = (float(p), reason)
    real = {c: p for c, p in by_class.items() if c != UNKNOWN_CLASS and c in ruleset.classes}
    if not real:
        return Guess(*DEFAULT_GUESS, 0.0, False)
    class_id = max(real, key=real.__getitem__)
    confidence = round(real[class_id], 4)
    return Guess(class_id, best[class_id][1], confidence, confidence >= fallback.min_confidence)


def literal_of(message: str) -> str | None:
    """The longest distinctive literal run of the masked message, or None."""
    masked = mask(message)
    runs: list[str] = []
    for piece in PLACEHOLDER.split(masked):
        for part in _SECRETISH.split(piece.replace(REDACTED, "\0")):
            runs.extend(part.split("\0"))
    best = None
    for run in runs:
        run = run.strip(_EDGES)
        if len(run) > LITERAL_CAP:
            run = run[:LITERAL_CAP].rsplit(" ", 1)[0].strip(_EDGES)
        if (len(run.split()) >= 3 or len(run) >= 12) and (best is None or len(run) > len(best)):
            best = run
    if best is None or best.lower() not in message.lower():
        return None
    return best


def pattern_of(message: str) -> str | None:
    """An RE2 pattern of the masked message's shape (its first 300 characters), or None."""
    masked = mask(message)[:300]
    if not masked.strip() or not re.search(r"[A-Za-z]{3}", PLACEHOLDER.sub("", masked)):
        return None
    parts, last = [], 0
    for found in PLACEHOLDER.finditer(masked):
        parts.append(re.escape(masked[last:found.start()]))
        parts.append(_SHAPE_PATTERNS[found.group()])
        last = found.end()
    parts.append(re.escape(masked[last:]))
    pattern = "".join(parts).replace("\\ ", " ")
    try:
        compiled = re2.compile(pattern, options=_re2_options())
    except re2.error:
        return None
    return pattern if compiled.search(message) else None


def _re2_options() -> re2.Options:
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False
    return options


def _slug(text: str, fingerprint: str) -> str:
    words = _WORD.findall(text.lower())[:4]
    return "-".join(["draft", *words, fingerprint[:6]])[:100]


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def draft_rule(example: dict[str, Any], ruleset: Ruleset, fingerprint: str, count: int = 1,
               suggested: dict[str, Any] | None = None) -> str:
    """YAML text of one rule (with its test case) for the group whose redacted example this is;
    `suggested` is the fallback's verdict recorded with the group, used while the rules still know it."""
    report = ErrorReport.model_validate(example)
    error = normalize(report)
    known = suggested is not None and suggested.get("reason") in getattr(
        ruleset.classes.get(suggested.get("class", "")), "reasons", {})
    guess = (Guess(suggested["class"], suggested["reason"], float(suggested.get("confidence") or 0.0), True)
             if known and suggested is not None else guess_for(error, ruleset))
    match: list[str] = []
    literal = literal_of(error.message) if error.message else None
    pattern = None if literal or not error.message else pattern_of(error.message)
    if literal:
        match.append(f"message: {{contains: [{_json(literal)}]}}")
        named = literal
    elif pattern:
        match.append(f"message: {{regex: [{_json(pattern)}]}}")
        named = PLACEHOLDER.sub(" ", mask(error.message))
    elif error.types:
        match.append(f"type: {{equals: [{_json(error.types[0])}]}}")
        named = error.types[0]
    elif error.codes:
        match.append(f"code: {{equals: [{_json(error.codes[0])}]}}")
        named = error.codes[0]
    else:
        named = error.tool or error.source or "status"
        if error.tool:
            match.append(f"tool: {{equals: [{_json(error.tool)}]}}")
        elif error.source:
            match.append(f"source: {{equals: [{_json(error.source)}]}}")
    if error.status is not None:
        match.append(f"status: [{error.status}]")
    rule_id = _slug(named, fingerprint)
    why = (f"the learned fallback's verdict (confidence {guess.confidence})" if guess.decided else
           f"the learned fallback's best guess, below its threshold (confidence {guess.confidence}): review it"
           if guess.confidence else "no learned fallback to ask (off, still training, or too little to learn from): "
           "review the class and reason")
    lines = [
        f"# Drafted by errtriage from {count} unknown report(s), group {fingerprint}.",
        f"# Class and reason: {why}. Save under rules/classes/ (e.g. 85-drafts.yaml), then run errtriage check.",
        "rules:",
        f"  - id: {rule_id}",
        f"    class: {guess.class_}",
        f"    reason: {guess.reason}",
        f"    priority: {DRAFT_PRIORITY}",
        "    match:",
        *(f"      {line}" for line in match),
        "    tests:",
        f"      - report: {_json(example)}",
        f"        expect: {{class: {guess.class_}, reason: {guess.reason}, rule: {rule_id}}}",
    ]
    return "\n".join(lines) + "\n"
