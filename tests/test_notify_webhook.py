"""Webhooks: signed JSON POSTs, checked by a receiver the way an operator's service would check them,
against httpx's MockTransport and a real local HTTP server."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from collections.abc import Callable

import httpx
import pytest
from prometheus_client import CollectorRegistry

from service.metrics import Metrics
from service.models import Classification, NotificationOutcome, Recovery
from service.normalize import NormalizedError
from service.notify.outgoing import Outgoing
from service.notify.pipeline import Notifier
from service.notify.render import Rendered
from service.notify.webhook import WebhookChannel, retry_after
from service.rules.engine import Ruleset
from service.schema.notify import WebhookChannelSpec
from service.settings import Settings
from tests.conftest import FakeClock

pytestmark = pytest.mark.anyio
SECRET = "shared-signing-key"
HOOK_URL = "https://hooks.example.com/services/T0/B0/s3cr3t-path"
ENV = {"ERRTRIAGE_TEST_HOOK_URL": HOOK_URL, "ERRTRIAGE_TEST_HOOK_SECRET": SECRET,
       "ERRTRIAGE_TEST_HOOK_AUTH": "Bearer receiver-token-123"}
OPENAI_KEY = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0" * 2


def verified(request_body: bytes, signature: str | None, secret: str = SECRET) -> bool:
    """What a receiver does: recompute the HMAC over the raw body and compare in constant time."""
    expected = "sha256=" + hmac.new(secret.encode(), request_body, hashlib.sha256).hexdigest()
    return signature is not None and hmac.compare_digest(expected, signature)


class Hook:
    """The base rules' `hook` channel. Replies come from httpx's MockTransport unless `mock` is False
    (then requests go over the network to the URL in the environment)."""

    def __init__(self, settings: Settings, clock: FakeClock, ruleset: Ruleset,
                 replies: list[httpx.Response | Exception], environ: dict[str, str], mock: bool = True) -> None:
        self.requests: list[httpx.Request] = []
        self.replies = replies
        self.registry = CollectorRegistry()
        self.ruleset = ruleset
        self.notifier = Notifier(settings, Metrics(self.registry), clock=clock, sleep=clock.sleep,
                                 jitter=lambda: 0.5, environ=environ,
                                 http_transport=httpx.MockTransport(self.answer) if mock else None)

    def answer(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.replies.pop(0) if self.replies else httpx.Response(200)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def report(self, message: str = "Rate limit reached for gpt-4o") -> NotificationOutcome:
        classification = Classification(id="n-7", class_="ai_provider", reason="rate_limited", provider="openai",
                                        provider_kind="ai", retryable=True, rule=None, recovery=Recovery(),
                                        rules_version="v")
        error = NormalizedError(message=message, context={"work_id": "w-9"})
        return self.notifier.dispatch(classification, error, self.ruleset)

    async def deliver(self) -> None:
        await self.notifier.start()
        await self.notifier.drain()
        await self.notifier.stop(1)

    def count(self, outcome: str) -> float:
        labels = {"channel": "hook", "class": "ai_provider", "outcome": outcome}
        return self.registry.get_sample_value("errtriage_notifications_total", labels) or 0.0


@pytest.fixture
def hook(notify_settings: Callable[..., Settings], fake_clock: FakeClock,
         notify_rules: Ruleset) -> Callable[..., Hook]:
    def make(*replies: httpx.Response | Exception, environ: dict[str, str] | None = None) -> Hook:
        return Hook(notify_settings(), fake_clock, notify_rules, list(replies), ENV if environ is None else environ)

    return make


async def test_posts_the_templated_body_signed_with_the_shared_secret(hook: Callable[..., Hook]) -> None:
    h = hook()
    assert h.report().status == "queued"
    await h.deliver()
    [request] = h.requests
    assert str(request.url) == HOOK_URL and request.method == "POST"
    assert request.headers["content-type"] == "application/json" and request.headers["x-team"] == "platform"
    assert request.headers["authorization"] == "Bearer receiver-token-123"
    assert verified(request.content, request.headers.get("x-errtriage-signature"))
    assert not verified(request.content, request.headers.get("x-errtriage-signature"), secret="another-key")
    assert json.loads(request.content) == {"text": "Rate limited at OpenAI: Rate limit reached for gpt-4o",
                                           "class": "ai_provider", "work": "w-9"}
    assert h.count("sent") == 1


async def test_429_honours_retry_after_then_delivers(hook: Callable[..., Hook], fake_clock: FakeClock) -> None:
    h = hook(httpx.Response(429, headers={"Retry-After": "120"}), httpx.Response(503))
    h.report()
    await h.deliver()
    assert len(h.requests) == 3 and fake_clock.sleeps == [120, 1.5]
    assert h.count("retried") == 2 and h.count("sent") == 1
    assert len({r.headers["x-errtriage-signature"] for r in h.requests}) == 1  # same body, same signature


async def test_timeouts_and_connection_errors_are_retried(hook: Callable[..., Hook]) -> None:
    h = hook(httpx.ReadTimeout("slow"), httpx.ConnectError("refused"))
    h.report()
    await h.deliver()
    assert len(h.requests) == 3 and h.count("retried") == 2 and h.count("sent") == 1


async def test_a_4xx_other_than_408_and_429_is_final(hook: Callable[..., Hook],
                                                     notify_log: list[logging.LogRecord]) -> None:
    h = hook(httpx.Response(400))
    h.report()
    await h.deliver()
    assert len(h.requests) == 1 and h.count("failed") == 1 and h.count("retried") == 0
    [failure] = [r for r in notify_log if r.getMessage() == "notification failed"]
    assert failure.error == "webhook answered HTTP 400"  # type: ignore[attr-defined]


async def test_a_missing_secret_env_var_fails_without_sending(hook: Callable[..., Hook],
                                                              notify_log: list[logging.LogRecord]) -> None:
    h = hook(environ={"ERRTRIAGE_TEST_HOOK_URL": HOOK_URL, "ERRTRIAGE_TEST_HOOK_AUTH": "x"})
    h.report()
    await h.deliver()
    assert h.requests == [] and h.count("failed") == 1
    [failure] = [r for r in notify_log if r.getMessage() == "notification failed"]
    assert failure.error == "environment variable ERRTRIAGE_TEST_HOOK_SECRET is not set"  # type: ignore[attr-defined]


async def test_the_url_and_payload_secrets_never_reach_the_logs_or_the_receiver(
        hook: Callable[..., Hook], notify_log: list[logging.LogRecord]) -> None:
    h = hook(*[httpx.ConnectError(f"cannot reach {HOOK_URL}")] * 50)
    h.report(f"Rate limit reached; key {OPENAI_KEY}")
    await h.deliver()
    assert h.count("failed") == 1 and all(OPENAI_KEY.encode() not in r.content for r in h.requests)
    logged = " ".join(repr(r.__dict__) for r in notify_log)
    assert "s3cr3t-path" not in logged and OPENAI_KEY not in logged and SECRET not in logged
    assert "$ERRTRIAGE_TEST_HOOK_URL" in logged


async def test_without_a_json_template_the_default_body_is_signed_too() -> None:
    seen: list[httpx.Request] = []
    spec = WebhookChannelSpec(id="plain", type="webhook", url_env="HOOK", secret_env="KEY")
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda r: seen.append(r) or httpx.Response(204))) as c:
        channel = WebhookChannel(spec, lambda: c, {"HOOK": "https://example.com/h", "KEY": SECRET}, lambda: 0.0)
        rendered = Rendered(subject="AI provider error", text="body", html=None, body=None)
        await channel.send(Outgoing("n-1", "r", "plain", "ai_provider", (), rendered,
                                    {"class": "ai_provider", "reason": "rate_limited", "message": "slow down"}))
    body = json.loads(seen[0].content)
    assert (body["id"], body["class"], body["subject"], body["message"]) == (
        "n-1", "ai_provider", "AI provider error", "slow down")
    assert verified(seen[0].content, seen[0].headers["x-errtriage-signature"])


async def test_delivers_to_a_real_local_http_receiver(notify_settings: Callable[..., Settings],
                                                      fake_clock: FakeClock, notify_rules: Ruleset) -> None:
    received: list[tuple[dict[str, str], bytes]] = []

    async def receive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")[1:-2]
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        body = await reader.readexactly(int(headers["content-length"]))
        received.append((headers, body))
        writer.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(receive, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    environ = {**ENV, "ERRTRIAGE_TEST_HOOK_URL": f"http://127.0.0.1:{port}/hook"}
    h = Hook(notify_settings(), fake_clock, notify_rules, [], environ, mock=False)
    async with server:
        h.report()
        await h.deliver()
    [(headers, body)] = received
    assert verified(body, headers["x-errtriage-signature"]) and json.loads(body)["class"] == "ai_provider"
    assert h.count("sent") == 1


def test_retry_after_reads_seconds_and_dates_and_refuses_the_rest() -> None:
    assert retry_after("120", now=0.0) == 120.0
    assert retry_after("Thu, 01 Jan 1970 00:01:00 GMT", now=30.0) == 30.0
    for unreadable in ("¹", "soon", "", None):  # '¹'.isdigit() is True, float('¹') raises
        assert retry_after(unreadable, now=0.0) is None
