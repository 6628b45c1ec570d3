"""Secret redaction: applied to every message before it is matched, logged, sent or echoed.

An RE2 set first tells, in one linear pass, which shapes may be present (the common case:
none is, and the text is returned as it came); only then does one compiled alternation of
those shapes replace them. A shape with a non-secret prefix ("gsk_", "Bearer ") keeps it, so a
reader still sees what kind of secret was there.
"""

from __future__ import annotations

import functools
import re
from itertools import chain
from typing import Any

import re2

REDACTED = "[REDACTED]"

# Words that follow the scheme name in prose ("Basic authentication is deprecated"), not credentials.
_SCHEME_WORDS = r"(?:authentication|authorization|credentials?|tokens?|required|scheme|header|access)\b"
# Keys by their vendors' documented prefixes, (prefix, rest), case-sensitive. The prefix is no
# secret and stays before the mask: it tells whose key was sent, the usual story behind an
# "Incorrect API key provided: gsk_[REDACTED]" (a Groq key sent to OpenAI). Order matters where
# one prefix starts another (sk-ant- and sk-or-v1- before sk-).
_VENDOR_KEYS: tuple[tuple[str, str], ...] = (
    ("sk-ant-", "[A-Za-z0-9_-]{16,}"), ("sk-or-v1-", "[A-Za-z0-9]{20,}"),  # Anthropic, OpenRouter
    ("sk-(?:proj-|svcacct-|admin-)?", "[A-Za-z0-9_-]{20,}"),  # OpenAI, and the many that copied its shape
    ("AIza", "[0-9A-Za-z_-]{30,}"), ("ya29\\.", "[A-Za-z0-9_-]{20,}"),  # Google API key, OAuth token
    ("gh[pousr]_", "[A-Za-z0-9]{30,}"), ("github_pat_", "[A-Za-z0-9_]{30,}"),
    ("gl(?:pat|oas|dt|rt|ptt|ft|imt|agent|cbt)-", "[A-Za-z0-9_-]{16,}"), ("xox[abposr]-", "[A-Za-z0-9-]{10,}"),
    ("(?:AKIA|ASIA)", "[0-9A-Z]{16}\\b"),
    ("(?:sk|rk)_(?:live|test)_", "[A-Za-z0-9]{16,}"), ("whsec_", "[A-Za-z0-9]{20,}"),  # Stripe
    ("hf_", "[A-Za-z0-9]{30,}"), ("gsk_", "[A-Za-z0-9]{20,}"), ("pplx-", "[A-Za-z0-9]{20,}"),
    ("xai-", "[A-Za-z0-9]{20,}"), ("r8_", "[A-Za-z0-9]{20,}"), ("fw_", "[A-Za-z0-9]{20,}"),
    ("tvly-(?:dev-|prod-)?", "[A-Za-z0-9]{20,}"), ("fc-", "[0-9a-f]{32}\\b"),  # Tavily, Firecrawl
    ("lsv2_(?:pt|sk)_", "[A-Za-z0-9_]{20,}"), ("pcsk_", "[A-Za-z0-9_]{20,}"),  # LangSmith, Pinecone
    ("(?:secret|ntn)_", "[A-Za-z0-9]{30,}"), ("lin_api_", "[A-Za-z0-9]{30,}"),  # Notion, Linear
    ("shp(?:at|ca|pa|ss)_", "[A-Fa-f0-9]{32}"), ("ATATT", "[A-Za-z0-9_=-]{30,}"),  # Shopify, Atlassian
    ("npm_", "[A-Za-z0-9]{36}"), ("do[por]_v1_", "[a-f0-9]{64}"), ("SG\\.", "[A-Za-z0-9_-]{16,}\\.[A-Za-z0-9_-]{16,}"),
)
_VENDOR_PREFIXES = "|".join(prefix for prefix, _ in _VENDOR_KEYS)
# Before a key of no known shape: not a JWT or a vendor's key, which their own shapes mask whole
# (a JWT's dots would end the generic run and leave its signature) or keeping the prefix.
_NOT_KNOWN_SHAPE = f"(?!(?-i:eyJ|{_VENDOR_PREFIXES}))"
# (name, pattern); a group whose name starts with k is a harmless prefix kept verbatim before the mask.
_SHAPES: tuple[tuple[str, str], ...] = (
    ("private_key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]{0,8192}?-----END [A-Z ]*PRIVATE KEY-----"),
    ("jwt", r"(?-i:\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,})"),
    *((f"vendor_key{i}", rf"(?-i:\b(?P<kv{i}>{prefix}){rest})") for i, (prefix, rest) in enumerate(_VENDOR_KEYS)),
    ("slack_webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/]+"),
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
    ("json_key", r"(?P<k7>\"(?:key|token)\"\s*:\s*\")" + _NOT_KNOWN_SHAPE + r"[A-Za-z0-9_~+/=-]{16,}"),
    ("provided_key", r"(?P<k8>\bkey provided:\s*)" + _NOT_KNOWN_SHAPE + r"[A-Za-z0-9_~+/=-]{16,}"),
)

# Each shape's kept prefix group, if it has one: the mask reads the matched shape's (`lastgroup`).
_KEPT_GROUP = {name: next((group for group in re.compile(body).groupindex if group.startswith("k")), None)
               for name, body in _SHAPES}
_VENDOR_SHAPES = tuple(f"vendor_key{i}" for i in range(len(_VENDOR_KEYS)))


def _detector() -> tuple[re2.Set, list[tuple[str, ...]]]:
    """Every shape in one RE2 set, loosened to a superset (lookarounds and long bounded repeats,
    which RE2 lacks, dropped; the vendors' keys as their prefixes and 8 more characters), and
    the shapes each of its entries stands for."""
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False
    detector = re2.Set.SearchSet(options)
    detector.Add(rf"(?-i:\b(?:{_VENDOR_PREFIXES}))[A-Za-z0-9_.=-]{{8}}")
    entries = [_VENDOR_SHAPES]
    for name, body in _SHAPES:
        if name not in _VENDOR_SHAPES:
            detector.Add(body.replace("(?=@)", "@").replace("{0,8192}?", "*?").replace(f"(?!{_SCHEME_WORDS})", "")
                         .replace(_NOT_KNOWN_SHAPE, ""))
            entries.append((name,))
    detector.Compile()
    return detector, entries


_DETECTOR, _ENTRY_SHAPES = _detector()


@functools.lru_cache(maxsize=128)
def _pattern(shapes: frozenset[str]) -> re.Pattern[str]:
    """One alternation of just the shapes the detector saw, in table order (the first that
    matches at a position wins, as in the whole table: a shape the detector did not see matches
    nowhere in the text). Python's engine tries every alternative at every position, so a text
    with one bearer token need not pay for forty shapes."""
    return re.compile("|".join(f"(?P<{name}>{body})" for name, body in _SHAPES if name in shapes), re.IGNORECASE)


def _mask(match: re.Match[str]) -> str:
    kept = _KEPT_GROUP[match.lastgroup or ""]
    return (match.group(kept) if kept else "") + REDACTED


def redact(text: str) -> str:
    """Return text with every known secret shape replaced by [REDACTED]."""
    found = _DETECTOR.Match(text) if text else None
    if not found:
        return text
    return _pattern(frozenset(chain.from_iterable(map(_ENTRY_SHAPES.__getitem__, found)))).sub(_mask, text)


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
