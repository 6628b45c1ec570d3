"""Secret redaction: applied to every message before it is matched, logged, sent or echoed.

An RE2 set first tells, in one linear pass, whether any shape is present at all (the
common case: none is, and the text is returned as it came); only then does one
compiled alternation replace them. Each shape keeps a short, non-secret prefix ("sk-", "Bearer ") so a reader still sees
what kind of secret was there.
"""

from __future__ import annotations

import re
from typing import Any

import re2

REDACTED = "[REDACTED]"

# Words that follow the scheme name in prose ("Basic authentication is deprecated"), not credentials.
_SCHEME_WORDS = r"(?:authentication|authorization|credentials?|tokens?|required|scheme|header|access)\b"
# (name, pattern); a group named k<N> is a harmless prefix kept verbatim before the mask.
_SHAPES: tuple[tuple[str, str], ...] = (
    ("private_key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]{0,8192}?-----END [A-Z ]*PRIVATE KEY-----"),
    ("jwt", r"(?-i:\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,})"),
    ("anthropic_key", r"(?-i:\bsk-ant-[A-Za-z0-9_-]{16,})"),
    ("openai_key", r"(?-i:\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})"),
    ("google_key", r"(?-i:\bAIza[0-9A-Za-z_-]{30,})"),
    ("github_token", r"(?-i:\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}))"),
    ("gitlab_token", r"(?-i:\bgl(?:pat|oas|dt|rt|ptt|ft|imt|agent|cbt)-[A-Za-z0-9_-]{16,})"),
    ("slack_token", r"(?-i:\bxox[abposr]-[A-Za-z0-9-]{10,})"),
    # Keys of the AI providers and the SaaS APIs agents call, by their documented prefixes.
    ("vendor_key", (r"(?-i:\b(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{20,}|hf_[A-Za-z0-9]{30,}"
                    r"|gsk_[A-Za-z0-9]{20,}|pplx-[A-Za-z0-9]{20,}|xai-[A-Za-z0-9]{20,}|r8_[A-Za-z0-9]{20,}"
                    r"|fw_[A-Za-z0-9]{20,}|tvly-(?:dev-|prod-)?[A-Za-z0-9]{20,}|fc-[0-9a-f]{32}\b"
                    r"|lsv2_(?:pt|sk)_[A-Za-z0-9_]{20,}|pcsk_[A-Za-z0-9_]{20,}|(?:secret|ntn)_[A-Za-z0-9]{30,}"
                    r"|lin_api_[A-Za-z0-9]{30,}|shp(?:at|ca|pa|ss)_[A-Fa-f0-9]{32}|ATATT[A-Za-z0-9_=-]{30,}"
                    r"|ya29\.[A-Za-z0-9_-]{20,}|npm_[A-Za-z0-9]{36}|do[por]_v1_[a-f0-9]{64}"
                    r"|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}))")),
    ("slack_webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/]+"),
    ("aws_access_key", r"(?-i:\b(?:AKIA|ASIA)[0-9A-Z]{16}\b)"),
    ("aws_secret", r"((?P<k1>aws_secret_access_key[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{30,})"),
    ("bearer", r"(?P<k2>\bbearer\s+)(?!" + _SCHEME_WORDS + r")[A-Za-z0-9._~+/=-]{8,}"),
    ("basic_auth", r"(?P<k3>\bbasic\s+)(?!" + _SCHEME_WORDS + r")[A-Za-z0-9+/]{8,}={0,2}"),
    ("url_password", r"(?P<k4>\b[a-z][a-z0-9+.-]*://[^/\s:@]{1,256}:)[^@\s/]{1,256}(?=@)"),
    (
        "key_value",
        (r"(?P<k5>\b(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|client[_-]?secret|password|passwd|secret)"
         r"[\"']?\s*[:=]\s*[\"']?)[^\s\"'&,;}]{4,}"),
    ),
    ("query_key", r"(?P<k6>[?&](?:key|token|api_key|apikey|access_token|sig|signature)=)[^&\s\"']{4,}"),
    # A key of no known shape, where a body or a provider's message names it as one.
    ("json_key", r"(?P<k7>\"(?:key|token)\"\s*:\s*\")[A-Za-z0-9_~+/=-]{16,}"),
    ("provided_key", r"(?P<k8>\bkey provided:\s*)[A-Za-z0-9_~+/=-]{16,}"),
)

_PATTERN = re.compile("|".join(f"(?P<{name}>{body})" for name, body in _SHAPES), re.IGNORECASE)


def _detector() -> re2.Set:
    """Every shape in one RE2 set (lookarounds and long bounded repeats, which RE2 lacks, loosened: a superset)."""
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False
    detector = re2.Set.SearchSet(options)
    for _, body in _SHAPES:
        detector.Add(body.replace("(?=@)", "@").replace("{0,8192}?", "*?").replace(f"(?!{_SCHEME_WORDS})", ""))
    detector.Compile()
    return detector


_DETECTOR = _detector()
_KEPT_GROUPS = ("k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8")


def _mask(match: re.Match[str]) -> str:
    for group in _KEPT_GROUPS:
        kept = match.group(group)
        if kept is not None:
            return kept + REDACTED
    return REDACTED


def redact(text: str) -> str:
    """Return text with every known secret shape replaced by [REDACTED]."""
    if not text or _DETECTOR.Match(text) is None:
        return text
    return _PATTERN.sub(_mask, text)


def redact_value(value: Any, depth: int = 0) -> Any:
    """Redact every string inside a JSON-like value (bounded depth; deeper parts are dropped)."""
    if isinstance(value, str):
        return redact(value)
    if depth > 16:
        return None
    if isinstance(value, dict):
        return {k: redact_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v, depth + 1) for v in value]
    return value
