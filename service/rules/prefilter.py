"""The literals a regex cannot match without (its atoms), so most regexes never run on a message.

This is RE2's FilteredRE2 idea, whose atoms the Python binding does not expose: find, for
each regex, a set of lower-cased literals of which every match contains at least one.
The literals join the field's Aho-Corasick automaton; a regex runs only on a message that
holds one of its atoms. A regex with no usable atoms (or syntax Python's parser reads
differently from RE2) stays in the RE2 set that runs on every message.

Only ever looser than the regex: lower-casing both sides and dropping anything that is
not a plain literal can add candidates, never lose a match.
"""

from __future__ import annotations

import re
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

MIN_ATOM = 3  # shorter atoms ("a", "to") would make nearly every message a candidate
# RE2 syntax that Python's parser reads as something else (POSIX classes, Unicode classes, \C, ...)
_RE2_ONLY = ("[:", "\\p", "\\P", "\\Q", "\\C", "\\z", "\\x{", "(?U")

Atoms = frozenset[str]


def atoms(pattern: str) -> Atoms | None:
    """Lower-cased literals one of which every match contains, or None when none is known."""
    if any(marker in pattern for marker in _RE2_ONLY):
        return None
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    found = _sequence(list(parsed))
    if not found or any(len(atom) < MIN_ATOM for atom in found):
        return None
    return found


def _strength(found: Atoms) -> int:
    """A set filters as well as its weakest (shortest) member."""
    return min(len(atom) for atom in found)


def _sequence(items: list[tuple[Any, Any]]) -> Atoms | None:
    best: Atoms | None = None
    run: list[str] = []

    def consider(candidate: Atoms | None) -> None:
        nonlocal best
        if candidate and (best is None or _strength(candidate) > _strength(best)):
            best = candidate

    for op, value in items:
        if op is sre.LITERAL:
            run.append(chr(value))
            continue
        consider(frozenset({"".join(run).lower()}) if run else None)
        run = []
        if op is sre.SUBPATTERN:
            consider(_sequence(list(value[-1])))
        elif op is sre.BRANCH:
            consider(_branches(value[1]))
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and value[0] >= 1:
            consider(_sequence(list(value[2])))
    consider(frozenset({"".join(run).lower()}) if run else None)
    return best


def _branches(branches: list[Any]) -> Atoms | None:
    """Any branch may match, so every branch must bring atoms, and any of them will do."""
    sets = [_sequence(list(branch)) for branch in branches]
    if not sets or any(found is None for found in sets):
        return None
    return frozenset().union(*sets)  # type: ignore[arg-type]
