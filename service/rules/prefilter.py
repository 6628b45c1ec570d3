"""The literals a regex cannot match without (its atoms), so most regexes never run on a message.

This is RE2's FilteredRE2 idea, whose atoms the Python binding does not expose: find, for
each regex, sets of lower-cased literals such that every match contains at least one
literal of each set. `\bquota[-_ ]?(?:error|fail)` needs "quota" and one of "error" or
"fail". The literals join the field's literal set (Hyperscan); a regex runs only on a
message that holds an atom of each of its sets. A regex with no usable atoms (or syntax
Python's parser reads differently from RE2) stays in the RE2 set that runs on every message.

Only ever looser than the regex: lower-casing both sides and dropping anything that is
not a plain literal can add candidates, never lose a match.
"""

from __future__ import annotations

import re
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

MIN_ATOM = 3  # shorter atoms ("a", "to") would make nearly every message a candidate
# RE2 syntax that PCRE-style parsers (Python's, Hyperscan's) read as something else or refuse
# (POSIX classes, Unicode classes, \C, ...)
RE2_ONLY = ("[:", "\\p", "\\P", "\\Q", "\\C", "\\z", "\\x{", "(?U")

Atoms = frozenset[str]
MAX_SETS = 2  # a second required set cuts most false candidates; more only cost bookkeeping


def atoms(pattern: str) -> tuple[Atoms, ...] | None:
    """The most selective sets of lower-cased literals, one of each of which every match
    contains, most selective first; None when none is known."""
    if any(marker in pattern for marker in RE2_ONLY):
        return None
    parsed = _plain(pattern)
    if parsed is None:
        try:
            parsed = list(sre_parse.parse(pattern))
        except (re.error, RecursionError, OverflowError, ValueError):
            return None
    usable = {found for found in _sequence(parsed) if _strength(found) >= MIN_ATOM}
    return tuple(sorted(usable, key=_selectivity)[:MAX_SETS]) or None


_OTHER = (sre.ANY, None)  # anything that is not a literal: it ends a run of literals
_RUN = "run"  # the plain reader's item for a run of literal characters, taken in one match
_LITERAL_RUN = re.compile(r"[^\\.^$*+?{}\[\]()|]+")
_CLASS_ESCAPES = frozenset("bBAZzdDsSwW")
_CONTROL_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}
_QUANTIFIER = re.compile(r"\?|\*|\+|\{(\d+)(,(\d*))?\}")
_GROUP_OPENERS = ("(?:", "(?P<")


class _Unplain(Exception):
    """Syntax the plain reader leaves to Python's parser."""


def _plain(pattern: str) -> list[tuple[Any, Any]] | None:
    """The common regex syntax (literals, escapes, `.`, classes, groups, `|`, greedy quantifiers)
    read into the items `_sequence` takes, 3-5x faster than Python's parser, whose ~75 µs a
    regex was ~45% of a 10,000-rule load; None for anything else (flags, lookarounds,
    lazy quantifiers, numeric escapes), which Python's parser reads. It may find fewer atoms
    than that parser (a one-character class is never a literal here), never wrong ones."""
    try:
        items, end = _plain_alternation(pattern, 0)
    except _Unplain:
        return None
    return items if end == len(pattern) else None


def _plain_alternation(pattern: str, at: int) -> tuple[list[tuple[Any, Any]], int]:
    branches = []
    while True:
        items, at = _plain_sequence(pattern, at)
        branches.append(items)
        if at < len(pattern) and pattern[at] == "|":
            at += 1
            continue
        if len(branches) == 1:
            return branches[0], at
        return [(sre.BRANCH, (None, branches))], at


def _plain_sequence(pattern: str, at: int) -> tuple[list[tuple[Any, Any]], int]:
    items: list[tuple[Any, Any]] = []
    while at < len(pattern) and pattern[at] not in "|)":
        item, at = _plain_item(pattern, at)
        quantified = _QUANTIFIER.match(pattern, at)
        if quantified:
            at = quantified.end()
            if at < len(pattern) and pattern[at] in "?+":
                raise _Unplain  # lazy or possessive
            low = {"?": 0, "*": 0, "+": 1}.get(quantified.group(), int(quantified.group(1) or 0))
            item = (sre.MAX_REPEAT, (low, sre.MAXREPEAT, [item]))
        items.append(item)
    return items, at


