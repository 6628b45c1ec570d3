"""The notifier on a real redis-server, in process: the shared throttle across notifiers, the
outbox while Redis is away, ownership of entries a live process is retrying, claims after a
shutdown, entries whose route a reload removed. Real SMTP (aiosmtpd) and the real clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry

from service.metrics import Metrics
from service.models import ErrorReport, NotificationOutcome
from service.notify.pipeline import Notifier
from service.notify.redis_queue import GROUP, STREAM
from service.rules.engine import Ruleset
from service.settings import Settings
from service.triage import triage
from tests.conftest import SmtpServer

pytestmark = pytest.mark.anyio
QUOTA = ("Error code: 429 - {'error': {'message': 'You exceeded your current quota, please check your plan and "
         "billing details.', 'type': 'insufficient_quota', 'param': None, 'code': 'insufficient_quota'}}")


async def until(condition: Callable[[], bool], timeout: float = 10, what: str = "condition") -> None:
    """Poll (never a fixed sleep) until `condition` holds, for at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


class Node:
    """One Notifier with its own registry: what one errtriage process would hold."""

    def __init__(self, settings: Settings, ruleset: Ruleset) -> None:
        self.registry = CollectorRegistry()
        self.ruleset = ruleset
        self.notifier = Notifier(settings, Metrics(self.registry))
        self.serving = ruleset  # what its workers look routes up in

    def report(self, id_: str, user: str = "dev@example.com") -> NotificationOutcome:
        classification, error, _ = triage(ErrorReport(message=QUOTA, context={"user_email": user}), self.ruleset, id_)
        return self.notifier.dispatch(classification, error, self.ruleset)

    async def start(self) -> None:
        await self.notifier.start(lambda: self.serving)

    def value(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def count(self, outcome: str) -> float:
        return self.value("errtriage_notifications_total", channel="user-email", **{"class": "ai_credits"},
                          outcome=outcome)


@pytest.fixture
async def nodes(notify_settings: Callable[..., Settings], shipped: Ruleset) -> Any:
    made: list[Node] = []

    def make(smtp: SmtpServer, url: str, **overrides: object) -> Node:
        values: dict[str, object] = {"smtp_host": smtp.host, "smtp_port": smtp.port, "smtp_tls": "none",
                                     "smtp_timeout_seconds": 2, "redis_url": url, "notify_claim_seconds": 0.6,
                                     "notify_retry_base_seconds": 0.05, "notify_retry_max_seconds": 0.2,
                                     **overrides}
        node = Node(notify_settings(**values), shipped)
        made.append(node)
        return node

    yield make
    for node in made:
        await node.notifier.stop(0.5)


def ids(smtp: SmtpServer) -> list[str]:
    return sorted(str(m["X-Errtriage-Id"]) for m in smtp.mailbox.messages)


async def test_a_burst_spread_over_two_notifiers_sends_exactly_one_email(
        smtp_server: Callable[..., SmtpServer], redis_url: str, nodes: Callable[..., Node]) -> None:
    smtp = smtp_server()
    a, b = nodes(smtp, redis_url), nodes(smtp, redis_url)
    await a.start()
    await b.start()
    statuses = [(a if n % 2 else b).report(f"r{n}").status for n in range(30)]
    assert statuses == ["queued"] * 30  # with Redis the throttle verdict is taken in the background
    await until(lambda: a.count("throttled") + b.count("throttled") == 29, what="29 throttled")
    await until(lambda: a.count("sent") + b.count("sent") == 1, what="one sent")
    await a.notifier.drain()
    assert len(smtp.mailbox.messages) == 1
    with redis.Redis.from_url(redis_url) as client:
        assert client.xlen(STREAM) == 0  # acknowledged entries are deleted: the stream is trimmed
        assert len(client.keys("errtriage:throttle:*")) == 1
        assert 3590_000 < client.pttl(client.keys("errtriage:throttle:*")[0]) <= 3600_000  # the route's 1h window


async def test_redis_away_holds_notifications_in_a_bounded_outbox_until_it_is_back(
        smtp_server: Callable[..., SmtpServer], redis_server: Callable[..., Any], nodes: Callable[..., Node]) -> None:
    smtp = smtp_server()
    store = redis_server(start=False)  # nothing listens on its port yet
    node = nodes(smtp, store.url, notify_queue_size=5)
    await node.start()
    started = time.perf_counter()
    statuses = [node.report(f"r{n}", user=f"u{n}@example.com").status for n in range(7)]
    assert time.perf_counter() - started < 0.1  # dispatch never waits on Redis
    assert statuses == ["queued"] * 5 + ["dropped"] * 2
    assert node.count("dropped") == 2 and node.value("errtriage_notify_outbox_depth") == 5
    assert node.notifier.queue_full() and node.notifier.state() == {"redis": "down"}
    await until(lambda: node.value("errtriage_redis_errors_total", operation="write") >= 1, what="a write error")
    store.start()
    await until(lambda: len(smtp.mailbox.messages) == 5, what="the five held notifications")
    assert ids(smtp) == [f"r{n}" for n in range(5)]
    assert node.value("errtriage_notify_outbox_depth") == 0 and node.notifier.state() == {"redis": "up"}


async def test_a_live_owner_keeps_its_entry_while_retrying_and_a_stopped_ones_is_claimed(
        smtp_server: Callable[..., SmtpServer], redis_url: str, nodes: Callable[..., Node]) -> None:
    smtp = smtp_server(start=False)  # SMTP down: the owner retries
    owner = nodes(smtp, redis_url)
    await owner.start()
    owner.report("held-1")
    client = redis.Redis.from_url(redis_url)
    await until(lambda: client.xpending(STREAM, GROUP)["pending"] == 1, what="the entry read")
    other = nodes(smtp, redis_url)
    await other.start()
    since = time.monotonic()
    await until(lambda: time.monotonic() - since > 4 * 0.6 and owner.count("retried") >= 10,
                what="retries over four claim periods")
    assert other.value("errtriage_notify_claims_total") == 0  # refreshed by its live owner: never idle
    [entry] = client.xpending_range(STREAM, GROUP, min="-", max="+", count=10)
    assert entry["consumer"].decode() == owner.notifier._queue.consumer  # type: ignore[attr-defined]
    assert entry["times_delivered"] == 1  # XCLAIM JUSTID refreshed it; no claim (not even its own) took it
    assert entry["time_since_delivered"] < 600
    await owner.notifier.stop(0)  # shutdown: what it holds stays pending, not failed
    assert owner.count("failed") == 0
    smtp.start()
    await until(lambda: ids(smtp) == ["held-1"] and other.count("sent") == 1, what="delivery by the other notifier")
    assert other.value("errtriage_notify_claims_total") == 1
    await until(lambda: client.xpending(STREAM, GROUP)["pending"] == 0 and client.xlen(STREAM) == 0,
                what="the claimed entry acknowledged")
    client.close()


async def test_an_entry_whose_route_a_reload_removed_is_failed_and_acknowledged(
        smtp_server: Callable[..., SmtpServer], redis_url: str, nodes: Callable[..., Node],
        notify_rules: Ruleset, notify_log: list[Any]) -> None:
    smtp = smtp_server()
    node = nodes(smtp, redis_url)
    node.serving = notify_rules  # the rules now serving have no route `ai-credits-user`
    await node.start()
    node.report("gone-1")
    await until(lambda: node.count("failed") == 1, what="the failure")
    [failure] = [r for r in notify_log if r.getMessage() == "notification failed"]
    assert failure.error == "route 'ai-credits-user' no longer exists in the rules"
    assert failure.notification["notification_id"] == "gone-1"
    with redis.Redis.from_url(redis_url) as client:
        await until(lambda: client.xlen(STREAM) == 0 and client.xpending(STREAM, GROUP)["pending"] == 0,
                    what="the entry acknowledged")
    assert smtp.mailbox.messages == []


async def test_stream_gauges_follow_the_backlog(
        smtp_server: Callable[..., SmtpServer], redis_url: str, nodes: Callable[..., Node]) -> None:
    smtp = smtp_server(start=False)
    node = nodes(smtp, redis_url, notify_workers=2)
    await node.start()
    for n in range(5):
        node.report(f"g{n}", user=f"g{n}@example.com")
    await until(lambda: node.value("errtriage_notify_stream_length") == 5
                and node.value("errtriage_notify_stream_pending") == 2, what="5 in the stream, 2 read")
    assert node.value("errtriage_redis_up") == 1
    smtp.start()
    await until(lambda: len(smtp.mailbox.messages) == 5, what="all five")
    await until(lambda: node.value("errtriage_notify_stream_length") == 0, what="an empty stream")


def test_without_a_redis_url_nothing_changes(live: Callable[..., Any]) -> None:
    api = live(notify_enabled=True)
    ready = api.get("/readyz")
    assert ready.status_code == 200 and "redis" not in ready.json()
    assert type(api.app.state.services.notifier._queue).__name__ == "MemoryQueue"
    assert api.post("/v1/errors", json={"message": QUOTA}).json()["notification"]["status"] == "no_recipient"
