"""Required literals of regexes: never tighter than the regex itself."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.rules.prefilter import _plain, atoms


@pytest.mark.parametrize(("pattern", "expected"), [
    (r"exceeded your (current )?quota", [{"exceeded your "}, {"quota"}]),
    (r"(?:insufficient_quota|billing_hard_limit)", [{"insufficient_quota", "billing_hard_limit"}]),
    (r"\bfoo[-_ ]?(?:error|fail\w*)\s+\d{3}", [{"error", "fail"}, {"foo"}]),  # strongest first
    (r"\bquota[-_ ]?(?:error|fail\w*)\s+\d{3}", [{"quota"}, {"error", "fail"}]),  # both required
    (r"\babcd[-_ ]?(?:error|fail\w*)", [{"abcd"}, {"error", "fail"}]),  # as strong: one alternative first
    (r"API key required.*?pass (?:it )?(?:via|as) (?P<k>\w+)", [{"api key required"}, {"pass "}]),
    (r"alpha beta (gamma|delta) epsilon", [{"alpha beta "}, {" epsilon"}]),  # the two strongest
    (r"(a|bc)", None),  # too short to filter anything
    (r"x(?:abcd)?yz", None),  # an optional group is not required
    (r".*", None),
    (r"[[:alpha:]]+ xyz", None),  # RE2 syntax Python reads differently: never guess
    (r"\p{Greek}+ alpha", None),
    (r"colou?r abc{2,3}", [{"colo"}, {"r ab"}]),  # a quantifier takes the character before it alone
    (r"a\.b\(cd(?P<n>\w+)", [{"a.b(cd"}]),
    (r"(?i)quota exceeded", [{"quota exceeded"}]),  # read by Python's parser: flags
])
def test_atoms(pattern: str, expected: list[set[str]] | None) -> None:
    assert atoms(pattern) == (tuple(frozenset(found) for found in expected) if expected is not None else None)


def test_the_plain_reader_leaves_other_syntax_to_pythons_parser() -> None:
    assert _plain(r"\bquota[-_ ]?(?:error|fail\w*)\s+\d{3}") is not None
    for pattern in (r"(?i)abc", r"a*?bcd", r"(?=x)abc", r"\x41bcd", r"abc{,3}", r"(abc", r"a[[:alpha:]]"):
        assert _plain(pattern) is None, pattern


@settings(max_examples=300, deadline=None)
@given(pattern=st.from_regex(r"(?:[a-c]{1,4}|\((?:[a-c]{3,4}\|[a-c]{3,4})\)|[a-c]\?|\.)*", fullmatch=True),
       text=st.text(alphabet="abcABC ", max_size=40))
def test_a_match_always_contains_an_atom(pattern: str, text: str) -> None:
    required = atoms(pattern)
    if required is None:
        return
    try:
        match = re.search(pattern, text, re.IGNORECASE)
    except re.error:
        return
    if match:
        assert all(any(atom in text.lower() for atom in found) for found in required), (pattern, text, required)
