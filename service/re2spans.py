"""RE2 searches that answer spans, for the request path.

google-re2's `search()` wraps every call in a generator and a `_Match` object (about 1.4 µs
a matching call on this machine, 0.5 µs a miss); a report runs several such searches. The
binding's compiled object answers `Match(anchor, bytes, pos, endpos)` with the spans
directly, which is what the request path needs. Only bytes go in: the str path of the
wrapper maps offsets, which these callers never need. tests/test_re2spans.py holds these
answers equal to the public API's, so a change in the binding fails there first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import re2

Spans = list[tuple[int, int]]  # the whole match, then each group; (-1, -1) for a group that took no part
_UNANCHORED = re2._Anchor.UNANCHORED
_NO_MATCH = (-1, -1)


def search(compiled: Any, data: bytes, pos: int = 0, endpos: int | None = None) -> Spans | None:
    """The spans of the leftmost match in data[pos:endpos], or None."""
    pos = min(pos, len(data))
    end = len(data) if endpos is None else min(endpos, len(data))
    if pos > end:
        return None
    spans: Spans = compiled._regexp.Match(_UNANCHORED, data, pos, end)
    return None if spans[0] == _NO_MATCH else spans


def finditer(compiled: Any, data: bytes, pos: int = 0, endpos: int | None = None) -> Iterator[Spans]:
    """Every non-overlapping match's spans, left to right (an empty match steps one byte on)."""
    end = len(data) if endpos is None else min(endpos, len(data))
    while pos <= end:
        spans = search(compiled, data, pos, end)
        if spans is None:
            return
        yield spans
        pos = spans[0][1] + 1 if spans[0][1] == spans[0][0] else spans[0][1]


def group(spans: Spans, data: bytes, *groups: int) -> bytes:
    """The first of `groups` that took part in the match."""
    for index in groups:
        start, end = spans[index]
        if start >= 0:
            return data[start:end]
    return b""


def compile_options(case_sensitive: bool = True, max_mem: int = 8 << 20) -> Any:
    """Options with RE2's own stderr logging off: a bad pattern is reported by the caller."""
    options = re2.Options()
    options.case_sensitive = case_sensitive
    options.log_errors = False
    options.max_mem = max_mem
    return options
