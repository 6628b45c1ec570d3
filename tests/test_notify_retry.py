"""The retry stage, the throttle and the failure vocabulary of the channels, as units."""

from __future__ import annotations

import ssl

import aiosmtplib
import pytest

from service.errors import DeliveryError, DeliveryTimeout
from service.notify.mail import delivery_error
from service.notify.retry import Backoff, Retrier
from service.notify.throttle import Throttle
from service.notify.webhook import retry_after
from tests.conftest import FakeClock

pytestmark = pytest.mark.anyio


class Flaky:
    """Fails with the given errors in turn, then succeeds."""

    def __init__(self, *errors: DeliveryError) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)


def retrier(clock: FakeClock, jitter: float = 0.5) -> Retrier:
    return Retrier(Backoff(base=1.0, cap=60.0, jitter=lambda: jitter), clock, clock.sleep)


def test_backoff_doubles_with_jitter_and_a_cap() -> None:
    low = Backoff(1.0, 60.0, lambda: 0.0)
    high = Backoff(1.0, 60.0, lambda: 0.999999)
    assert [low.delay(n, None) for n in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert [round(high.delay(n, None), 3) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]


def test_backoff_never_retries_sooner_than_retry_after() -> None:
    backoff = Backoff(1.0, 60.0, lambda: 0.5)
    assert backoff.delay(0, 42.0) == 42.0 and backoff.delay(3, 1.0) == 6.0


async def test_transient_failures_are_retried_until_success(fake_clock: FakeClock) -> None:
    send = Flaky(DeliveryError("421 busy", transient=True), DeliveryTimeout("slow"))
    retries: list[tuple[str, float]] = []
    attempts = await retrier(fake_clock).run(send, fake_clock() + 600, lambda e, d: retries.append((str(e), d)))
    assert attempts == 3 and send.calls == 3
    assert retries == [("421 busy", 0.75), ("slow", 1.5)] and fake_clock.sleeps == [0.75, 1.5]


async def test_permanent_failure_is_not_retried(fake_clock: FakeClock) -> None:
    send = Flaky(DeliveryError("550 no such user", transient=False))
    with pytest.raises(DeliveryError, match="550"):
        await retrier(fake_clock).run(send, fake_clock() + 600, lambda e, d: None)
    assert send.calls == 1 and fake_clock.sleeps == []


async def test_retries_stop_at_the_deadline(fake_clock: FakeClock) -> None:
    start = fake_clock()
    send = Flaky(*[DeliveryError("down", transient=True)] * 100)
    with pytest.raises(DeliveryError, match="down"):
        await retrier(fake_clock).run(send, start + 600, lambda e, d: None)
    assert fake_clock() <= start + 600 and fake_clock() + 45 > start + 600  # gave up only when the next wait didn't fit
    assert 10 < send.calls < 20


async def test_a_retry_after_beyond_the_deadline_gives_up_at_once(fake_clock: FakeClock) -> None:
    send = Flaky(DeliveryError("429", transient=True, retry_after=3600))
    with pytest.raises(DeliveryError):
        await retrier(fake_clock).run(send, fake_clock() + 600, lambda e, d: None)
    assert fake_clock.sleeps == []


def test_throttle_window_and_release() -> None:
    throttle = Throttle(max_keys=100)
    assert throttle.admit("k", 60, 0) and not throttle.admit("k", 60, 59.9) and throttle.admit("k", 60, 60)
    throttle.release("k")
    assert throttle.admit("k", 60, 61)
    assert throttle.admit("k", 0, 61) and throttle.admit("k", 0, 61)  # window 0: never throttled


def test_throttle_memory_is_bounded() -> None:
    throttle = Throttle(max_keys=100)
    for n in range(1000):
        throttle.admit(n, 3600, float(n))
    assert len(throttle) == 100
    assert throttle.admit(0, 3600, 1000.0)  # the oldest groups were forgotten first
    assert not throttle.admit(999, 3600, 1000.0)


@pytest.mark.parametrize(("error", "transient", "kind"), [
    (aiosmtplib.SMTPResponseException(451, "try later"), True, DeliveryError),
    (aiosmtplib.SMTPResponseException(554, "rejected"), False, DeliveryError),
    (aiosmtplib.SMTPAuthenticationError(535, "bad credentials"), False, DeliveryError),
    (aiosmtplib.SMTPRecipientsRefused([aiosmtplib.SMTPRecipientRefused(450, "busy", "a@b.c")]), True, DeliveryError),
    (aiosmtplib.SMTPRecipientsRefused([aiosmtplib.SMTPRecipientRefused(550, "no", "a@b.c")]), False, DeliveryError),
    (aiosmtplib.SMTPConnectError("refused"), True, DeliveryError),
    (aiosmtplib.SMTPServerDisconnected("gone"), True, DeliveryError),
    (aiosmtplib.SMTPReadTimeoutError("slow"), True, DeliveryTimeout),
    (aiosmtplib.SMTPNotSupported("no STARTTLS"), False, DeliveryError),
    (ssl.SSLCertVerificationError("self-signed"), False, DeliveryError),
    (OSError("network unreachable"), True, DeliveryError),
])
def test_smtp_failures_map_to_transient_or_permanent(error: Exception, transient: bool,
                                                     kind: type[DeliveryError]) -> None:
    mapped = delivery_error(error)
    assert type(mapped) is kind and mapped.transient is transient


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = 1_800_000_000.0
    assert retry_after("120", now) == 120
    assert retry_after("Fri, 15 Jan 2027 08:01:00 GMT", now) == 60
    assert retry_after("Fri, 15 Jan 2027 07:00:00 GMT", now) == 0
    assert retry_after("soon", now) is None and retry_after(None, now) is None
