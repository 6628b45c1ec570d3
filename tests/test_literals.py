"""The literal set against the obvious definition: `literal in text`, for any bytes."""

from __future__ import annotations

import threading

import pytest
import re2
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from service.rules.literals import LiteralSet, RegexScanner
from service.rules.matcher import Entry, SetMatcher, re2_options
from service.schema.match import MatchBlock
from tests.servers import wait_for

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


# ---------------------------------------------------------------- RegexScanner (Hyperscan, prefilter mode)
_FRAGMENTS = ["repo", "not found", "rate", "limit(?:ed)?", "quota", r"\d+", "(?:was )?", "[a-z]+", r"\s", "(?-i:API)",
              r"\b", "^", "$", "error|fail", "x?", ".", "[^ ]+", r"\w{2,4}", "(?s:.)", r"\S+", r"\B", "(?:a|p)i"]
_TEXT = "Repo repository not found rate LIMITED quota 429 was API api error\nfail x\n \t\x0b"


@settings(max_examples=300, deadline=None)
@given(
    patterns=st.lists(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=4).map("".join),
                      min_size=1, max_size=8, unique=True),
    words=st.lists(st.sampled_from(_TEXT.replace("\n", " \n ").split(" ")), max_size=12),
)
def test_the_scanner_and_re2_confirmations_name_exactly_the_regexes_that_match(patterns: list[str],
                                                                             words: list[str]) -> None:
    """An exact pattern's report is RE2's answer; an unsure one (prefilter mode) may be loose, never
    missing, and RE2 confirms it."""
    text = " ".join(words).encode()
    assume(RegexScanner.reads(text))
    compiled = [re2.compile(pattern, re2_options()) for pattern in patterns]
    scanner = RegexScanner(tuple(patterns))
    named = {i for i in scanner.scan(text) if i not in scanner.unsure or compiled[i].search(text)}
    assert named == {i for i, regex in enumerate(compiled) if regex.search(text)}


def test_the_scanner_finds_a_match_after_a_newline_where_utf8_mode_did_not() -> None:
    """Hyperscan's UTF-8 mode with CASELESS missed this match; the scanner does not use it."""
    scanner = RegexScanner((r"\b(?:repository|project|repo) (?:was )?not found\b",))
    assert scanner.scan(b"x repository is unreachable.\nrepo not found") == [0]


def _matcher(patterns: list[str]) -> SetMatcher:
    blocks = [MatchBlock.model_validate({"message": {"regex": [pattern]}}) for pattern in patterns]
    return SetMatcher([[Entry(str(i), [block]) for i, block in enumerate(blocks)]]).finish()


def _wait_for_scanner(matcher: SetMatcher) -> None:
    matcher.start_scanners()
    wait_for(lambda: matcher.scanner_state() != "compiling", timeout=60)
    assert matcher.scanner_state() == "ready"


def test_a_field_reads_ascii_through_its_scanner_and_the_rest_through_the_set() -> None:
    """Once installed, ASCII texts go through the scanner (non-ASCII regexes stay in a small RE2
    set); a text with any other byte, or a vertical tab, goes through the whole set. Both answer
    the same."""
    matcher = _matcher([r"\brate limit(?:ed)?\b", r"\bquota (?:exceeded|reached)\b", "配额|\\bcuota\\b"])
    texts = {"Rate limited, quota reached": {0, 1}, "cuota agotada": {2}, "配额已用完, rate limit": {0, 2},
             "fine": set(), "rate limit\vquota exceeded": {0, 1}}
    before = {text: set(matcher.satisfied({"message": [text]}, None)) for text in texts}
    _wait_for_scanner(matcher)
    index = matcher._fields["message"]
    assert (len(index.scan_members), sum(len(members) for _, members in index.rest_sets)) == (2, 1)
    index.memo.clear()
    after = {text: set(matcher.satisfied({"message": [text]}, None)) for text in texts}
    assert before == after == texts


def test_a_gap_regex_stays_with_re2_where_hyperscan_misses_its_match() -> None:
    """Hyperscan (the library bundled with hyperscan 0.9.1) missed this match of a shipped family's
    gap regex on 2026-12-02, even in prefilter mode, where RE2 finds it. Gap regexes run in RE2's
    FilteredRE2, never in the scanner, so a reader of the whole table finds it either way."""
    gap = r"(?s)\b(?:credentials?|token|api key)\b.{0,160}\bre-?authenticate\b"
    text = "Your Zendesk token may be expired or invalid. Re-authenticate to get a new token."
    matcher = _matcher([gap, r"\bzendesk\b"])
    _wait_for_scanner(matcher)
    index = matcher._fields["message"]
    assert [index.regexes[i][0] for i in index.scan_members] == [r"\bzendesk\b"]
    assert sorted(matcher.satisfied({"message": [text]}, None)) == [0, 1]


def test_a_regex_hyperscan_refuses_runs_on_every_text(caplog: pytest.LogCaptureFixture) -> None:
    matcher = _matcher([r"\brate limit\b", r"x\b{3}", r"(?:^|\s)quota^"])  # RE2 reads these; Hyperscan refuses
    _wait_for_scanner(matcher)
    index = matcher._fields["message"]
    assert index.scanner is not None and sorted(index.scan_members[i] for i in index.scanner.always) == [1, 2]
    assert "Hyperscan refuses some regexes" in caplog.text
    assert len(matcher.satisfied({"message": ["rate limit; x"]}, None)) == 2
    assert len(matcher.satisfied({"message": ["fine"]}, None)) == 0


def test_a_scanner_that_cannot_be_built_is_logged_and_the_set_keeps_serving(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def refuse(self: RegexScanner, patterns: tuple[str, ...]) -> None:
        raise MemoryError("no room for the database")

    monkeypatch.setattr(RegexScanner, "__init__", refuse)
    matcher = _matcher([r"\bdisk quota\b", r"\bout of space\b"])
    assert matcher.scanner_state() == "compiling"
    matcher.start_scanners()
    wait_for(lambda: matcher.scanner_state() != "compiling", timeout=30)
    assert matcher.scanner_state() == "failed" and "regex scanner not built" in caplog.text
    assert len(matcher.satisfied({"message": ["disk quota hit, out of space"]}, None)) == 2
