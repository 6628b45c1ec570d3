"""Notifications through the real app: /v1/errors end to end with a real SMTP server, the request
path unaffected by a slow or dead SMTP server, /readyz on a full queue, the log fallback of a fresh
`errtriage serve`, and POST /v1/notifications/test."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from service.api.app import create_app
from service.metrics import Metrics
from service.notify.pipeline import Notifier
from service.settings import Settings
from tests.conftest import FakeClock, SmtpServer
from tests.servers import Process, running

USER = "dev@example.com"
QUOTA = {"message": "Error code: 429 - {'error': {'message': 'You exceeded your current quota, please check your "
                    "plan and billing details.', 'type': 'insufficient_quota', 'param': None, "
                    "'code': 'insufficient_quota'}}", "context": {"user_email": USER, "work_id": "w-42"}}
ADMIN = {"Authorization": "Bearer test-token"}


class App:
    """The app under a real uvicorn (in a thread), an httpx client on it, and its metrics registry."""

    def __init__(self, app: Any, registry: CollectorRegistry) -> None:
        self._server = running(app)
        self.client = httpx.Client(base_url=self._server.__enter__(), timeout=10)
        self.registry = registry
        self._stopped = False

    def count(self, outcome: str, class_id: str = "ai_credits") -> float | None:
        labels = {"channel": "user-email", "class": class_id, "outcome": outcome}
        return self.registry.get_sample_value("errtriage_notifications_total", labels)

    def stop(self) -> None:
        """Shut the server down: its lifespan ends, and the notification queue drains first."""
        if not self._stopped:
            self._stopped = True
            self.client.close()
            self._server.__exit__(None, None, None)


@pytest.fixture
def app(notify_settings: Callable[..., Settings], fake_clock: FakeClock) -> Iterator[Callable[..., App]]:
    """app(**settings) -> a running app; stopped at the end of the test if the test did not stop it."""
    apps: list[App] = []

    def start(**settings: Any) -> App:
        registry = CollectorRegistry()

        def notifier(s: Settings, m: Metrics) -> Notifier:
            return Notifier(s, m, clock=fake_clock, sleep=fake_clock.sleep, jitter=lambda: 0.5)

        app = create_app(notify_settings(**settings), registry=registry, notifier_factory=notifier)
        apps.append(App(app, registry))
        return apps[-1]

    yield start
    for started in apps:
        started.stop()


def smtp_at(server: SmtpServer | tuple[str, int]) -> dict[str, Any]:
    host, port = (server.host, server.port) if isinstance(server, SmtpServer) else server
    return {"smtp_host": host, "smtp_port": port, "smtp_tls": "none", "smtp_from": "errtriage@example.com"}


@pytest.fixture
def silent_smtp() -> Iterator[tuple[str, int]]:
    """A port that accepts TCP connections but never says a word: an SMTP server that hangs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()


def test_report_to_email_end_to_end(app: Callable[..., App], smtp_server: Callable[..., SmtpServer]) -> None:
    server = smtp_server()
    a = app(**smtp_at(server))
    assert a.count("sent") == 0  # the series exist from the first scrape
    body = a.client.post("/v1/errors", json=QUOTA).json()
    assert (body["class"], body["provider"]) == ("ai_credits", "openai")
    assert body["notification"] == {"status": "queued", "route": "ai-credits-user", "channels": ["user-email"]}
    again = a.client.post("/v1/errors", json=QUOTA).json()["notification"]
    assert again == {"status": "throttled", "route": "ai-credits-user", "channels": ["user-email"]}
    unrouted = a.client.post("/v1/errors", json={"message": "something odd", "context": {"user_email": USER}})
    assert unrouted.json()["notification"] == {"status": "none", "route": None, "channels": []}
    a.stop()  # lifespan end: the queue drains before the app stops
    [message] = server.mailbox.messages
    assert (message["To"], message["Subject"]) == (USER, "AI credits depleted at OpenAI")
    assert a.count("sent") == 1 and a.count("throttled") == 1


@pytest.mark.parametrize("smtp", ["dead", "silent"])
def test_the_request_path_does_not_wait_for_smtp(app: Callable[..., App], silent_smtp: tuple[str, int],
                                                 smtp_server: Callable[..., SmtpServer], smtp: str) -> None:
    target = smtp_server(start=False) if smtp == "dead" else silent_smtp
    a = app(**smtp_at(target), smtp_timeout_seconds=60, shutdown_grace_seconds=0.2)
    started = time.perf_counter()
    response = a.client.post("/v1/errors", json=QUOTA)
    elapsed = time.perf_counter() - started
    assert response.json()["notification"]["status"] == "queued"
    assert elapsed < 1.0 and a.count("sent") == 0  # answered while the send is still failing or hanging


