"""The shape of an error: its message with the parts that vary masked, and a key for the group. Pure.

Two reports are one group when their masked message, exception types, codes, status, tool
and source agree. What varies between repeats of one error is masked, in this order (an
earlier mask keeps a later one from cutting into what it already replaced):

    emails            alice@example.com                  -> <email>
    URL paths         https://api.x.io/v1/users/42?a=1    -> https://api.x.io/<path>
    quoted values     'web_serch', "id-42", `cfg.yaml`     -> '<q>'  "<q>"  `<q>`
    UUIDs, hashes     3f2b...-..., a94a8fe5ccb19ba6        -> <id>, <hash>
    ids               req_8KXz21, run-2026-11-30T10:00    -> <id>
    numbers           429, 1.5, 0x1f                     -> <n>
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import orjson

from service.normalize import NormalizedError

MESSAGE_CAP = 2000  # the head of a message says what failed; the key ignores the rest
PLACEHOLDER = re.compile(r"<(?:email|path|q|id|hash|n)>")

_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"), "<email>"),
    (re.compile(r"\b([a-z][a-z0-9+.-]*://[^/\s?#'\"]+)[/?#][^\s'\"<>)]*?(?=[.,:;]?(?:[\s'\"<>)]|$))", re.IGNORECASE),
     r"\1/<path>"),
    (re.compile(r"'[^'\n]{1,200}'"), "'<q>'"),
    (re.compile(r'"[^"\n]{1,200}"'), '"<q>"'),
    (re.compile(r"`[^`\n]{1,200}`"), "`<q>`"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE), "<id>"),
    (re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b", re.IGNORECASE), "<hash>"),
    (re.compile(r"\b(?=[\w.:-]*[0-9])(?=[\w.:-]*[A-Za-z])[A-Za-z0-9]+(?:[_.:-][A-Za-z0-9]+)+\b"), "<id>"),
    (re.compile(r"\b(?=[A-Za-z]*[0-9])(?=[0-9]*[A-Za-z])[A-Za-z0-9]{6,}\b"), "<id>"),
    (re.compile(r"(?<![\w<])(?:0x[0-9a-f]+|\d+(?:[.,]\d+)*)(?![\w>])", re.IGNORECASE), "<n>"),
)


def mask(text: str) -> str:
    """The text with emails, URL paths, quoted values, ids, hashes and numbers replaced by placeholders."""
    text = text[:MESSAGE_CAP]
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return text


@dataclass(frozen=True, slots=True)
class Shape:
    """What makes two reports one group."""

    message: str  # masked
    types: tuple[str, ...]
    codes: tuple[str, ...]
    status: int | None
    tool: str | None
    source: str | None

    @property
    def key(self) -> str:
        """A short stable fingerprint: the same in every process and replica."""
        blob = orjson.dumps([self.message, self.types, self.codes, self.status, self.tool, self.source])
        return hashlib.sha256(blob).hexdigest()[:16]


def shape_of(error: NormalizedError) -> Shape:
    return Shape(mask(error.message), tuple(mask(t) for t in error.types), tuple(mask(c) for c in error.codes),
                 error.status, error.tool, error.source)
