"""Templates: sandboxed, strict, autoescaped for HTML, redacted, and frozen at load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from service.errors import DeliveryError
from service.models import Classification, Recovery
from service.normalize import NormalizedError
from service.notify.config import build_notify
from service.notify.render import one_line
from service.notify.variables import samples, template_variables
from service.rules.engine import Ruleset
from service.rules.loader import load_ruleset
from tests.conftest import NOTIFY_BASE

SECRET_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2


def variables(message: str = "quota exceeded", provider: str | None = "openai",
              context: dict[str, object] | None = None) -> dict[str, object]:
    classification = Classification(
        id="n-1", class_="ai_credits", reason="quota_exceeded", provider=provider, provider_kind="ai",
        retryable=False, rule="r", recovery=Recovery(retry_hint="Top up."), rules_version="v")
    error = NormalizedError(message=message,
                            context={"user_email": "dev@example.com"} if context is None else context)
    return template_variables(classification, error, "route-1", "OpenAI" if provider else None)


def test_real_and_sample_variables_have_the_same_keys() -> None:
    real = variables(context={})
    full, sparse = samples()
    assert set(real) == set(full) == set(sparse)
    assert set(real["context"]) >= {"user_email", "user_id", "work_id", "work_name", "step_id"}
    assert real["context"]["work_name"] is None and real["user"] is None


def test_html_is_autoescaped_and_text_is_verbatim(shipped: Ruleset) -> None:
    rendered = shipped.notify.templates["ai_credits"].render(variables('<script>alert("x")</script>'))
    assert rendered.html is not None and "<script>" not in rendered.html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in rendered.html
    assert '<script>alert("x")</script>' in rendered.text
    assert rendered.subject == "AI credits depleted at OpenAI"


def test_seed_content_reaches_each_default_template(shipped: Ruleset) -> None:
    values = variables("plan limit reached", context={"user_email": "dev@example.com", "work_id": "w-42",
                                                      "work_name": "Landing page"})
    account = shipped.notify.templates["account_level"].render(values)
    assert account.subject == "Generation failed: account problem (Landing page)"
    assert all(part in account.text for part in ("dev@example.com", "w-42", "Landing page", "plan limit reached"))
    git = shipped.notify.templates["git_auth"].render(values)
    assert git.subject == "Git authorization expired at OpenAI" and "dev@example.com" in git.text
    provider = shipped.notify.templates["ai_provider"].render(values)
    assert provider.subject == "AI provider error at OpenAI" and "plan limit reached" in provider.text


def test_secrets_are_redacted_in_every_part(shipped: Ruleset) -> None:
    values = variables(f"bad key {SECRET_KEY}", context={"user_email": "dev@example.com",
                                                         "work_name": "Authorization: Bearer abcdefghijklmnop1234"})
    for name in ("ai_credits", "account_level"):
        rendered = shipped.notify.templates[name].render(values)
        for part in (rendered.subject, rendered.text, rendered.html or ""):
            assert SECRET_KEY not in part and "abcdefghijklmnop1234" not in part
    assert "[REDACTED]" in shipped.notify.templates["account_level"].render(values).text


def test_subject_is_one_line_without_control_characters() -> None:
    assert one_line("Quota\r\nBcc: victim@example.com\x00\x1b[31m\u2028x") == "Quota Bcc: victim@example.com [31m x"
    assert one_line("\u202eevil\u200b") == "evil"
    long = one_line("x" * 500)
    assert len(long) == 200 and long.endswith("…")


def test_json_part_renders_valid_json_from_hostile_text(notify_rules: Ruleset) -> None:
    message = 'he said "stop"\nnew line \\ and </script>'
    rendered = notify_rules.notify.templates["hooked"].render(variables(message))
    assert rendered.body is not None
    assert json.loads(rendered.body) == {"text": f"Rate limited at OpenAI: {message}", "class": "ai_credits",
                                         "work": None}


def test_templates_are_frozen_at_load(tmp_path: Path) -> None:
    root = tmp_path / "rules"
    shutil.copytree(NOTIFY_BASE, root)
    ruleset = load_ruleset(root, build_notify)
    (root / "templates" / "basic.text.j2").write_text("CHANGED {{ nope }}")
    assert "CHANGED" not in ruleset.notify.templates["basic"].render(variables()).text


def test_a_branch_the_samples_miss_fails_as_a_permanent_delivery_error(tmp_path: Path) -> None:
    root = tmp_path / "rules"
    shutil.copytree(NOTIFY_BASE, root)
    (root / "templates" / "basic.text.j2").write_text('{% if provider == "anthropic" %}{{ nope }}{% endif %}ok')
    templates = load_ruleset(root, build_notify).notify.templates
    assert templates["basic"].render(variables()).text == "ok"
    with pytest.raises(DeliveryError) as caught:
        templates["basic"].render(variables(provider="anthropic"))
    assert caught.value.transient is False and "'nope' is undefined" in str(caught.value)


def test_build_message_flattens_a_hostile_subject_and_ids() -> None:
    from email import message_from_bytes, policy

    from service.notify.mail import build_message
    from service.notify.outgoing import Outgoing
    from service.notify.render import Rendered

    hostile = "x\r\nBcc: victim@evil.example"
    out = Outgoing(hostile, hostile, "mail", hostile, ("dev@example.com",),
                   Rendered(subject=hostile, text="body\r\nBcc: not-a-header@evil.example", html=None, body=None), {})
    raw = build_message(out, "errtriage@example.com", 1_800_000_000.0).as_bytes()
    parsed = message_from_bytes(raw, policy=policy.default)
    assert parsed["Bcc"] is None and parsed["Subject"] == "x Bcc: victim@evil.example"
    assert parsed["X-Errtriage-Route"] == parsed["X-Errtriage-Class"] == "x Bcc: victim@evil.example"
    assert "not-a-header@evil.example" in parsed.get_content()