def test_a_full_queue_drops_and_fails_readiness(app: Callable[..., App], silent_smtp: tuple[str, int],
                                                notify_log: list[logging.LogRecord]) -> None:
    a = app(**smtp_at(silent_smtp), smtp_timeout_seconds=60, notify_queue_size=1, notify_workers=1,
            shutdown_grace_seconds=0.2)
    assert a.client.get("/readyz").status_code == 200
    statuses = []
    for n in range(3):
        report = {**QUOTA, "context": {"user_email": f"user{n}@example.com"}}
        statuses.append(a.client.post("/v1/errors", json=report).json()["notification"]["status"])
    # the first is in flight (the server never answers) or still queued; either way one more fills the queue
    assert statuses[-1] == "dropped" and a.count("dropped") >= 1
    ready = a.client.get("/readyz")
    assert ready.status_code == 503 and ready.headers["content-type"] == "application/problem+json"
    assert "notification queue is full" in ready.json()["detail"]
    a.stop()
    assert a.count("failed") == 3 - a.count("dropped")  # not delivered before shutdown: counted, and logged
    assert sum(r.getMessage() == "notification failed" for r in notify_log) == a.count("failed")


def test_without_smtp_the_email_is_written_to_the_log(app: Callable[..., App],
                                                      notify_log: list[logging.LogRecord]) -> None:
    a = app()
    assert a.client.post("/v1/errors", json=QUOTA).json()["notification"]["status"] == "queued"
    a.stop()
    [record] = [r for r in notify_log if r.getMessage() == "notification"]
    assert (record.to, record.subject) == ([USER], "AI credits depleted at OpenAI")  # type: ignore[attr-defined]
    assert "You exceeded your current quota" in record.text and "<h2>" in record.html  # type: ignore[attr-defined]
    assert a.count("sent") == 1


def test_a_fresh_serve_shows_the_email_in_its_log(spawn: Callable[..., Process]) -> None:
    server = spawn("--no-reload-rules", ERRTRIAGE_SMTP_HOST="")
    assert httpx.post(f"{server.url}/v1/errors", json=QUOTA).json()["notification"]["status"] == "queued"
    assert server.stop() == 0  # SIGTERM drains the queue
    records = [json.loads(line) for line in server.log.read_text().splitlines() if line.startswith("{")]
    [email] = [r for r in records if r.get("msg") == "notification"]
    assert (email["to"], email["subject"], email["channel"]) == ([USER], "AI credits depleted at OpenAI",
                                                                  "user-email")
    assert "ERRTRIAGE_SMTP_HOST is not set" in email["note"]


def test_channel_test_sends_through_smtp(app: Callable[..., App], smtp_server: Callable[..., SmtpServer]) -> None:
    server = smtp_server()
    a = app(**smtp_at(server))
    response = a.client.post("/v1/notifications/test", json={"channel": "user-email", "to": "ops@example.com"},
                             headers=ADMIN)
    assert response.status_code == 200
    body = response.json()
    assert (body["channel"], body["outcome"]) == ("user-email", "sent")
    assert f"SMTP {server.host}:{server.port}" in body["detail"]
    [message] = server.mailbox.messages
    assert (message["To"], message["Subject"]) == ("ops@example.com", "errtriage test message (user-email)")
    assert a.count("sent") == 0  # test messages are not notifications


def test_channel_test_reports_a_failure_after_capped_retries(app: Callable[..., App], fake_clock: FakeClock,
                                                             smtp_server: Callable[..., SmtpServer]) -> None:
    a = app(**smtp_at(smtp_server(start=False)), notify_test_deadline_seconds=10)
    body = a.client.post("/v1/notifications/test", json={"channel": "user-email", "to": USER}, headers=ADMIN).json()
    assert (body["outcome"], body["detail"].split(":")[0]) == ("failed", "SMTP connection failed")
    assert 0 < sum(fake_clock.sleeps) <= 10


def test_channel_test_without_an_address_is_no_recipient(app: Callable[..., App]) -> None:
    body = app().client.post("/v1/notifications/test", json={"channel": "user-email"}, headers=ADMIN).json()
    assert body == {"channel": "user-email", "outcome": "no_recipient",
                    "detail": 'no address: pass "to", or give the channel a fixed "to"'}


@pytest.mark.parametrize(("payload", "headers", "status"), [
    ({"channel": "pager"}, ADMIN, 404),
    ({"channel": "user-email", "to": "not an address"}, ADMIN, 422),
    ({"channel": "user-email", "extra": 1}, ADMIN, 422),
    ({"channel": "user-email"}, {}, 401),
    ({"channel": "user-email"}, {"Authorization": "Bearer wrong"}, 401),
])
def test_channel_test_problems(app: Callable[..., App], payload: dict[str, Any], headers: dict[str, str],
                               status: int) -> None:
    response = app().client.post("/v1/notifications/test", json=payload, headers=headers)
    assert response.status_code == status and response.headers["content-type"] == "application/problem+json"
    if status == 404:
        assert response.json()["detail"] == "No channel 'pager' in the loaded routes."
    if status == 422 and "to" in payload:
        assert [e["loc"] for e in response.json()["errors"]] == [["to"]]


def test_channel_test_is_disabled_without_an_admin_token(app: Callable[..., App]) -> None:
    response = app(admin_token=None).client.post("/v1/notifications/test", json={"channel": "user-email"})
    assert response.status_code == 403


def test_channel_test_is_declared_in_openapi(app: Callable[..., App]) -> None:
    operation = app().client.get("/openapi.json").json()["paths"]["/v1/notifications/test"]["post"]
    assert {"200", "401", "403", "404", "422"} <= set(operation["responses"])
    assert operation["responses"]["404"]["content"]["application/problem+json"]["schema"] == {
        "$ref": "#/components/schemas/Problem"}
    assert operation["requestBody"]["content"]["application/json"]["schema"]["required"] == ["channel"]
