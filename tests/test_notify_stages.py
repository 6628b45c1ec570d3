"""The synchronous stages of dispatch() and the worker lifecycle: route, silence, recipient,
throttle, bounded queue, drain and shutdown. Every outcome is checked in the metrics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from service.metrics import Metrics
from service.models import Classification, NotificationOutcome, Recovery
from service.normalize import NormalizedError
from service.notify.pipeline import Notifier
from service.rules.engine import Ruleset
from service.settings import Settings
from tests.conftest import FakeClock

pytestmark = pytest.mark.anyio
USER = "dev@example.com"
HOOK_ENV = {"ERRTRIAGE_TEST_HOOK_URL": "https://hooks.example.com/x", "ERRTRIAGE_TEST_HOOK_SECRET": "k",
            "ERRTRIAGE_TEST_HOOK_AUTH": "Bearer t0ken"}


class Harness:
    def __init__(self, settings: Settings, clock: FakeClock, ruleset: Ruleset,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.registry = CollectorRegistry()
        self.clock = clock
        self.ruleset = ruleset
        self.notifier = Notifier(settings, Metrics(self.registry), clock=clock, sleep=clock.sleep,
                                 jitter=lambda: 0.5, http_transport=transport,
                                 environ=HOOK_ENV)

    def dispatch(self, class_id: str, reason: str, provider: str | None = None, source: str | None = None,
                 **context: Any) -> NotificationOutcome:
        classification = Classification(id="n1", class_=class_id, reason=reason, provider=provider,
                                        provider_kind=None, retryable=False, rule=None, recovery=Recovery(),
                                        rules_version="v")
        error = NormalizedError(message="boom", source=source, context=context)
        return self.notifier.dispatch(classification, error, self.ruleset)

    def count(self, channel: str, class_id: str, outcome: str) -> float:
        labels = {"channel": channel, "class": class_id, "outcome": outcome}
        return self.registry.get_sample_value("errtriage_notifications_total", labels) or 0.0

    def gauge(self) -> float:
        return self.registry.get_sample_value("errtriage_notification_queue_depth") or 0.0


@pytest.fixture
def harness(notify_settings: Callable[..., Settings], fake_clock: FakeClock,
            notify_rules: Ruleset) -> Callable[..., Harness]:
    def make(transport: httpx.AsyncBaseTransport | None = None, **settings: object) -> Harness:
        return Harness(notify_settings(**settings), fake_clock, notify_rules, transport)

    return make


def outcome(status: str, route: str | None = None, channels: list[str] | None = None) -> NotificationOutcome:
    return NotificationOutcome(status=status, route=route, channels=channels or [])  # type: ignore[arg-type]


async def test_no_route_is_none_and_counts_nothing(harness: Callable[..., Harness]) -> None:
    h = harness()
    assert h.dispatch("tool_error", "internal", user_email=USER) == outcome("none")
    assert h.notifier.queue_full() is False and h.gauge() == 0


async def test_queued_then_sent_with_latency(harness: Callable[..., Harness], notify_log: list[logging.LogRecord],
                                             ) -> None:
    h = harness()
    assert h.dispatch("ai_credits", "quota_exceeded", "openai", user_email=USER) == outcome(
        "queued", "credits", ["mail"])
    assert h.gauge() == 1
    await h.notifier.start()
    await h.notifier.drain()
    assert h.count("mail", "ai_credits", "sent") == 1 and h.gauge() == 0
    assert h.registry.get_sample_value("errtriage_notification_delivery_seconds_count", {"channel": "mail"}) == 1
    record = next(r for r in notify_log if r.getMessage() == "notification")
    assert record.to == [USER] and record.subject == "[ai_credits] OpenAI: boom"  # type: ignore[attr-defined]
    assert "ERRTRIAGE_SMTP_HOST is not set" in record.note  # type: ignore[attr-defined]
    await h.notifier.stop(1)


@pytest.mark.parametrize("context", [{}, {"user_id": "u-1"}, {"user_email": "not an address"},
                                     {"user_email": "dev@example.com\r\nBcc: victim@example.com"}])
async def test_no_valid_recipient_is_no_recipient_not_an_error(harness: Callable[..., Harness],
                                                               context: dict[str, str]) -> None:
    h = harness()
    assert h.dispatch("ai_credits", "quota_exceeded", **context) == outcome("no_recipient", "credits", ["mail"])
    assert h.count("mail", "ai_credits", "no_recipient") == 1 and h.gauge() == 0


async def test_fixed_recipient_needs_no_user(harness: Callable[..., Harness]) -> None:
    h = harness()
    assert h.dispatch("account_level", "plan_limit", source="billing-svc") == outcome(
        "queued", "account", ["ops-mail"])


async def test_one_route_two_channels_reports_what_was_queued(harness: Callable[..., Harness]) -> None:
    h = harness()
    assert h.dispatch("ai_provider", "server_error", "anthropic") == outcome("queued", "provider", ["audit"])
    assert h.count("mail", "ai_provider", "no_recipient") == 1


async def test_throttle_groups_by_class_provider_user_per_window(harness: Callable[..., Harness],
                                                                 fake_clock: FakeClock) -> None:
    h = harness()
    first = h.dispatch("ai_credits", "quota_exceeded", "openai", user_email=USER)
    assert first.status == "queued"
    assert h.dispatch("ai_credits", "quota_exceeded", "openai", user_email=USER) == outcome(
        "throttled", "credits", ["mail"])
    assert h.dispatch("ai_credits", "quota_exceeded", "anthropic", user_email=USER).status == "queued"
    assert h.dispatch("ai_credits", "quota_exceeded", "openai", user_email="other@example.com").status == "queued"
    assert h.count("mail", "ai_credits", "throttled") == 1
    fake_clock.now += 3599
    assert h.dispatch("ai_credits", "quota_exceeded", "openai", user_email=USER).status == "throttled"
    fake_clock.now += 1
    assert h.dispatch("ai_credits", "quota_exceeded", "openai", user_email=USER).status == "queued"


async def test_group_by_decides_what_counts_as_a_repeat(harness: Callable[..., Harness]) -> None:
    h = harness()  # route "provider": group_by [class, user], so another provider is still a repeat
    assert h.dispatch("ai_provider", "server_error", "openai", user_email=USER).status == "queued"
    assert h.dispatch("ai_provider", "server_error", "anthropic", user_email=USER).status == "throttled"
    assert h.count("mail", "ai_provider", "throttled") == 1 and h.count("audit", "ai_provider", "throttled") == 1


async def test_silence_is_counted_and_expired_silences_are_ignored(harness: Callable[..., Harness],
                                                                   fake_clock: FakeClock) -> None:
    h = harness()
    assert h.dispatch("git_auth", "token_expired", "github", user_email=USER) == outcome(
        "silenced", "git", ["mail"])
    assert h.count("mail", "git_auth", "silenced") == 1 and h.gauge() == 0
    assert h.dispatch("git_auth", "token_expired", "gitlab", user_email=USER).status == "queued"
    assert h.dispatch("account_level", "plan_limit", source="billing-svc").status == "queued"  # expired in 2020
    fake_clock.now = 1_893_456_000.0  # 2030-01-01T00:00:00Z: the silence has ended
    assert h.dispatch("git_auth", "token_expired", "github", user_email=USER).status == "queued"


async def test_full_queue_drops_counts_and_fails_readiness(harness: Callable[..., Harness]) -> None:
    h = harness(notify_queue_size=1)
    assert h.dispatch("ai_credits", "quota_exceeded", "openai", user_email=USER).status == "queued"
    assert h.notifier.queue_full() is True
    assert h.dispatch("ai_credits", "quota_exceeded", "anthropic", user_email=USER) == outcome(
        "dropped", "credits", ["mail"])
    assert h.count("mail", "ai_credits", "dropped") == 1
    await h.notifier.start()
    await h.notifier.drain()
    assert h.notifier.queue_full() is False
    # the dropped one never went out, so its group is not throttled
    assert h.dispatch("ai_credits", "quota_exceeded", "anthropic", user_email=USER).status == "queued"
    await h.notifier.stop(1)


async def test_stop_drains_the_queue_then_refuses_new_work(harness: Callable[..., Harness]) -> None:
    h = harness()
    for n in range(5):
        h.dispatch("ai_credits", "quota_exceeded", "openai", user_email=f"user{n}@example.com")
    await h.notifier.start()
    await h.notifier.stop(5)
    assert h.count("mail", "ai_credits", "sent") == 5 and h.gauge() == 0
    assert h.dispatch("ai_credits", "quota_exceeded", "openai", user_email=USER).status == "dropped"


async def test_stop_after_grace_cancels_and_counts_what_was_not_delivered(
        harness: Callable[..., Harness], notify_log: list[logging.LogRecord]) -> None:
    release = asyncio.Event()

    async def stuck(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return httpx.Response(200)

    h = harness(httpx.MockTransport(stuck), notify_workers=1)
    h.dispatch("ai_provider", "rate_limited", "openai")  # -> hook, stuck in flight
    h.dispatch("ai_credits", "quota_exceeded", "openai", user_email=USER)  # -> mail, still queued
    await h.notifier.start()
    await asyncio.sleep(0)
    await h.notifier.stop(0.05)
    assert h.count("hook", "ai_provider", "failed") == 1 and h.count("mail", "ai_credits", "failed") == 1
    failures = [r for r in notify_log if r.getMessage() == "notification failed"]
    assert [r.error for r in failures] == ["not delivered before shutdown"] * 2  # type: ignore[attr-defined]
