"""Email against a real SMTP server (aiosmtpd on a free port, one per test): delivery, STARTTLS
and implicit TLS with a trustme certificate, login, throttling, an outage, header injection, redaction."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from service.metrics import Metrics
from service.models import ErrorReport, NotificationOutcome
from service.notify.pipeline import Notifier
from service.rules.engine import Ruleset
from service.settings import Settings
from service.triage import triage
from tests.conftest import SMTP_PASSWORD, SMTP_USER, FakeClock, SmtpServer, smtp_authenticator

pytestmark = pytest.mark.anyio
USER = "dev@example.com"
QUOTA = ("Error code: 429 - {'error': {'message': 'You exceeded your current quota, please check your plan and "
         "billing details.', 'type': 'insufficient_quota', 'param': None, 'code': 'insufficient_quota'}}")
SECRETS = ("sk-proj-" + "Q9w8E7r6T5y4U3i2O1p0" * 2, "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2,
           "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXZhbHVl", "hunter2-db-password")


class Mailer:
    """A Notifier on the shipped rules, pointed at one SMTP server, with an injected clock and sleep."""

    def __init__(self, settings: Settings, clock: FakeClock, ruleset: Ruleset, tls: ssl.SSLContext | None) -> None:
        self.registry = CollectorRegistry()
        self.ruleset = ruleset
        self.notifier = Notifier(settings, Metrics(self.registry), clock=clock, sleep=clock.sleep,
                                 jitter=lambda: 0.5, smtp_tls_context=tls)

    def report(self, **fields: Any) -> NotificationOutcome:
        classification, error, _ = triage(ErrorReport(**fields), self.ruleset, "n-1")
        return self.notifier.dispatch(classification, error, self.ruleset)

    async def deliver(self) -> None:
        await self.notifier.start()
        await self.notifier.drain()
        await self.notifier.stop(1)

    def count(self, outcome: str, class_id: str = "ai_credits") -> float:
        labels = {"channel": "user-email", "class": class_id, "outcome": outcome}
        return self.registry.get_sample_value("errtriage_notifications_total", labels) or 0.0


@pytest.fixture
def mailer(notify_settings: Callable[..., Settings], fake_clock: FakeClock,
           shipped: Ruleset) -> Callable[..., Mailer]:
    def make(server: SmtpServer, tls: ssl.SSLContext | None = None, **settings: Any) -> Mailer:
        values = {"smtp_host": server.host, "smtp_port": server.port, "smtp_tls": "none",
                  "smtp_from": "errtriage@example.com", "smtp_timeout_seconds": 5, **settings}
        return Mailer(notify_settings(**values), fake_clock, shipped, tls)

    return make


async def test_delivers_a_real_email_with_headers_and_both_bodies(
        smtp_server: Callable[..., SmtpServer], mailer: Callable[..., Mailer]) -> None:
    server = smtp_server()
    m = mailer(server)
    assert m.report(message=QUOTA, context={"user_email": USER}).status == "queued"
    await m.deliver()
    [message] = server.mailbox.messages
    assert server.mailbox.envelopes == [("errtriage@example.com", [USER])]
    assert (message["From"], message["To"], message["Subject"]) == (
        "errtriage@example.com", USER, "AI credits depleted at OpenAI")
    assert message["Message-ID"].endswith("@example.com>") and message["Date"] and message["X-Errtriage-Id"] == "n-1"
    assert (message["X-Errtriage-Class"], message["X-Errtriage-Route"], message["Auto-Submitted"]) == (
        "ai_credits", "ai-credits-user", "auto-generated")
    assert message.get_content_type() == "multipart/alternative"
    text = message.get_body(("plain",)).get_content()
    html = message.get_body(("html",)).get_content()
    assert "You exceeded your current quota" in text and "Hello dev@example.com" in text
    assert "<h2>AI credits depleted</h2>" in html
    assert m.count("sent") == 1 and m.count("failed") == 0


async def test_starttls_and_login_with_a_test_certificate(
        smtp_server: Callable[..., SmtpServer], mailer: Callable[..., Mailer],
        tls_contexts: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    server_tls, client_tls = tls_contexts
    server = smtp_server(tls_context=server_tls, require_starttls=True, auth_required=True, auth_require_tls=True,
                         authenticator=smtp_authenticator)
    m = mailer(server, client_tls, smtp_tls="starttls", smtp_username=SMTP_USER, smtp_password=SMTP_PASSWORD)
    m.report(message=QUOTA, context={"user_email": USER})
    await m.deliver()
    assert len(server.mailbox.messages) == 1
    assert server.mailbox.sessions == [{"tls": True, "authenticated": True}]


async def test_implicit_tls(smtp_server: Callable[..., SmtpServer], mailer: Callable[..., Mailer],
                            tls_contexts: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    server_tls, client_tls = tls_contexts
    server = smtp_server(ssl_context=server_tls)
    m = mailer(server, client_tls, smtp_tls="tls")
    m.report(message=QUOTA, context={"user_email": USER})
    await m.deliver()
    assert server.mailbox.sessions == [{"tls": True, "authenticated": False}]


@pytest.mark.parametrize("case", ["wrong password", "untrusted certificate"])
async def test_auth_and_certificate_failures_are_final_not_retried(
        smtp_server: Callable[..., SmtpServer], mailer: Callable[..., Mailer], fake_clock: FakeClock,
        tls_contexts: tuple[ssl.SSLContext, ssl.SSLContext], notify_log: list[logging.LogRecord], case: str) -> None:
    server_tls, client_tls = tls_contexts
    server = smtp_server(tls_context=server_tls, require_starttls=True, auth_required=True, auth_require_tls=True,
                         authenticator=smtp_authenticator)
    password = "wrong" if case == "wrong password" else SMTP_PASSWORD
    client = client_tls if case == "wrong password" else ssl.create_default_context()
    m = mailer(server, client, smtp_tls="starttls", smtp_username=SMTP_USER, smtp_password=password)
    m.report(message=QUOTA, context={"user_email": USER})
    await m.deliver()
    assert server.mailbox.messages == [] and fake_clock.sleeps == []
    assert m.count("failed") == 1 and m.count("retried") == 0
    [failure] = [r for r in notify_log if r.getMessage() == "notification failed"]
    expected = "SMTP replied 535" if case == "wrong password" else "TLS failed"
    assert failure.error.startswith(expected)  # type: ignore[attr-defined]
    assert failure.notification["to"] == [USER] and failure.notification["subject"]  # type: ignore[attr-defined]


async def test_a_burst_of_identical_errors_sends_exactly_one_email(
        smtp_server: Callable[..., SmtpServer], mailer: Callable[..., Mailer]) -> None:
    server = smtp_server()
    m = mailer(server)
    statuses = [m.report(message=QUOTA, context={"user_email": USER}).status for _ in range(50)]
    assert statuses == ["queued"] + ["throttled"] * 49
    await m.deliver()
    assert len(server.mailbox.messages) == 1
    assert m.count("sent") == 1 and m.count("throttled") == 49


async def test_an_smtp_outage_of_30_seconds_loses_nothing(
        smtp_server: Callable[..., SmtpServer], mailer: Callable[..., Mailer], fake_clock: FakeClock) -> None:
    server = smtp_server(start=False)  # nothing listens on its port yet: connections are refused
    outage_ends = fake_clock() + 30
    fake_clock.on_sleep = lambda n: server.start() if fake_clock() >= outage_ends and not server.controller else None
    m = mailer(server)
    users = [f"user{n}@example.com" for n in range(3)]
    assert [m.report(message=QUOTA, context={"user_email": u}).status for u in users] == ["queued"] * 3
    await m.deliver()
    assert sorted(rcpt for _, [rcpt] in server.mailbox.envelopes) == users
    assert m.count("sent") == 3 and m.count("failed") == 0 and m.count("retried") >= 6
    assert fake_clock() >= outage_ends
    latency = m.registry.get_sample_value("errtriage_notification_delivery_seconds_sum", {"channel": "user-email"})
    assert latency is not None and latency >= 3 * 30


async def test_a_4xx_reply_is_retried_and_then_delivered(
        smtp_server: Callable[..., SmtpServer], mailer: Callable[..., Mailer], fake_clock: FakeClock) -> None:
    server = smtp_server()
    server.mailbox.refusals = ["451 4.3.0 Mailbox busy, try again later", "452 4.3.1 Insufficient storage"]
    m = mailer(server)
    m.report(message=QUOTA, context={"user_email": USER})
    await m.deliver()
    assert len(server.mailbox.messages) == 1
    assert m.count("retried") == 2 and m.count("sent") == 1 and fake_clock.sleeps == [0.75, 1.5]


async def test_a_5xx_reply_fails_once_and_is_logged_redacted(
        smtp_server: Callable[..., SmtpServer], mailer: Callable[..., Mailer],
        notify_log: list[logging.LogRecord]) -> None:
    server = smtp_server()
    server.mailbox.refusals = ["554 5.7.1 Rejected"]
    m = mailer(server)
    m.report(message=f"{QUOTA} key={SECRETS[0]}", context={"user_email": USER})
    await m.deliver()
    assert server.mailbox.messages == [] and m.count("failed") == 1 and m.count("retried") == 0
    [failure] = [r for r in notify_log if r.getMessage() == "notification failed"]
    assert failure.error == "SMTP replied 554 5.7.1 Rejected"  # type: ignore[attr-defined]
    assert "You exceeded your current quota" in failure.notification["text"]  # type: ignore[attr-defined]
    assert SECRETS[0] not in repr(failure.__dict__)


async def test_crlf_in_payload_text_adds_no_header(smtp_server: Callable[..., SmtpServer],
                                                   mailer: Callable[..., Mailer]) -> None:
    server = smtp_server()
    m = mailer(server)
    injected = "\r\nBcc: victim@evil.example\r\nX-Injected: yes\r\n\r\nbody"
    outcome = m.report(message="Plan limit reached" + injected, provider="openai" + injected, code="plan_limit",
                       context={"user_email": USER, "work_name": "Site" + injected, "work_id": "w\r\nX-Id: 1"},
                       raw={"error": {"code": "plan_limit", "message": "plan limit reached" + injected}})
    assert outcome.status == "queued", outcome
    await m.deliver()
    [message] = server.mailbox.messages
    assert server.mailbox.envelopes == [("errtriage@example.com", [USER])]
    assert {k.lower() for k in message} == {"from", "to", "subject", "date", "message-id", "auto-submitted",
                                            "x-errtriage-id", "x-errtriage-class", "x-errtriage-route",
                                            "content-type", "mime-version"}
    assert message["Subject"] == ("Generation failed: account problem "
                                  "(Site Bcc: victim@evil.example X-Injected: yes body)")  # flattened, not a header
    headers = server.mailbox.raw[0].split(b"\r\n\r\n", 1)[0]
    assert b"\nBcc:" not in headers and b"\nX-Injected:" not in headers and b"\nX-Id:" not in headers


@pytest.mark.parametrize("invalid", ["dev@example.com\r\nBcc: victim@evil.example", "dev@example.com>, <x@evil.example",
                                     "not-an-address", "dev@exa mple.com"])
async def test_an_injected_or_invalid_recipient_is_never_used(
        smtp_server: Callable[..., SmtpServer], mailer: Callable[..., Mailer], invalid: str) -> None:
    server = smtp_server()
    m = mailer(server)
    assert m.report(message=QUOTA, context={"user_email": invalid}).status == "no_recipient"
    await m.deliver()
    assert server.mailbox.messages == [] and m.count("no_recipient") == 1


async def test_secrets_never_reach_the_mail(smtp_server: Callable[..., SmtpServer],
                                            mailer: Callable[..., Mailer]) -> None:
    server = smtp_server()
    m = mailer(server)
    m.report(message=f"{QUOTA} Authorization: Bearer {SECRETS[2]} with {SECRETS[0]}",
             context={"user_email": USER, "work_name": f"clone https://bot:{SECRETS[3]}@git.example.com/r.git",
                      "token_note": SECRETS[1]})
    await m.deliver()
    raw = server.mailbox.raw[0].decode()
    assert all(secret not in raw for secret in SECRETS)
    assert "[REDACTED]" in server.mailbox.messages[0].get_body(("plain",)).get_content()
