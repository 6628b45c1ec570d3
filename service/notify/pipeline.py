"""The notifier: small stages, alertmanager style, off the request path.

    dispatch() (synchronous, never blocks; called by /v1/errors):
        route -> silence -> recipient -> queue stage (queue.py: throttle + bounded queue in this
        process, or, with ERRTRIAGE_REDIS_URL, an outbox to the shared throttle and stream)
    N worker tasks:
        render -> retry (transient failures only, backoff + jitter, deadline) -> channel

Routing runs before the silence check so a silenced notification is counted under the
channels its route names. Delivery is at least once: a send that times out after the
server accepted the mail is retried. Clock, sleep, jitter, environment, the httpx
transport and the SMTP TLS context are injected (tests need no patching and no sleeps).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any

import httpx

from service.errors import DeliveryError
from service.metrics import Metrics
from service.models import Classification, NotificationOutcome, NotificationStatus
from service.normalize import NormalizedError
from service.notify.channels import Channels
from service.notify.config import NotifyConfig
from service.notify.delivery import Deliverer, Delivery
from service.notify.probe import ProbeResult, probe_message, probe_recipients
from service.notify.queue import DeliveryQueue, MemoryQueue, Rules
from service.notify.retry import Backoff, Retrier
from service.notify.variables import group_of
from service.redact import redact
from service.schema.notify import ChannelSpec, EmailChannelSpec, RouteSpec, checked_address
from service.settings import Settings

# What a route's outcome says when its channels differ: the first of these any channel reached.
_RANK = {status: rank for rank, status in enumerate((NotificationStatus.queued, NotificationStatus.throttled,
                                                      NotificationStatus.dropped, NotificationStatus.no_recipient))}


def valid_address(address: str) -> str | None:
    """The normalized address, or None when it is not a valid email address."""
    try:
        return checked_address(address)
    except ValueError:
        return None


def recipients_for(spec: ChannelSpec, user_email: str | None,
                   valid: Callable[[str], str | None]) -> tuple[str, ...] | None:
    """The channel's fixed `to`, else the reporting user's valid address; None when there is none.
    Channels other than email need no recipient."""
    if not isinstance(spec, EmailChannelSpec):
        return ()
    if spec.to:
        return tuple(spec.to)
    address = valid(user_email) if user_email else None
    return (address,) if address is not None else None


def throttle_key(route: RouteSpec, channel_id: str, group: tuple[str | None, ...]) -> Hashable:
    return route.id, channel_id, group


_NOTHING = NotificationOutcome(status=NotificationStatus.none)


@functools.lru_cache(maxsize=1024)
def _outcome(status: NotificationStatus, route: str, channels: tuple[str, ...]) -> NotificationOutcome:
    """Outcomes repeat (a route's ids come from the rule tables) and are frozen: built once each."""
    return NotificationOutcome(status=status, route=route, channels=list(channels))


def _email_of(error: NormalizedError) -> str | None:
    address = error.context.get("user_email")
    return address if isinstance(address, str) else None


class Notifier:
    def __init__(self, settings: Settings, metrics: Metrics, *, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
                 jitter: Callable[[], float] | None = None, environ: Mapping[str, str] | None = None,
                 http_transport: httpx.AsyncBaseTransport | None = None,
                 smtp_tls_context: ssl.SSLContext | None = None) -> None:
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._logger = logging.getLogger("errtriage.notify")
        self._valid_address = functools.lru_cache(maxsize=4096)(valid_address)  # validation costs ~50 µs
        self._channels = Channels(settings, environ=os.environ if environ is None else environ, clock=clock,
                                  logger=self._logger, http_transport=http_transport,
                                  smtp_tls_context=smtp_tls_context)
        backoff = Backoff(settings.notify_retry_base_seconds, settings.notify_retry_max_seconds,
                          jitter or random.Random().random)
        self._deliverer = Deliverer(self._channels, Retrier(backoff, clock, sleep), metrics, clock, self._logger)
        self._queue: DeliveryQueue
        if settings.redis_url:
            from service.notify.redis_queue import RedisQueue  # the redis client is imported only when used

            self._queue = RedisQueue(settings, metrics, self._deliverer, self._logger, clock)
        else:
            self._queue = MemoryQueue(settings, metrics, self._deliverer, self._logger)

    # -- the request path -------------------------------------------------------------------------

    def dispatch(self, classification: Classification, error: NormalizedError, ruleset: Any) -> NotificationOutcome:
        """Run the synchronous stages for one classified report. Never blocks, never raises for delivery."""
        config: NotifyConfig | None = ruleset.notify
        route = config.route_for(classification, error) if config is not None else None
        if config is None or route is None:
            return _NOTHING
        now = self._clock()
        if config.silence_for(classification, error.source, now) is not None:
            for channel_id in route.channels:
                self._count(channel_id, classification.class_, "silenced")
            return _outcome(NotificationStatus.silenced, route.id, tuple(route.channels))
        group = group_of(route.group_by, classification, error)
        statuses = [(cid, self._channel_stages(config, route, config.channels[cid], classification, error, group, now))
                    for cid in route.channels]
        first = min((status for _, status in statuses), key=_RANK.__getitem__)
        return _outcome(first, route.id, tuple(cid for cid, status in statuses if status is first))

    def _channel_stages(self, config: NotifyConfig, route: RouteSpec, spec: ChannelSpec,
                        classification: Classification, error: NormalizedError, group: tuple[str | None, ...],
                        now: float) -> NotificationStatus:
        recipients = recipients_for(spec, _email_of(error), self._valid_address)
        if recipients is None:
            self._count(spec.id, classification.class_, "no_recipient")
            return NotificationStatus.no_recipient
        item = Delivery(classification, error, route.id, config.provider_names.get(classification.provider or ""),
                        spec, config.templates[route.template], recipients, now,
                        now + self._settings.notify_deadline_seconds, throttle_key(route, spec.id, group),
                        route.throttle)
        return self._queue.submit(item)

    def _count(self, channel_id: str, class_id: str, outcome: str) -> None:
        self._metrics.notification_count(channel_id, class_id, outcome).inc()

    def queue_full(self) -> bool:
        return self._queue.full()

    def state(self) -> dict[str, str]:
        """What /readyz reports about the queue's backing store ({"redis": "up"} with Redis)."""
        return self._queue.state()

    # -- the workers ------------------------------------------------------------------------------

    async def start(self, rules: Rules | None = None) -> None:
        """Start the worker tasks (idempotent). `rules` returns the serving Ruleset: with Redis, a
        stored notification's route, channel and template are looked up in it when it is delivered."""
        await self._queue.start(rules or (lambda: None))

    async def drain(self) -> None:
        """Wait until every queued notification has been delivered or has finally failed."""
        await self._queue.drain()

    async def stop(self, grace: float) -> None:
        """Stop taking notifications, drain for up to `grace` seconds, then stop the workers
        (queue.py says what becomes of what is left), and close the channels."""
        await self._queue.stop(grace)
        await self._channels.aclose()

    # -- the operator's test message --------------------------------------------------------------

    async def send_test(self, channel_id: str, to: str | None, ruleset: Any) -> ProbeResult | None:
        """Send a test message through one channel now, with retries capped by
        settings.notify_test_deadline_seconds. None if the channel does not exist.
        Raises ValueError if `to` is not a valid address. Not counted in the metrics."""
        config: NotifyConfig | None = ruleset.notify
        spec = config.channels.get(channel_id) if config is not None else None
        if spec is None:
            return None
        recipients = probe_recipients(spec, to)
        if recipients is None:
            return ProbeResult(channel=spec.id, outcome="no_recipient",
                               detail='no address: pass "to", or give the channel a fixed "to"')
        now = self._clock()
        out = probe_message(spec, recipients, f"test-{uuid.uuid4().hex}", now)
        deadline = now + self._settings.notify_test_deadline_seconds
        try:
            attempts = await self._deliverer.send(spec, out, deadline, lambda exc, delay: None)
        except DeliveryError as exc:
            self._logger.warning("test notification failed", extra={"channel": spec.id, "error": redact(str(exc))})
            return ProbeResult(channel=spec.id, outcome="failed", detail=redact(str(exc)))
        where = self._channels.describe(spec)
        self._logger.info("test notification sent", extra={"channel": spec.id, "to": list(recipients)})
        return ProbeResult(channel=spec.id, outcome="sent", detail=f"delivered to {where}; attempts: {attempts}")
