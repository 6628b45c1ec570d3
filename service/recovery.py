"""Recovery advice: turn a Verdict into what an agent does next. Pure.

Sources, in order of precedence: the payload's own guidance (an MCP `_meta`), the
rule, the reason, the class (TAXONOMY.md defaults in rules/classes/). Then the
attempt count caps it: at most 3 tries per tool per task.
"""

from __future__ import annotations

import re
from typing import Any

from rapidfuzz import fuzz, process, utils

from service.models import Action, Recovery
from service.normalize import NormalizedError
from service.redact import redact
from service.rules.engine import Verdict

HARD_CAP = 3
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_MISSING_IN_PARENS = re.compile(r"\s*\(\{(\w+)\}\)")  # " ({key_argument})"
_SENTENCE = re.compile(r"(?<=[.;!?])\s+")
_SUGGESTIONS = 3
_MIN_SIMILARITY = 50


def _fill(text: str | None, values: dict[str, Any]) -> str | None:
    """Fill `{name}` placeholders from details. A placeholder with no value never reaches a
    caller: its parenthesis goes, or else the sentence that holds it (None if nothing is left)."""
    if not text or "{" not in text:
        return text
    text = _MISSING_IN_PARENS.sub(lambda m: m.group(0) if _known(m.group(1), values) else "", text)
    sentences = [s for s in _SENTENCE.split(text) if all(_known(name, values) for name in _PLACEHOLDER.findall(s))]
    filled = _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), " ".join(sentences)).strip()
    return filled or None


def _known(name: str, values: dict[str, Any]) -> bool:
    return values.get(name) not in (None, "")


def _merged(first: list[Any], second: list[Any] | None) -> list[Any]:
    merged = list(first)
    for item in second or []:
        if item not in merged:
            merged.append(item)
    return merged


def suggest_tools(name: str | None, available: Any) -> list[str]:
    """Nearest real tool names to the one the model invented, best first."""
    if not name or not isinstance(available, list):
        return []
    choices = [t for t in available if isinstance(t, str)][:1000]
    ranked = process.extract(
        name, choices, processor=_words, scorer=_token_ratio, limit=_SUGGESTIONS, score_cutoff=_MIN_SIMILARITY
    )
    return [choice for choice, _, _ in ranked]


_WORD_BREAK = re.compile(r"(?<=[a-z])(?=[A-Z])|[_\-.]")


def _words(text: str) -> str:
    """searchWeb ~ web_search: compare the words, not the casing or the separators."""
    return utils.default_process(_WORD_BREAK.sub(" ", text))


def _token_ratio(a: str, b: str, **kwargs: Any) -> float:
    return max(fuzz.token_sort_ratio(a, b, **kwargs), fuzz.ratio(a, b, **kwargs))


def details_of(verdict: Verdict, error: NormalizedError) -> dict[str, Any]:
    """What the rule captured, plus what the payload said plainly (the bad parameter, the step)."""
    details: dict[str, Any] = {k: redact(v) for k, v in verdict.captures.items()}
    if error.param and "parameter" not in details:
        details["parameter"] = error.param
    if error.tool and "tool" not in details:
        details["tool"] = error.tool
    if error.retry_after_ms is not None:
        details["retry_after_ms"] = error.retry_after_ms
    if error.upstream is not None:
        details["upstream_provider"] = redact(error.upstream)
    if error.pipeline is not None:
        details["pipeline"] = _pipeline(error)
    return details


PIPELINE_HINTS = {
    "continue": "An optional step failed: the pipeline can continue without it.",
    "resume_from_checkpoint": "A required step failed: stop the pipeline and resume from its last checkpoint "
                              "once the cause is fixed.",
}


def _pipeline(error: NormalizedError) -> dict[str, Any]:
    """Seed 003: an optional step (`recoverable`) does not halt the pipeline; a required one does."""
    step = dict(error.pipeline or {})
    optional = bool(step.get("recoverable")) or bool(error.context.get("optional"))
    step["can_continue"] = optional
    step["next"] = "continue" if optional else "resume_from_checkpoint"
    return step


def build_recovery(verdict: Verdict, error: NormalizedError, details: dict[str, Any]) -> tuple[bool, Recovery]:
    """Returns (retryable, recovery) with the attempt cap applied."""
    spec = verdict.recovery
    retryable = verdict.retryable
    action = spec.action or (Action.retry_with_backoff if retryable else Action.none)
    max_attempts = min(spec.max_attempts or (HARD_CAP if retryable else 1), HARD_CAP)
    attempts_left = max(0, max_attempts - (error.attempt or 1)) if retryable else 0
    backoff = list(spec.backoff_ms or [])
    if retryable and error.retry_after_ms is not None:
        backoff = [error.retry_after_ms, *backoff[1:]] if backoff else [error.retry_after_ms]
    meta = error.meta
    values = {"tool": error.tool or "the tool", "error": error.message[:300], **details}
    recovery = Recovery(
        action=action,
        max_attempts=max_attempts,
        attempts_left=attempts_left,
        backoff_ms=backoff[:attempts_left] if retryable else [],
        retry_hint=_text(meta.get("retry_hint")) or _fill(spec.retry_hint, values),
        alternatives=_merged(_list(meta.get("alternatives")), spec.alternatives),
        examples=_merged(_list(meta.get("examples")), spec.examples),
        feedback_hint=_text(meta.get("feedback_hint")) or _fill(spec.feedback_hint, values),
    )
    if "pipeline" in details and recovery.retry_hint is None:
        recovery.retry_hint = PIPELINE_HINTS[details["pipeline"]["next"]]
    if action is Action.discover_tool:
        recovery.retry_hint = None
        recovery.alternatives = []
        recovery.suggested_tools = suggest_tools(details.get("tool") or error.tool,
                                                 error.context.get("available_tools"))
    if retryable and attempts_left == 0:
        retryable = False
        recovery.action = Action.switch_model if verdict.class_ == "tool_calling" else Action.escalate
        recovery.backoff_ms = []
    return retryable, recovery


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []
