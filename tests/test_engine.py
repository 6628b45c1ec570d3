"""The rule engine on small, purpose-built tables: order, conditions, captures, explain."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from service.errors import RulesInvalid
from service.models import ErrorReport
from service.normalize import normalize
from service.rules.engine import DECIDED_SIZE, Ruleset, Verdict, classify
from service.rules.loader import load_ruleset
from service.rules.matcher import FILTER_GROUP, MEMO_SIZE, PREFILTER_FROM

TAXONOMY = """
classes:
  - id: demo
    reasons: {a: {}, b: {}, c: {}}
  - id: unknown
    reasons: {unclassified: {}}
"""
PROVIDERS = """
providers:
  - {id: acme, kind: ai, aliases: [AcmeAI], hosts: [api.acme.test], models: ['\\bacme-\\d+'], text: ['\\bacme\\b']}
  - {id: relay, kind: ai, gateway: true, hosts: [relay.test], text: ['\\brelay\\b']}
  - {id: forge, kind: git, codes: [FORGE_DENIED], text: ['\\bforge\\b']}
"""


def build(tmp_path: Path, **class_files: str) -> Ruleset:
    (tmp_path / "classes").mkdir()
    (tmp_path / "providers").mkdir()
    (tmp_path / "classes" / "00-taxonomy.yaml").write_text(TAXONOMY)
    (tmp_path / "providers" / "00.yaml").write_text(PROVIDERS)
    for name, text in class_files.items():
        (tmp_path / "classes" / f"{name}.yaml").write_text(textwrap.dedent(text))
    return load_ruleset(tmp_path)


def verdict(ruleset: Ruleset, **report: object) -> Verdict:
    return classify(normalize(ErrorReport.model_validate(report)), ruleset)


def test_minimal_rule_from_design(tmp_path: Path) -> None:
    ruleset = build(tmp_path, **{"50-ours": """
        rules:
          - id: example-rule
            class: demo
            reason: a
            match:
              message: {contains: ["plan limit reached"]}
        """})
    assert verdict(ruleset, message="Generation failed: PLAN LIMIT REACHED").rule.id == "example-rule"
    assert verdict(ruleset, message="all good").class_ == "unknown"


def test_priority_then_file_order_then_position(tmp_path: Path) -> None:
    ruleset = build(tmp_path, **{
        "10-first": """
            rules:
              - {id: low-first, class: demo, reason: a, match: {message: boom}}
              - {id: low-second, class: demo, reason: b, match: {message: boom}}
            """,
        "20-later": """
            rules:
              - {id: high-later, class: demo, reason: c, priority: 10, match: {message: [boom, bang]}}
              - {id: low-later, class: demo, reason: c, match: {message: only}}
            """,
    })
    assert verdict(ruleset, message="boom").rule.id == "high-later"
    assert [r.id for r in ruleset.rules] == ["high-later", "low-first", "low-second", "low-later"]


def test_and_within_block_any_of_blocks_and_not(tmp_path: Path) -> None:
    ruleset = build(tmp_path, r1="""
        rules:
          - id: both
            class: demo
            reason: a
            match:
              - {status: [429], message: {regex: ['rate.?limit']}}
              - {code: {equals: [too_many]}}
            not:
              message: {contains: [quota]}
        """)
    assert verdict(ruleset, status=429, message="Rate-limit hit").rule.id == "both"
    assert verdict(ruleset, status=400, message="rate limit").rule is None  # AND: status must hold too
    assert verdict(ruleset, code="TOO_MANY").rule.id == "both"  # any-of blocks, case-insensitive equals
    assert verdict(ruleset, code="too_many_x").rule is None  # equals is the whole value
    assert verdict(ruleset, status=429, message="rate limit: quota").rule is None  # vetoed by not


def test_status_ranges(tmp_path: Path) -> None:
    ruleset = build(tmp_path, r="""
        rules:
          - {id: five, class: demo, reason: a, match: {status: [5xx]}}
          - {id: span, class: demo, reason: b, match: {status: ['400-404']}}
        """)
    assert verdict(ruleset, status=503).rule.id == "five"
    assert verdict(ruleset, status=404).rule.id == "span"
    assert verdict(ruleset, status=405).rule is None


def test_named_groups_become_captures_case_preserved(tmp_path: Path) -> None:
    ruleset = build(tmp_path, r="""
        rules:
          - id: key
            class: demo
            reason: a
            match: {message: {regex: ['pass (?:it|your key) as (?P<key_argument>_?[A-Za-z]+)']}}
        """)
    assert verdict(ruleset, message="API key required: pass your key as _altosKey").captures == {
        "key_argument": "_altosKey"}


def test_provider_order_hint_gateway_structured_host_model_text(tmp_path: Path) -> None:
    ruleset = build(tmp_path)
    assert verdict(ruleset, message="acme failed", provider="Forge").provider.id == "forge"  # hint wins
    assert verdict(ruleset, message="x", provider="acmeai").provider.id == "acme"  # an alias hint
    hinted = verdict(ruleset, message="x", provider="Mystery")
    assert (hinted.provider.id, hinted.provider.kind) == ("mystery", None)
    assert verdict(ruleset, message="acme-7 via relay").provider.id == "relay"  # gateway beats model
    assert verdict(ruleset, code="FORGE_DENIED", message="acme").provider.decided_by == "types/codes"
    assert verdict(ruleset, message="see https://api.acme.test/v1").provider.decided_by == "hosts"
    assert verdict(ruleset, message="model acme-3 failed").provider.decided_by == "models"
    assert verdict(ruleset, message="the acme service").provider.decided_by == "text"
    assert verdict(ruleset, message="nothing here").provider.id is None


def test_provider_kind_condition(tmp_path: Path) -> None:
    ruleset = build(tmp_path, r="""
        rules:
          - {id: ai-limit, class: demo, reason: a, match: {provider_kind: {equals: [ai]}, message: rate limit}}
          - {id: git-limit, class: demo, reason: b, match: {provider_kind: {equals: [git]}, message: rate limit}}
        """)
    assert verdict(ruleset, message="acme: rate limit").rule.id == "ai-limit"
    assert verdict(ruleset, message="forge: rate limit").rule.id == "git-limit"
    assert verdict(ruleset, message="my app: rate limit").rule is None


def test_explain_lists_rules_tried_and_the_winner(tmp_path: Path) -> None:
    ruleset = build(tmp_path, r="""
        rules:
          - {id: needs-429, class: demo, reason: a, priority: 5, match: {status: [429], message: boom}}
          - {id: plain, class: demo, reason: b, match: {message: boom}}
        """)
    result = classify(normalize(ErrorReport(message="boom")), ruleset, explain=True)
    tried = result.explain["rules_tried"]
    assert [t["rule"] for t in tried] == ["needs-429", "plain"]
    assert tried[0]["matched"] is False and tried[0]["missing"] == ["status"]
    assert tried[1]["won"] is True and "message" in tried[1]["conditions"]
    assert result.explain["winner"] == "plain" and "priority" in result.explain["order"]


@pytest.mark.parametrize("count", [1, 2000])
def test_many_rules_still_pick_the_right_one(tmp_path: Path, count: int) -> None:
    lines = ["rules:"]
    for i in range(count):
        lines.append(f"  - {{id: r{i}, class: demo, reason: a, match: {{message: {{regex: ['code-{i}\\b']}}}}}}")
    lines.append("  - {id: last, class: demo, reason: b, match: {message: 'the needle'}}")
    ruleset = build(tmp_path, big="\n".join(lines))
    assert verdict(ruleset, message=f"failure code-{count - 1} seen").rule.id == f"r{count - 1}"
    assert verdict(ruleset, message="where is the needle").rule.id == "last"



def test_regexes_run_only_when_their_required_literals_are_present(tmp_path: Path) -> None:
    lines = ["rules:"]
    for i in range(PREFILTER_FROM):
        lines.append(f"  - {{id: p{i}, class: demo, reason: a, match: {{message: {{regex: ['alpha{i}x? beta']}}}}}}")
    lines.append("  - {id: atom, class: demo, reason: b, match: {message: {regex: ['(?P<who>\\w+) bravo7 charlie']}}}")
    lines.append("  - {id: loose, class: demo, reason: c, match: {message: {regex: ['^z+$']}}}")
    lines.append("  - {id: both, class: demo, reason: a, "
                 "match: {message: {regex: ['delta9[-_ ]?(?:error|failure) now']}}}")
    ruleset = build(tmp_path, big="\n".join(lines))
    index = ruleset.matcher._fields["message"]
    assert len(index.unfiltered) == 1  # past PREFILTER_FROM regexes, only '^z+$' has no literal to wait for
    both = next(i for i, (pattern, _) in enumerate(index.regexes) if pattern.startswith("delta9"))
    assert len(index.also_required[both]) == 1  # 'delta9' triggers it; it also needs 'error' or 'failure'
    assert verdict(ruleset, message="DELTA9-failure now").rule.id == "both"
    assert verdict(ruleset, message="delta9 error now").rule.id == "both"
    assert verdict(ruleset, message="delta9 but no fault now").rule is None
    assert verdict(ruleset, message="error now, then delta9").rule is None  # every atom there, the regex is not
    last = PREFILTER_FROM - 1
    assert verdict(ruleset, message=f"xx ALPHA{last} beta yy").rule.id == f"p{last}"
    assert verdict(ruleset, message=f"alpha{last}-beta").rule is None  # the literal is there, the regex is not
    hit = verdict(ruleset, message="said delta bravo7 charlie")
    assert hit.rule.id == "atom" and hit.captures == {"who": "delta"}
    assert verdict(ruleset, message="zzzz").rule.id == "loose"


def test_regexes_that_span_a_gap_run_apart_from_the_set_with_the_same_answers(tmp_path: Path) -> None:
    """`.{0,N}`, `.*`, `[^x]+`, `\\S+` and `[\\w ]{1,40}` regexes go to RE2's FilteredRE2 (their atoms, then only the
    candidates); in the one RE2 set their DFA states multiplied with every fresh message."""
    ruleset = build(tmp_path, r1=r"""
        rules:
          - {id: gap, class: demo, reason: a, match: {message: {regex: ['(?s)\bmodel\b.{0,40}\bnot found\b']}}}
          - {id: star, class: demo, reason: a, match: {message: {regex: ['^fatal: .*denied']}}}
          - {id: negated, class: demo, reason: a, match: {message: {regex: ['key=[^&]+&secret']}}}
          - {id: nonspace, class: demo, reason: a, match: {message: {regex: ['\S+@\S+ bounced']}}}
          - {id: counted, class: demo, reason: a, match: {message: {regex: ['\b[\w ]{1,40} not enabled for models/']}}}
          - {id: tight, class: demo, reason: b, match: {message: {regex: ['\bquota[-_ ]?exceeded\b']}}}
          - {id: no-atoms, class: demo, reason: b, match: {message: {regex: ['^.{3}$']}}}
    """)
    index = ruleset.matcher._fields["message"]
    gapped = {index.regexes[i][0] for i in index.gapped}
    assert len(gapped) == 6 and not any("quota" in pattern for pattern in gapped)
    assert r"\bquota[-_ ]?exceeded\b" in [index.regexes[i][0] for i in index.unfiltered]
    assert verdict(ruleset, message="The MODEL gpt-9\nwas not found").rule.id == "gap"
    assert verdict(ruleset, message="the model name is long " + "x" * 40 + " not found").rule is None
    assert verdict(ruleset, message="fatal: push to origin denied").rule.id == "star"
    assert verdict(ruleset, message="see fatal: push to origin denied").rule is None  # anchored
    assert verdict(ruleset, message="GET /x?key=abc&secret=1").rule.id == "negated"
    assert verdict(ruleset, message="to a@b.io bounced").rule.id == "nonspace"
    assert verdict(ruleset, message="Code execution not enabled for models/gemini-x").rule.id == "counted"
    assert verdict(ruleset, message="Quota exceeded").rule.id == "tight"
    assert verdict(ruleset, message="abc").rule.id == "no-atoms"  # a gap regex with no atoms still runs


def test_the_scan_memo_is_bounded_and_never_changes_an_answer(tmp_path: Path) -> None:
    ruleset = build(tmp_path, r1="""
        rules:
          - {id: lit, class: demo, reason: a, match: {message: {contains: [boom]}}}
          - {id: rx, class: demo, reason: b, match: {message: {regex: ['\\bcode \\d{3}\\b']}}}
    """)
    answers = [(v.rule.id if v.rule else None)
               for v in (verdict(ruleset, message=m) for m in ("boom", "code 404", "x"))]
    assert answers == ["lit", "rx", None]
    for i in range(MEMO_SIZE + 10):  # distinct short messages: the memo fills, clears, refills
        assert verdict(ruleset, message=f"quiet {i}").rule is None
    assert [(v.rule.id if v.rule else None) for v in (verdict(ruleset, message=m) for m in ("boom", "code 404", "x"))] \
        == answers
    assert all(len(index.memo) <= MEMO_SIZE for index in ruleset.matcher._fields.values())


def test_the_decision_memo_keeps_hints_and_captures_apart_and_is_bounded(tmp_path: Path) -> None:
    """Provider and rule are remembered per (satisfied conditions, hint); captures are read per message."""
    ruleset = build(tmp_path, r1="""
        rules:
          - {id: who, class: demo, reason: a, match: {message: {regex: ['(?P<who>[a-z]+) failed']}}}
          - {id: acme-quota, class: demo, reason: b, match: {provider: {equals: [acme]}, message: {contains: [quota]}}}
    """)
    first, second = verdict(ruleset, message="alpha failed"), verdict(ruleset, message="bravo failed")
    assert (first.rule.id, second.rule.id) == ("who", "who")  # the second answer is the remembered one
    assert (first.captures, second.captures) == ({"who": "alpha"}, {"who": "bravo"})
    assert verdict(ruleset, message="quota", provider="acme").rule.id == "acme-quota"
    assert verdict(ruleset, message="quota").rule is None  # the same scan without the hint: its own decision
    for i in range(DECIDED_SIZE + 10):  # distinct hints: the memo fills, clears, refills
        assert verdict(ruleset, message="quota", provider=f"other{i}").rule is None
    assert len(ruleset.decided) <= DECIDED_SIZE
    assert verdict(ruleset, message="quota", provider="AcmeAI").rule.id == "acme-quota"


def test_gap_regexes_compile_in_groups_and_an_edit_recompiles_only_its_own(tmp_path: Path) -> None:
    """No one RE2 compile (it holds the GIL) covers all of a large table's gap regexes: they go in
    groups of about FILTER_GROUP, split by a hash of the pattern, so a reload recompiles only the
    groups whose patterns changed; the set is reused when none of its regexes changed."""
    def rule(rule_id: str, reason: str, pattern: str) -> str:
        return f"  - {{id: {rule_id}, class: demo, reason: {reason}, match: {{message: {{regex: ['{pattern}']}}}}}}"

    def table(edited: str, set_regex: str = "^plain set regex$") -> str:
        lines = [rule(f"g{i}", "b", f"\\bg{i}\\b.{{0,20}}end") for i in range(3 * FILTER_GROUP)]
        lines += [rule("edited", "a", f"\\b{edited}\\b.*done"), rule("in-set", "a", set_regex)]
        return "\n".join(["rules:", *lines])

    first = build(tmp_path, big=table("one"))
    index = first.matcher._fields["message"]
    assert len(index.gap_filters) >= 3 and all(len(members) < 2 * FILTER_GROUP for _, members in index.gap_filters)
    assert sorted(i for _, members in index.gap_filters for i in members) == sorted(index.gapped)
    assert len(index.regex_sets) == 1  # below PREFILTER_FROM the set stays whole
    assert verdict(first, message="then g300 at the end").rule.id == "g300"
    assert verdict(first, message="then g300 and more than twenty characters before the end").rule is None
    assert verdict(first, message="one, then done").rule.id == "edited"

    (tmp_path / "classes" / "big.yaml").write_text(table("two"))
    edited = load_ruleset(tmp_path, previous=first)
    before = {gap_filter for gap_filter, _ in index.gap_filters}
    after = {gap_filter for gap_filter, _ in edited.matcher._fields["message"].gap_filters}
    assert len(after & before) >= len(after) - 2 >= 1  # new: only the groups 'one' left and 'two' joined
    assert edited.matcher._fields["message"].regex_sets[0][0] is index.regex_sets[0][0]  # no set regex changed
    assert verdict(edited, message="two, then done").rule.id == "edited"
    assert verdict(edited, message="one, then done").rule is None
    assert verdict(edited, message="see g7 at the end").rule.id == "g7"

    (tmp_path / "classes" / "big.yaml").write_text(table("two", "^other set regex$"))
    recompiled = load_ruleset(tmp_path, previous=edited)
    assert recompiled.matcher._fields["message"].regex_sets[0][0] is not index.regex_sets[0][0]
    assert verdict(recompiled, message="other set regex").rule.id == "in-set"


def test_a_reload_compiles_only_what_it_changed(tmp_path: Path) -> None:
    """The ruleset a reload replaces lends its regexes and literal sets; the new one keeps only its own."""
    def table(last: str) -> str:
        lines = ["rules:"] + [f"  - {{id: q{i}, class: demo, reason: a, match: {{message: {{regex: ['qq{i}x? zz']}}}}}}"
                              for i in range(PREFILTER_FROM)]  # at PREFILTER_FROM: atoms are parsed too
        last_rule = f"  - {{id: last, class: demo, reason: b, match: {{message: {{regex: ['{last}']}}}}}}"
        named = "  - {id: named, class: demo, reason: b, match: {message: {regex: ['(?P<n>nn\\d+) named']}}}"
        return "\n".join([*lines, last_rule, named])

    def parts(ruleset: Ruleset) -> dict[object, object]:
        return ruleset.matcher.parts

    first = build(tmp_path, big=table("first\\d+ edit"))
    (tmp_path / "classes" / "big.yaml").write_text(table("second\\d+ edit"))
    edited = load_ruleset(tmp_path, previous=first)
    assert parts(edited)[("regex", "(?P<n>nn\\d+) named")] is parts(first)[("regex", "(?P<n>nn\\d+) named")]
    assert parts(edited)[("atoms", "qq7x? zz")] is parts(first)[("atoms", "qq7x? zz")]
    assert ("atoms", "second\\d+ edit") not in parts(first) and ("atoms", "first\\d+ edit") not in parts(edited)
    assert edited.matcher._fields["message"].literal_set is not first.matcher._fields["message"].literal_set
    assert verdict(edited, message="second42 edit").rule.id == "last"
    index = edited.matcher._fields["message"]
    q7 = index.regex_at["qq7x? zz"]
    assert index.compiled[q7] is None  # a triggered regex compiles on its own only when first triggered
    assert verdict(edited, message="QQ7x zz").rule.id == "q7" and index.compiled[q7] is not None
    assert verdict(edited, message="got nn42 named").captures == {"n": "nn42"}
    assert verdict(edited, message="first42 edit").rule is None and verdict(first, message="first42 edit").rule

    (tmp_path / "classes" / "more.yaml").write_text("classes:\n  - {id: extra, reasons: {x: {}}}\n")
    unchanged = load_ruleset(tmp_path, previous=edited)  # no match condition changed: nothing compiles
    assert unchanged.matcher._fields["message"].literal_set is edited.matcher._fields["message"].literal_set
    assert all(part is parts(edited)[key] for key, part in parts(unchanged).items())

    (tmp_path / "classes" / "big.yaml").write_text(table("bad(\\d+ edit"))
    with pytest.raises(RulesInvalid, match="does not compile under RE2"):
        load_ruleset(tmp_path, previous=unchanged)
    assert verdict(unchanged, message="second42 edit").rule.id == "last"  # the refused build took nothing from it


def test_a_listed_host_matches_itself_and_subdomains_not_longer_names() -> None:
    shipped = load_ruleset(Path(__file__).resolve().parent.parent / "rules")

    def provider(url: str) -> str | None:
        return classify(normalize(ErrorReport(message=f"request to {url} failed")), shipped).provider.id

    assert provider("https://api.x.ai/v1/chat") == "xai"
    assert provider("https://grok.com/x") == "xai"
    assert provider("https://dashboard.ngrok.com/billing") != "xai"
    assert provider("https://bedrock-runtime.us-east-1.amazonaws.com/model") == "aws_bedrock"
    assert provider("https://us-east5-aiplatform.googleapis.com/v1/projects/p") == "google"  # `-aiplatform...`
    assert provider("https://sheets.googleapis.com/v4/spreadsheets") is None  # Google, but not its AI
