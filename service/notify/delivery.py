"""What a worker does with one queued delivery: render -> retry stage -> channel, then count it.

Outcomes counted here: `sent` (plus the latency from dispatch), `retried` (each retry),
`failed` (final: permanent error, deadline passed, or not delivered before shutdown).
A final failure is always logged with the whole notification (redacted), never silent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from service.errors import DeliveryError
from service.metrics import Metrics
from service.models import Classification
from service.normalize import NormalizedError
from service.notify.channels import Channels
from service.notify.outgoing import Outgoing
from service.notify.render import TemplateSet
from service.notify.retry import Retrier
from service.notify.variables import template_variables
from service.redact import redact
from service.schema.notify import ChannelSpec


@dataclass(frozen=True, slots=True)
class Delivery:
    """One notification for one channel, as queued by dispatch(). The template variables are
    built (and redacted) by the worker, off the request path."""

    classification: Classification
    error: NormalizedError
    route: str
    provider_name: str | None
    channel: ChannelSpec
    template: TemplateSet
    recipients: tuple[str, ...]
    created: float
    deadline: float
    throttle_key: Hashable
    throttle_window: float = 0.0

    @property
    def notification_id(self) -> str:
        return self.classification.id

    @property
    def class_(self) -> str:
        return self.classification.class_

    def render(self) -> Outgoing:
        """Raises DeliveryError (permanent) if the template fails."""
        variables = template_variables(self.classification, self.error, self.route, self.provider_name)
        return Outgoing(self.notification_id, self.route, self.channel.id, self.class_, self.recipients,
                        self.template.render(variables), variables)


class Deliverer:
    def __init__(self, channels: Channels, retrier: Retrier, metrics: Metrics, clock: Callable[[], float],
                 logger: logging.Logger) -> None:
        self._channels = channels
        self._retrier = retrier
        self._metrics = metrics
        self._clock = clock
        self._logger = logger

    def _count(self, item: Delivery, outcome: str) -> None:
        self._metrics.notification_count(item.channel.id, item.class_, outcome).inc()

    async def deliver(self, item: Delivery) -> None:
        """Never raises for a failed send (it is counted and logged); cancellation propagates."""
        try:
            out = item.render()
        except DeliveryError as exc:
            self.fail(item, None, str(exc))
            return
        try:
            attempts = await self.send(item.channel, out, item.deadline,
                                       lambda exc, delay: self._retried(item, exc, delay))
        except DeliveryError as exc:
            self.fail(item, out, str(exc))
            return
        except Exception as exc:  # a bug in a channel must not kill the worker; it is logged with its traceback
            self._logger.exception("notification channel crashed", extra={"channel": item.channel.id})
            self.fail(item, out, f"{type(exc).__name__}: {exc}")
            return
        self._count(item, "sent")
        self._metrics.delivery_seconds.labels(item.channel.id).observe(max(0.0, self._clock() - item.created))
        self._logger.info("notification sent", extra={"notification_id": item.notification_id,
                                                      "channel": item.channel.id, "route": item.route,
                                                      "attempts": attempts})

    async def send(self, spec: ChannelSpec, out: Outgoing, deadline: float,
                   on_retry: Callable[[DeliveryError, float], None]) -> int:
        """The retry stage around one channel. Returns the attempts made; raises the final DeliveryError."""
        channel = self._channels.build(spec)
        return await self._retrier.run(lambda: channel.send(out), deadline, on_retry)

    def _retried(self, item: Delivery, exc: DeliveryError, delay: float) -> None:
        self._count(item, "retried")
        self._logger.info("notification send failed; retrying", extra={
            "notification_id": item.notification_id, "channel": item.channel.id,
            "error": redact(str(exc)), "retry_in_seconds": round(delay, 3)})

    def fail(self, item: Delivery, out: Outgoing | None, reason: str) -> None:
        """Count a final failure and log it with everything that was to be sent."""
        notification = out.summary() if out is not None else {
            "notification_id": item.notification_id, "route": item.route, "channel": item.channel.id,
            "class": item.class_, "to": list(item.recipients)}
        self.give_up(item.channel.id, item.class_, notification, reason)

    def give_up(self, channel_id: str, class_id: str, notification: Mapping[str, object], reason: str) -> None:
        """Count and log a final failure of a notification that may not even be a Delivery any more
        (a stored entry whose route or channel a reload removed)."""
        self._metrics.notification_count(channel_id, class_id, "failed").inc()
        self._logger.error("notification failed", extra={"error": redact(reason), "notification": notification})
