"""Notification tables: the shipped defaults route as seed 003 says, and every invalid file is refused
at load (and by `errtriage check`) with file, line, id and an exact message."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import jsonschema_rs
import pytest
import yaml

from service.__main__ import main
from service.errors import RulesInvalid
from service.models import Classification, Recovery
from service.notify.config import build_notify
from service.rules.engine import Ruleset
from service.rules.loader import load_ruleset
from tests.conftest import NOTIFY_BASE, RULES

INVALID = NOTIFY_BASE.parent / "invalid"

EXPECTED = {
    "undefined-channel": "routes/50-bad.yaml:2 [to-pager]: undefined channel 'pager' used in route 'to-pager'",
    "undefined-template": "routes/50-bad.yaml:2 [fancy]: undefined template 'fancy' used in route 'fancy'",
    "undefined-class": "routes/50-bad.yaml:2 [typo-class]: undefined class 'ai_credit' used in route 'typo-class'",
    "undefined-reason": "routes/50-bad.yaml:2 [wrong-reason]: undefined reason 'rate_limited' used in route "
                        "'wrong-reason'",
    "undefined-provider": "routes/50-bad.yaml:2 [unknown-provider]: undefined provider 'openia' used in route "
                          "'unknown-provider'",
    "duplicate-route": "routes/50-bad.yaml:2 [credits]: duplicate route id 'credits' (first in routes/00-routes.yaml)",
    "duplicate-channel": "routes/50-bad.yaml:2 [audit]: duplicate channel id 'audit' (first in routes/00-routes.yaml)",
    "inline-secret": "routes/50-bad.yaml:2 [leaky-hook]: channels.0: Value error, 'url' would write a secret into "
                     "the rule file; name the environment variable that holds it: url_env",
    "bad-env-name": "routes/50-bad.yaml:2 [lower-env]: channels.0.webhook.url_env: String should match pattern "
                    "'^[A-Z_][A-Z0-9_]{0,127}$'",
    "bad-throttle": "routes/50-bad.yaml:2 [slow]: routes.0.throttle: Value error, duration '1 hour' is not like "
                    "90s, 30m, 1h or 1d",
    "bad-group-by": "routes/50-bad.yaml:2 [grouped]: routes.0.group_by.1: Input should be 'class', 'reason', "
                    "'provider', 'user', 'source', 'tool' or 'work_id'",
    "bad-recipient": "routes/50-bad.yaml:2 [fixed]: channels.0.email.to: Value error, invalid address "
                     "'ops@example.com\\r\\nBcc: victim@example.com': The part after the @-sign contains invalid "
                     "characters: ':', '@', SPACE, U+000A, U+000D.",
    "unknown-key": "routes/50-bad.yaml:2 [continues]: routes.0.continue: Extra inputs are not permitted",
    "template-syntax": "templates/broken.text.j2:3 [broken]: template syntax: unexpected '}'",
    "template-undefined": "templates/typo.text.j2:2 [typo]: test render failed: 'work_nmae' is undefined",
    "template-bad-json": "templates/naive.json.j2 [naive]: does not render valid JSON: Expecting ',' delimiter: "
                         "line 1 column 22 (char 21)",
    "template-missing-part": "templates/lonely.text.j2 [lonely]: template 'lonely' has no text part",
    "template-sandbox": "templates/escape.text.j2:1 [escape]: test render failed: access to attribute '__class__' "
                        "of 'str' object is unsafe.",
    "silence-naive-until": "silences/50-bad.yaml:2 [naive]: silences.0.until: Input should have timezone info",
    "silence-undefined-class": "silences/50-bad.yaml:2 [quiet-typo]: undefined class 'ai_creditz' used in silence "
                               "'quiet-typo'",
    "silence-no-comment": "silences/50-bad.yaml:2 [why]: silences.0.comment: Field required",
    "silence-empty-match": "silences/50-bad.yaml:3 [everything]: silences.0.match: Value error, a silence must "
                           "match on at least one of class, provider, source",
}


def classification(class_id: str, reason: str, provider: str | None = None) -> Classification:
    return Classification(id="c1", class_=class_id, reason=reason, provider=provider, provider_kind=None,
                          retryable=False, rule=None, recovery=Recovery(), rules_version="v")


def with_case(tmp_path: Path, case: str) -> Path:
    root = tmp_path / "rules"
    shutil.copytree(NOTIFY_BASE, root)
    shutil.copytree(INVALID / case, root, dirs_exist_ok=True)
    return root


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_invalid_notification_file_is_refused_with_exact_message(tmp_path: Path, case: str) -> None:
    with pytest.raises(RulesInvalid) as caught:
        load_ruleset(with_case(tmp_path, case), build_notify)
    assert [str(e) for e in caught.value.errors] == [EXPECTED[case]]


def test_every_invalid_case_has_an_expectation() -> None:
    assert sorted(p.name for p in INVALID.iterdir()) == sorted(EXPECTED)


def test_check_cli_prints_the_exact_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = with_case(tmp_path, "template-undefined")
    assert main(["check", str(root)]) == 1
    err = capsys.readouterr().err
    assert f"{root}/templates/typo.text.j2:2 [typo]: test render failed: 'work_nmae' is undefined" in err


def test_every_error_of_a_load_is_reported_together(tmp_path: Path) -> None:
    root = with_case(tmp_path, "undefined-channel")
    shutil.copytree(INVALID / "template-undefined", root, dirs_exist_ok=True)
    with pytest.raises(RulesInvalid) as caught:
        load_ruleset(root, build_notify)
    assert sorted(str(e) for e in caught.value.errors) == sorted(
        [EXPECTED["undefined-channel"], EXPECTED["template-undefined"]])


@pytest.mark.parametrize(("class_id", "reason", "route", "template"), [
    ("ai_credits", "quota_exceeded", "ai-credits-user", "ai_credits"),
    ("ai_provider", "rate_limited", "ai-provider-user", "ai_provider"),
    ("git_auth", "token_expired", "git-auth-user", "git_auth"),
    ("account_level", "plan_limit", "account-level-user", "account_level"),
])
def test_shipped_routes_follow_seed_003(shipped: Ruleset, class_id: str, reason: str, route: str,
                                        template: str) -> None:
    found = shipped.notify.route_for(classification(class_id, reason, "openai"), None)
    assert (found.id, found.template, found.channels) == (route, template, ["user-email"])
    assert found.throttle == 3600 and found.group_by == ["class", "provider", "user"]
    assert shipped.notify.channels["user-email"].type == "email" and shipped.notify.channels["user-email"].to == []


@pytest.mark.parametrize("class_id", ["git_provider", "tool_calling", "auth_required", "tool_error",
                                      "empty_result", "aborted", "unknown"])
def test_other_classes_notify_no_one(shipped: Ruleset, class_id: str) -> None:
    assert shipped.notify.route_for(classification(class_id, "x"), None) is None


def test_shipped_templates_have_subject_text_and_html(shipped: Ruleset) -> None:
    templates = shipped.notify.templates
    assert sorted(templates) == ["account_level", "ai_credits", "ai_provider", "git_auth"]
    assert all(sorted(t.parts) == ["html", "subject", "text"] for t in templates.values())


class Report:
    def __init__(self, source: str | None) -> None:
        self.source = source


def test_first_matching_route_wins_in_file_order(notify_rules: Ruleset) -> None:
    notify = notify_rules.notify
    assert notify.route_for(classification("ai_credits", "quota_exceeded"), None).id == "credits"
    assert [r.id for r in notify.routes][-1] == "credits-shadowed"  # later file, same match: never reached
    limits = classification("ai_provider", "rate_limited", "openai")
    assert notify.route_for(limits, None).id == "openai-limits"
    assert notify.route_for(classification("ai_provider", "rate_limited", "anthropic"), None).id == "provider"
    assert notify.route_for(classification("ai_provider", "server_error", "openai"), None).id == "provider"


def test_route_source_matches_case_insensitively(notify_rules: Ruleset) -> None:
    notify = notify_rules.notify
    account = classification("account_level", "plan_limit")
    assert notify.route_for(account, Report("BILLING-svc")).id == "account"
    assert notify.route_for(account, Report("other-svc")) is None
    assert notify.route_for(account, Report(None)) is None


def test_silences_match_until_they_expire(notify_rules: Ruleset) -> None:
    notify = notify_rules.notify
    git = classification("git_auth", "token_expired", "github")
    before = dt.datetime(2029, 12, 31, 23, 59, tzinfo=dt.UTC).timestamp()
    assert notify.silence_for(git, None, before).id == "git-maintenance"
    assert notify.silence_for(git, None, dt.datetime(2030, 1, 1, tzinfo=dt.UTC).timestamp()) is None
    assert notify.silence_for(classification("git_auth", "token_expired", "gitlab"), None, before) is None
    assert notify.silence_for(classification("account_level", "plan_limit"), None, before) is None  # expired


def test_counts_and_metric_label_sets(notify_rules: Ruleset) -> None:
    notify = notify_rules.notify
    assert notify.counts() == {"routes": 6, "channels": 4, "templates": 2, "silences": 2}
    assert notify.label_sets() == [("audit", "ai_credits"), ("audit", "ai_provider"), ("hook", "ai_provider"),
                                   ("mail", "ai_credits"), ("mail", "ai_provider"), ("mail", "git_auth"),
                                   ("ops-mail", "account_level")]


def _jsonable(value: object) -> object:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value.isoformat() if isinstance(value, dt.datetime) else value


NOTIFICATION_FILES = sorted([*RULES.glob("routes/*.yaml"), *RULES.glob("silences/*.yaml"),
                             *NOTIFY_BASE.glob("routes/*.yaml"), *NOTIFY_BASE.glob("silences/*.yaml")])


@pytest.mark.parametrize("path", NOTIFICATION_FILES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name}")
def test_notification_files_validate_against_the_published_schema(path: Path) -> None:
    schema = json.loads((RULES / "schema.json").read_text())
    data = _jsonable(yaml.safe_load(path.read_text()) or {})
    assert [e.message for e in jsonschema_rs.validator_for(schema).iter_errors(data)] == []
