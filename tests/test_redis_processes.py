"""Several `errtriage serve` processes on one real redis-server and one aiosmtpd, over real HTTP:
one email for a burst spread over two processes, nothing lost when the process holding the
notifications is SIGKILLed during an SMTP outage or when Redis restarts, and /v1/errors as fast
with Redis frozen (SIGSTOP)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from service.notify.redis_queue import GROUP, STREAM
from tests.conftest import SmtpServer
from tests.servers import Process, RedisServer

QUOTA = ("Error code: 429 - {'error': {'message': 'You exceeded your current quota, please check your plan and "
         "billing details.', 'type': 'insufficient_quota', 'param': None, 'code': 'insufficient_quota'}}")
CLAIM_SECONDS = 1.0


def until(condition: Callable[[], bool], timeout: float = 20, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def metric(proc: Process, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`, from the process's /metrics."""
    text = httpx.get(f"{proc.url}/metrics", timeout=5).text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name and labels.items() <= sample.labels.items())


def report(proc: Process, user: str = "dev@example.com") -> dict[str, Any]:
    response = httpx.post(f"{proc.url}/v1/errors", json={"message": QUOTA, "context": {"user_email": user}},
                          timeout=5)
    assert response.status_code == 200
    return response.json()  # type: ignore[no-any-return]


def arrived(smtp: SmtpServer) -> set[str]:
    return {str(m["X-Errtriage-Id"]) for m in smtp.mailbox.messages}


@pytest.fixture
def serve(spawn: Callable[..., Process]) -> Callable[..., Process]:
    def start(url: str, smtp: SmtpServer, **env: str) -> Process:
        return spawn(**{"ERRTRIAGE_REDIS_URL": url, "ERRTRIAGE_SMTP_HOST": smtp.host,
                        "ERRTRIAGE_SMTP_PORT": str(smtp.port), "ERRTRIAGE_SMTP_TLS": "none",
                        "ERRTRIAGE_SMTP_TIMEOUT_SECONDS": "2", "ERRTRIAGE_RELOAD_RULES": "false",
                        "ERRTRIAGE_NOTIFY_CLAIM_SECONDS": str(CLAIM_SECONDS),
                        "ERRTRIAGE_NOTIFY_RETRY_BASE_SECONDS": "0.1", "ERRTRIAGE_NOTIFY_RETRY_MAX_SECONDS": "0.3",
                        "ERRTRIAGE_SHUTDOWN_GRACE_SECONDS": "2", **env})

    return start


def test_thirty_identical_errors_over_two_processes_send_one_email(
        serve: Callable[..., Process], redis_url: str, smtp_server: Callable[..., SmtpServer]) -> None:
    smtp = smtp_server()
    a, b = serve(redis_url, smtp), serve(redis_url, smtp)
    statuses = [report(a if n % 2 else b)["notification"]["status"] for n in range(30)]
    # The shared verdict is taken in the background (`queued`); once a process has seen Redis refuse
    # the group, it answers further repeats `throttled` itself.
    assert statuses[0] == "queued" and set(statuses) <= {"queued", "throttled"}
    outcome = {"channel": "user-email", "class": "ai_credits"}
    until(lambda: sum(metric(p, "errtriage_notifications_total", outcome="throttled", **outcome)
                      for p in (a, b)) == 29, what="29 throttled, summed over the processes")
    until(lambda: sum(metric(p, "errtriage_notifications_total", outcome="sent", **outcome) for p in (a, b)) == 1,
          what="one sent")
    assert len(smtp.mailbox.messages) == 1
    assert [report(p)["notification"]["status"] for p in (a, b)] == ["throttled", "throttled"]
    ready = httpx.get(f"{a.url}/readyz").json()
    assert ready["redis"] == "up" and ready["status"] == "ready"


def test_a_process_killed_during_an_smtp_outage_loses_nothing(
        serve: Callable[..., Process], redis_url: str, smtp_server: Callable[..., SmtpServer]) -> None:
    smtp = smtp_server(start=False)  # SMTP down: nothing can be delivered yet
    holder = serve(redis_url, smtp, ERRTRIAGE_NOTIFY_WORKERS="25")
    ids = {report(holder, f"user{n}@example.com")["id"] for n in range(20)}
    assert len(ids) == 20
    client = redis.Redis.from_url(redis_url)
    until(lambda: [c["pending"] for c in client.xpending(STREAM, GROUP)["consumers"]] == [20],
          what="the holder reading all 20")
    survivor = serve(redis_url, smtp)
    since = time.monotonic()
    until(lambda: time.monotonic() - since > 3 * CLAIM_SECONDS, what="three claim periods")
    assert metric(survivor, "errtriage_notify_claims_total") == 0  # the live holder keeps its entries
    holder.proc.send_signal(signal.SIGKILL)
    holder.proc.wait(timeout=10)
    smtp.start()
    until(lambda: arrived(smtp) >= ids, timeout=30, what="all 20 through the survivor")
    assert metric(survivor, "errtriage_notify_claims_total") == 20
    until(lambda: client.xlen(STREAM) == 0 and client.xpending(STREAM, GROUP)["pending"] == 0,
          what="every entry acknowledged")
    client.close()


def test_a_redis_restart_loses_nothing_acknowledged(
        serve: Callable[..., Process], redis_server: Callable[..., RedisServer],
        smtp_server: Callable[..., SmtpServer]) -> None:
    store = redis_server()
    smtp = smtp_server(start=False)
    a, b = serve(store.url, smtp), serve(store.url, smtp)
    ids = {report(a if n % 2 else b, f"user{n}@example.com")["id"] for n in range(10)}
    client = redis.Redis.from_url(store.url)
    until(lambda: client.xlen(STREAM) == 10, what="10 entries acknowledged by Redis")
    client.close()
    store.stop(signal.SIGKILL)  # no shutdown save: only the append-only file keeps them
    more = {report(a, f"later{n}@example.com")["id"] for n in range(5)}  # held in the outbox meanwhile
    until(lambda: httpx.get(f"{a.url}/readyz").json().get("redis") == "down", what="/readyz saying down")
    assert httpx.get(f"{a.url}/readyz").status_code == 200  # still ready: it classifies without Redis
    store.start()
    with redis.Redis.from_url(store.url) as client:
        assert client.xlen(STREAM) >= 10  # replayed from the append-only file
    smtp.start()
    until(lambda: arrived(smtp) >= ids | more, timeout=30, what="all 15 delivered")
    assert sum(metric(p, "errtriage_redis_errors_total") for p in (a, b)) > 0


def test_a_frozen_redis_never_slows_v1_errors(
        serve: Callable[..., Process], redis_server: Callable[..., RedisServer],
        smtp_server: Callable[..., SmtpServer]) -> None:
    store = redis_server()
    smtp = smtp_server()
    proc = serve(store.url, smtp)
    report(proc, "warm@example.com")
    until(lambda: len(smtp.mailbox.messages) == 1, what="the warm-up email")
    store.pause()  # SIGSTOP: connections stay open, nothing answers
    try:
        slowest = 0.0
        for n in range(20):
            started = time.perf_counter()
            assert report(proc, f"frozen{n}@example.com")["notification"]["status"] == "queued"
            slowest = max(slowest, time.perf_counter() - started)
        assert slowest < 0.5, slowest
        assert metric(proc, "errtriage_errors_total", **{"class": "ai_credits"}) == 21
        assert metric(proc, "errtriage_notify_outbox_depth") == 20
    finally:
        store.resume()
    until(lambda: len(smtp.mailbox.messages) == 21, timeout=30, what="the 20 held notifications")
