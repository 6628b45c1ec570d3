"""service/re2spans.py reads the binding's spans directly: hold its answers equal to the public API's."""

from __future__ import annotations

import re2

from service import re2spans

PATTERNS = [r"(?i)try again in (\d+)(ms|s)", r"(a)|(b)", r"x*", r"\bHTTP(?:/\d)?\s+([45]\d\d)\b", r"nothing here"]
TEXTS = [b"", b"Please try again in 20ms, or TRY AGAIN IN 3s.", b"ab ba", b"xx yx", b"HTTP/1 429 Too Many",
         "caf\u00e9 HTTP 503 \u2014 try again in 2s".encode()]


def test_search_answers_the_spans_search_does() -> None:
    for pattern in PATTERNS:
        compiled = re2.compile(pattern)
        for text in TEXTS:
            for pos, endpos in ((0, None), (3, None), (0, 5), (4, 2)):
                public = compiled.search(text, pos, endpos if endpos is not None else len(text))
                spans = re2spans.search(compiled, text, pos, endpos)
                if public is None:
                    assert spans is None, (pattern, text, pos, endpos)
                else:
                    assert spans == [public.span(g) for g in range(compiled.groups + 1)], (pattern, text, pos)


def test_finditer_finds_what_finditer_does() -> None:
    for pattern in PATTERNS[:2] + PATTERNS[3:]:  # x* aside: the wrapper answers an empty match twice
        compiled = re2.compile(pattern)
        for text in TEXTS:
            public = [m.span() for m in compiled.finditer(text)]
            assert [spans[0] for spans in re2spans.finditer(compiled, text)] == public, (pattern, text)


def test_an_empty_match_steps_on() -> None:
    assert [s[0] for s in re2spans.finditer(re2.compile(r"x*"), b"axb")] == [(0, 0), (1, 2), (2, 2), (3, 3)]


def test_group_takes_the_first_group_that_took_part() -> None:
    compiled = re2.compile(r"(a)|(b)")
    spans = re2spans.search(compiled, b"zb")
    assert spans is not None and re2spans.group(spans, b"zb", 1, 2) == b"b"
    assert re2spans.group(spans, b"zb", 1) == b""
