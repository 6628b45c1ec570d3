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
# RE2 syntax that Python's parser reads as something else (POSIX classes, Unicode classes, \C, ...)
_RE2_ONLY = ("[:", "\\p", "\\P", "\\Q", "\\C", "\\z", "\\x{", "(?U")

Atoms = frozenset[str]
MAX_SETS = 2  # a second required set cuts most false candidates; more only cost bookkeeping


def atoms(pattern: str) -> tuple[Atoms, ...] | None:
    """The most selective sets of lower-cased literals, one of each of which every match
    contains, most selective first; None when none is known."""
    if any(marker in pattern for marker in _RE2_ONLY):
        return None
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    usable = {found for found in _sequence(list(parsed)) if _strength(found) >= MIN_ATOM}
    return tuple(sorted(usable, key=_selectivity)[:MAX_SETS]) or None


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
        if op is sre.LITERAL:
            run.append(chr(value))
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
