"""Hyperscan: which of many literals, or of many regexes, a text may hold, in one pass.

Literals: Hyperscan's pure-literal compiler (FDR: SIMD hashing of short fragments, then
confirmation). Measured here on fresh 1 KB texts: 2 µs at 150 literals, 5 µs at 10,400,
compiled in 0.56 s. An Aho-Corasick automaton (ahocorasick-rs) took 3 µs and 22 µs: past a
few thousand literals its states outgrow the CPU caches. A call costs about 1.5 µs however
short the text.

Regexes: see `RegexScanner`.
"""

from __future__ import annotations

import threading
from typing import Any

import hyperscan

from service.rules.prefilter import RE2_ONLY


def _collect(expression: int, start: int, end: int, flags: int, found: Any) -> None:
    """The match callback; `found` is the list handed to the scan as its context (typed `object` there)."""
    found.append(expression)


class _Scanner:
    """A compiled database and its scratch spaces. A scan holds its scratch space and the match
    callback runs Python, so another thread could start a scan meanwhile (rule tests run in
    the loader's thread): one scratch per thread."""

    def __init__(self, database: Any) -> None:
        self._database = database
        self._scratch = threading.local()

    def scan(self, data: bytes) -> list[int]:
        scratch = getattr(self._scratch, "space", None)
        if scratch is None:
            scratch = self._scratch.space = hyperscan.Scratch(self._database)
        found: list[int] = []
        self._database.scan(data, match_event_handler=_collect, context=found, scratch=scratch)
        return found


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
        self._scanner: _Scanner | None = None
        if searchable:
            database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            database.compile(expressions=list(searchable.values()), ids=list(searchable),
                             elements=len(searchable), flags=hyperscan.HS_FLAG_SINGLEMATCH, literal=True)
            self._scanner = _Scanner(database)

    def indexes(self, data: bytes) -> list[int]:
        found = self._scanner.scan(data) if self._scanner is not None else []
        if self._confirm:
            found = [i for i in (*found, *self._unsearchable) if i not in self._confirm or self._confirm[i] in data]
        return found


class RegexScanner(_Scanner):
    """Which of many regexes match an ASCII text, in one pass of Hyperscan.

    Why: an RE2 set builds its DFA lazily, state by state, as texts need them. Over the corpus's
    6,000 different messages the shipped tables' set of 1,700 regexes never warmed up: ~390 µs
    a message (a message seen just before: 2 µs), against ~40 µs for this scan and the RE2
    confirmations of its candidates. Compiling takes ~6 s (without the GIL), so the RE2 set
    serves until it is ready.

    ASCII only, both sides: the regexes (case-folded by Hyperscan exactly as RE2 folds ASCII)
    and the texts (a byte is a character, so `.`, classes and counted repeats mean what they
    mean to RE2), and no vertical tab in the text (`\\s` takes one in PCRE, not in RE2): see
    `reads`. Where Hyperscan's PCRE reads a pattern otherwise (`$` also before a final
    newline) or compiles it only approximately, the pattern is compiled in prefilter mode, which
    never misses a match but may report one that is not: those are `unsure`, and RE2 confirms
    them. Hyperscan's UTF-8 mode is not used: with it and
    CASELESS, `\\brepo not found\\b` missed "x repository is unreachable.\\nrepo not found"."""

    EXACT = hyperscan.HS_FLAG_CASELESS | hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_ALLOWEMPTY
    LOOSE = EXACT | hyperscan.HS_FLAG_PREFILTER

    def __init__(self, patterns: tuple[str, ...]) -> None:
        """A pattern Hyperscan refuses even as a prefilter (`x\\b{3}`, an anchor inside `a^b`) is
        named on every scan (`always`). Finding it compiles each pattern alone (~5 ms each), only
        when the whole set is refused."""
        # PCRE's `$` also matches before a final newline: such a pattern is a prefilter, RE2 confirms
        flags = {i: self.LOOSE if "$" in pattern else self.EXACT for i, pattern in enumerate(patterns)}
        try:
            database = self._compiled(patterns, flags)
        except hyperscan.error:
            accepted = {i: self._accepted(patterns[i], flag) for i, flag in flags.items()}
            flags = {i: flag for i, flag in accepted.items() if flag}
            database = self._compiled(patterns, flags) if flags else None
        self.always = [i for i in range(len(patterns)) if i not in flags]
        self.unsure = frozenset(i for i, flag in flags.items() if flag == self.LOOSE) | frozenset(self.always)
        super().__init__(database)

    def scan(self, data: bytes) -> list[int]:
        return [*super().scan(data), *self.always] if self._database is not None else self.always

    @staticmethod
    def _compiled(patterns: tuple[str, ...], flags: dict[int, int]) -> Any:
        database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        database.compile(expressions=[patterns[i].encode() for i in flags], ids=list(flags),
                         elements=len(flags), flags=list(flags.values()))
        return database

    @classmethod
    def _accepted(cls, pattern: str, flag: int) -> int:
        """The flags Hyperscan compiles this pattern with alone: as asked, else loose, else 0 (refused)."""
        for tried in dict.fromkeys((flag, cls.LOOSE)):
            try:
                cls._compiled((pattern,), {0: tried})
            except hyperscan.error:
                continue
            return tried
        return 0

    @staticmethod
    def reads(data: bytes) -> bool:
        """Whether a text means to Hyperscan what it means to RE2."""
        return data.isascii() and b"\v" not in data

    @staticmethod
    def takes(pattern: str) -> bool:
        """ASCII, and none of the RE2 syntax Hyperscan's PCRE reads otherwise or refuses."""
        return pattern.isascii() and not any(marker in pattern for marker in RE2_ONLY)

