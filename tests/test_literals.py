"""The literal set against the obvious definition: `literal in text`, for any bytes."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from service.rules.literals import LiteralSet
from service.rules.matcher import Entry, SetMatcher
from service.schema.match import MatchBlock

ALPHABET = b"ab \x00\xc3\xa9"  # few symbols, so literals overlap and repeat; NUL and UTF-8 bytes too


@settings(max_examples=300, deadline=None)
@given(
    literals=st.lists(st.binary(min_size=1, max_size=4).map(lambda b: bytes(ALPHABET[x % len(ALPHABET)] for x in b)),
                      min_size=1, max_size=12, unique=True),
    text=st.binary(max_size=40).map(lambda b: bytes(ALPHABET[x % len(ALPHABET)] for x in b)),
)
def test_indexes_are_exactly_the_literals_the_text_contains(literals: list[bytes], text: bytes) -> None:
    found = LiteralSet(literals).indexes(text)
    assert sorted(found) == [i for i, literal in enumerate(literals) if literal in text]  # each once


def test_threads_scanning_one_set_each_get_their_own_scratch_space() -> None:
    """Hyperscan refuses a scratch space already in use; the match callback lets threads interleave."""
    literals = LiteralSet([b"aa", b"bb"])
    failures: list[BaseException] = []

    def scan() -> None:
        try:
            for _ in range(300):
                assert sorted(literals.indexes(b"aa bb " * 50)) == [0, 1]
        except BaseException as exc:  # noqa: BLE001 - reported below, in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=scan) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_a_matcher_scanned_before_its_literal_sets_are_installed_waits_for_them() -> None:
    """The literal sets compile on a thread and the loader installs them last (`finish`); a scan
    that comes first must not read a field as having no literals."""
    blocks = [MatchBlock.model_validate({"message": {"contains": ["rate limit"]}}),
              MatchBlock.model_validate({"message": {"regex": [r"quota\s+exceeded"]}})]
    matcher = SetMatcher([[Entry("limit", [blocks[0]]), Entry("quota", [blocks[1]])]])
    found = matcher.satisfied({"message": ["Rate limit reached; quota  exceeded"]}, None)
    hit = matcher.first(0, found)
    assert (hit.entry if hit is not None else None, len(found)) == (0, 2)  # "limit", the earlier entry
    assert matcher.finish() is matcher  # already finished by the scan: a second finish is a no-op
