"""Channels: what a channel spec of the rule tables becomes at send time.

    email   -> EmailChannel through ERRTRIAGE_SMTP_*, or LogChannel when no SMTP host is set
    webhook -> WebhookChannel on the notifier's shared httpx client
    log     -> LogChannel

Every channel has one method, `send(Outgoing)`, which returns or raises DeliveryError
(with .transient); channels never sleep or loop, the retry stage does.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from typing import Protocol

import httpx

from service.notify.logchannel import LogChannel
from service.notify.mail import EmailChannel, SmtpConfig
from service.notify.outgoing import Outgoing
from service.notify.webhook import WebhookChannel
from service.schema.notify import ChannelSpec, EmailChannelSpec, WebhookChannelSpec
from service.settings import Settings

NO_SMTP = "ERRTRIAGE_SMTP_HOST is not set"
NO_SMTP_NOTE = f"{NO_SMTP}: this email was written to the log instead of being sent"


class Channel(Protocol):
    async def send(self, out: Outgoing) -> None: ...


class Channels:
    """Builds channels from specs; owns the httpx client the webhooks share, made on the first
    webhook send (making one loads httpcore and a TLS context: tens of milliseconds of every
    start, for a service whose routes may have no webhook at all)."""

    def __init__(self, settings: Settings, *, environ: Mapping[str, str], clock: Callable[[], float],
                 logger: logging.Logger, http_transport: httpx.AsyncBaseTransport | None = None,
                 smtp_tls_context: ssl.SSLContext | None = None) -> None:
        self._smtp = SmtpConfig.from_settings(settings, smtp_tls_context)
        self._environ = environ
        self._clock = clock
        self._logger = logger
        self._http_transport = http_transport
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(transport=self._http_transport, follow_redirects=False)
        return self._client

    def build(self, spec: ChannelSpec) -> Channel:
        if isinstance(spec, EmailChannelSpec):
            if self._smtp is None:
                return LogChannel(self._logger, NO_SMTP_NOTE)
            return EmailChannel(self._smtp, self._clock)
        if isinstance(spec, WebhookChannelSpec):
            return WebhookChannel(spec, self.client, self._environ, self._clock)
        return LogChannel(self._logger)

    def describe(self, spec: ChannelSpec) -> str:
        """Where a send through this channel goes, for operators (no secrets)."""
        if isinstance(spec, EmailChannelSpec):
            return self._smtp.describe() if self._smtp is not None else f"the log ({NO_SMTP})"
        if isinstance(spec, WebhookChannelSpec):
            return f"POST to ${spec.url_env}" + (f", signed with ${spec.secret_env}" if spec.secret_env else "")
        return "the log"

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