def _plain_item(pattern: str, at: int) -> tuple[tuple[Any, Any], int]:
    char = pattern[at]
    if char == "\\":
        escaped = pattern[at + 1:at + 2]
        if escaped in _CLASS_ESCAPES:
            return _OTHER, at + 2
        if escaped in _CONTROL_ESCAPES:
            return (sre.LITERAL, ord(_CONTROL_ESCAPES[escaped])), at + 2
        if escaped and not escaped.isalnum() and escaped.isascii():
            return (sre.LITERAL, ord(escaped)), at + 2
        raise _Unplain
    if char == "(":
        plain_group = "(" if pattern[at + 1:at + 2] != "?" else ""
        opener = next((o for o in _GROUP_OPENERS if pattern.startswith(o, at)), plain_group)
        if not opener:
            raise _Unplain  # flags, lookarounds, other group kinds
        at += len(opener)
        if opener == "(?P<":
            close = pattern.find(">", at)
            if close < 0:
                raise _Unplain
            at = close + 1
        items, at = _plain_alternation(pattern, at)
        if pattern[at:at + 1] != ")":
            raise _Unplain
        return (sre.SUBPATTERN, (None, 0, 0, items)), at + 1
    if char == "[":
        return _OTHER, _class_end(pattern, at)
    if char in ".^$":
        return _OTHER, at + 1
    if char in "*+?{}]":
        raise _Unplain  # a quantifier with nothing before it, or a brace that is not one
    end = _LITERAL_RUN.match(pattern, at).end()  # type: ignore[union-attr]  # char is one of them
    if end - at > 1 and _QUANTIFIER.match(pattern, end):
        end -= 1  # the quantifier takes the last character alone
    return (_RUN, pattern[at:end]), end


def _class_end(pattern: str, at: int) -> int:
    """Where the character class opening at `at` ends (after its `]`)."""
    at += 1
    if pattern[at:at + 1] == "^":
        at += 1
    if pattern[at:at + 1] == "]":
        at += 1
    while at < len(pattern):
        if pattern[at] == "\\":
            at += 2
        elif pattern[at] == "[":
            raise _Unplain  # nested or POSIX classes
        elif pattern[at] == "]":
            return at + 1
        else:
            at += 1
    raise _Unplain


def _selectivity(found: Atoms) -> tuple[int, int, list[str]]:
    """Strongest first; among equals, fewer alternatives (then alphabetical, to be deterministic)."""
    return -_strength(found), len(found), sorted(found)


def _strength(found: Atoms) -> int:
    """A set filters as well as its weakest (shortest) member."""
    return min(len(atom) for atom in found)


def _sequence(items: list[tuple[Any, Any]]) -> list[Atoms]:
    """Every required set of a sequence: each of its parts must match."""
    required: list[Atoms] = []
    run: list[str] = []
    for op, value in items:
        if op is sre.LITERAL or op is _RUN:
            run.append(chr(value) if op is sre.LITERAL else value)
            continue
        if run:
            required.append(frozenset({"".join(run).lower()}))
        run = []
        if op is sre.SUBPATTERN:
            required.extend(_sequence(list(value[-1])))
        elif op is sre.BRANCH:
            either = _branches(value[1])
            if either:
                required.append(either)
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and value[0] >= 1:
            required.extend(_sequence(list(value[2])))
    if run:
        required.append(frozenset({"".join(run).lower()}))
    return required


def _branches(branches: list[Any]) -> Atoms | None:
    """Any branch may match, so every branch must bring atoms: its strongest set, and any of them will do."""
    strongest = [max(_sequence(list(branch)), key=_strength, default=None) for branch in branches]
    if not strongest or any(found is None for found in strongest):
        return None
    return frozenset().union(*strongest)  # type: ignore[arg-type]
