"""Which of many literals a text holds, in one pass whose cost barely grows with their number.

Hyperscan's pure-literal compiler (FDR: SIMD hashing of short fragments, then confirmation).
Measured here on fresh 1 KB texts: 2 µs at 150 literals, 5 µs at 10,400, compiled in 0.56 s.
An Aho-Corasick automaton (ahocorasick-rs) took 3 µs and 22 µs: past a few thousand
literals its states outgrow the CPU caches. A call costs about 1.5 µs however short the text.
"""

from __future__ import annotations

import threading
from typing import Any

import hyperscan


def _collect(literal: int, start: int, end: int, flags: int, found: Any) -> None:
    """The match callback; `found` is the list handed to the scan as its context (typed `object` there)."""
    found.append(literal)


class LiteralSet:
    """Byte literals, matched case-sensitively; `indexes` lists each one found, once."""

    def __init__(self, literals: list[bytes]) -> None:
        # The binding hands literals over as C strings: one with a NUL byte is searched by its
        # longest NUL-free piece, then confirmed (an all-NUL one only by the confirmation).
        # Built on a thread beside a paced reload, so the common case (no NUL anywhere) skips the
        # per-literal Python work: at 13,000 literals it held the GIL ~10 ms.
        self._confirm = {i: literal for i, literal in enumerate(literals) if b"\0" in literal}
        searchable = dict(enumerate(literals))
        searchable.update({i: max(literal.split(b"\0"), key=len) for i, literal in self._confirm.items()})
        self._unsearchable = [i for i, piece in searchable.items() if not piece]
        for i in self._unsearchable:
            del searchable[i]
        self._database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK) if searchable else None
        if self._database is not None:
            self._database.compile(expressions=list(searchable.values()), ids=list(searchable),
                                   elements=len(searchable), flags=hyperscan.HS_FLAG_SINGLEMATCH, literal=True)
        # A scan holds its scratch space; the match callback runs Python, so another thread could
        # start a scan meanwhile (rule tests run in the loader's thread). One scratch per thread.
        self._scratch = threading.local()

    def indexes(self, data: bytes) -> list[int]:
        found: list[int] = []
        if self._database is not None:
            scratch = getattr(self._scratch, "space", None)
            if scratch is None:
                scratch = self._scratch.space = hyperscan.Scratch(self._database)
            self._database.scan(data, match_event_handler=_collect, context=found, scratch=scratch)
        if self._confirm:
            found = [i for i in (*found, *self._unsearchable) if i not in self._confirm or self._confirm[i] in data]
        return found
