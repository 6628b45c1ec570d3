"""What a template sees: the classification, the (redacted) error and its context.

The same keys are always present (None when the report did not carry them), so a
template that renders with the samples below renders with any real report. That is
what lets every template be test-rendered when the rules load, not at send time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from service.models import Classification
from service.normalize import NormalizedError
from service.redact import redact, redact_value

CONTEXT_KEYS = ("user_email", "user_id", "work_id", "work_name", "step_id")
MESSAGE_LIMIT = 4000


def template_variables(classification: Classification, error: NormalizedError, route: str | None,
                       provider_name: str | None) -> dict[str, Any]:
    """Every variable a notification template may use. Text from the payload is redacted."""
    context = _context(error.context)
    provider = redact(classification.provider) if classification.provider else None  # may be a caller's hint
    return {
        "id": classification.id,
        "class": classification.class_,
        "reason": classification.reason,
        "provider": provider,
        "provider_name": provider_name or provider,
        "provider_kind": classification.provider_kind,
        "retryable": classification.retryable,
        "rule": classification.rule,
        "route": route,
        "message": redact(_capped(error.message)),
        "status": error.status,
        "source": redact(error.source) if error.source else None,
        "tool": redact(error.tool) if error.tool else None,
        "recovery": redact_value(classification.recovery.model_dump(mode="json")),
        "details": redact_value(dict(classification.details)),
        "context": context,
        "user": context["user_email"] or context["user_id"],
        "work_id": context["work_id"],
        "work_name": context["work_name"],
    }


def _user(classification: Classification, error: NormalizedError) -> str | None:
    return _text(error.context.get("user_email")) or _text(error.context.get("user_id"))


# The values a route's group_by may name (schema.GROUP_KEYS). Cheap: nothing rendered or redacted,
# since the request path computes the ones a route names for every routed report, as a throttle key.
_GROUP_VALUES: dict[str, Callable[[Classification, NormalizedError], str | None]] = {
    "class": lambda classification, error: classification.class_,
    "reason": lambda classification, error: classification.reason,
    "provider": lambda classification, error: classification.provider,
    "user": _user,
    "source": lambda classification, error: error.source,
    "tool": lambda classification, error: error.tool,
    "work_id": lambda classification, error: _text(error.context.get("work_id")),
}


def group_of(keys: Sequence[str], classification: Classification, error: NormalizedError) -> tuple[str | None, ...]:
    """The values of `keys` (a route's group_by) for one report: what makes repeats one group."""
    return tuple(_GROUP_VALUES[key](classification, error) for key in keys)


def _text(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _context(raw: dict[str, Any]) -> dict[str, Any]:
    context: dict[str, Any] = dict.fromkeys(CONTEXT_KEYS)
    context.update(redact_value(raw) or {})
    for key in CONTEXT_KEYS:
        context[key] = _text(context[key])
    return context


def _capped(message: str) -> str:
    return message if len(message) <= MESSAGE_LIMIT else message[:MESSAGE_LIMIT] + "…"


def _sample(provider: str | None, context: dict[str, Any], message: str) -> dict[str, Any]:
    full = dict.fromkeys(CONTEXT_KEYS) | context
    recovery = {"action": "escalate", "max_attempts": 1, "attempts_left": 0, "backoff_ms": [],
                "retry_hint": "A sample hint.", "alternatives": [], "examples": [], "feedback_hint": None,
                "suggested_tools": []}
    return {
        "id": "sample", "class": "ai_credits", "reason": "quota_exceeded", "provider": provider,
        "provider_name": provider, "provider_kind": "ai" if provider else None, "retryable": False,
        "rule": "sample-rule", "route": "sample-route", "message": message, "status": 429,
        "source": None, "tool": None, "recovery": recovery, "details": {}, "context": full,
        "user": full["user_email"] or full["user_id"], "work_id": full["work_id"], "work_name": full["work_name"],
    }


def samples() -> list[dict[str, Any]]:
    """A full and a sparse set of variables; the message has quotes, markup and a line break,
    so a JSON template that forgets `|tojson` fails at load."""
    full = _sample("openai", {"user_email": "dev@example.com", "user_id": "u-1", "work_id": "w-42",
                              "work_name": "Sample work", "step_id": "s-1"},
                   'Sample "quoted" <b>message</b>\nsecond line')
    sparse = _sample(None, {}, "")
    return [full, sparse]
