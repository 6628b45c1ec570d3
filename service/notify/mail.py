"""The `email` channel: one EmailMessage per notification, sent through aiosmtplib.

Header safety: every header value is either ours (ids from the rule tables, the
settings' From) or passed through `one_line`, and the message is built with
email.message.EmailMessage, which refuses CR/LF in a header value; recipients were
validated by email-validator before they got here. One send is one SMTP session; the
retry stage decides whether to try again from the DeliveryError raised here.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid, parseaddr

import aiosmtplib

from service.errors import DeliveryError, DeliveryTimeout
from service.notify.outgoing import Outgoing
from service.notify.render import one_line
from service.settings import Settings


@dataclass(frozen=True)
class SmtpConfig:
    host: str
    port: int
    tls: str  # none | starttls | tls
    username: str | None
    password: str | None
    sender: str
    timeout: float
    tls_context: ssl.SSLContext | None = None

    @classmethod
    def from_settings(cls, settings: Settings, tls_context: ssl.SSLContext | None) -> SmtpConfig | None:
        """None when no ERRTRIAGE_SMTP_HOST is set (email then goes to the log)."""
        if not settings.smtp_host:
            return None
        password = settings.smtp_password.get_secret_value() if settings.smtp_password is not None else None
        return cls(settings.smtp_host, settings.smtp_port, settings.smtp_tls, settings.smtp_username, password,
                   settings.smtp_from, settings.smtp_timeout_seconds, tls_context)

    def describe(self) -> str:
        login = f", login as {self.username}" if self.username else ""
        return f"SMTP {self.host}:{self.port} (tls {self.tls}{login})"


def build_message(out: Outgoing, sender: str, now: float) -> EmailMessage:
    """Raises ValueError if a header value is unsafe (it never is after one_line and validation)."""
    message = EmailMessage(policy=policy.SMTP)
    envelope = parseaddr(sender)[1]
    message["From"] = sender
    message["To"] = [Address(addr_spec=address) for address in out.recipients]
    message["Subject"] = one_line(out.rendered.subject)
    message["Date"] = format_datetime(datetime.fromtimestamp(now, UTC))
    message["Message-ID"] = make_msgid("errtriage", domain=envelope.rpartition("@")[2] or "localhost")
    message["Auto-Submitted"] = "auto-generated"
    message["X-Errtriage-Id"] = one_line(out.notification_id)
    message["X-Errtriage-Class"] = one_line(out.class_)
    if out.route:
        message["X-Errtriage-Route"] = one_line(out.route)
    message.set_content(out.rendered.text)
    if out.rendered.html is not None:
        message.add_alternative(out.rendered.html, subtype="html")
    return message


def delivery_error(exc: Exception) -> DeliveryError:
    """Map an SMTP or network failure to a DeliveryError: transient for timeouts, dropped
    connections and 4xx replies; permanent for 5xx replies and TLS/certificate problems."""
    if isinstance(exc, ssl.SSLError | ssl.CertificateError):
        return DeliveryError(f"TLS failed: {exc}", transient=False)
    if isinstance(exc, TimeoutError):
        return DeliveryTimeout(f"SMTP timed out: {exc}")
    if isinstance(exc, aiosmtplib.SMTPRecipientsRefused):
        codes = [refused.code for refused in exc.recipients]
        return DeliveryError(f"SMTP refused every recipient: {codes}", transient=any(400 <= c < 500 for c in codes))
    if isinstance(exc, aiosmtplib.SMTPResponseException):
        return DeliveryError(f"SMTP replied {exc.code} {exc.message}", transient=400 <= exc.code < 500)
    if isinstance(exc, ConnectionError):
        return DeliveryError(f"SMTP connection failed: {exc}", transient=True)
    if isinstance(exc, aiosmtplib.SMTPException):
        return DeliveryError(f"SMTP failed: {exc}", transient=False)
    return DeliveryError(f"SMTP network error: {exc}", transient=True)  # OSError: DNS, unreachable host


class EmailChannel:
    def __init__(self, smtp: SmtpConfig, clock: Callable[[], float]) -> None:
        self._smtp = smtp
        self._clock = clock

    async def send(self, out: Outgoing) -> None:
        """Raises DeliveryError (DeliveryTimeout past the SMTP timeout)."""
        smtp = self._smtp
        message = build_message(out, smtp.sender, self._clock())
        try:
            await aiosmtplib.send(
                message, sender=parseaddr(smtp.sender)[1], recipients=list(out.recipients),
                hostname=smtp.host, port=smtp.port, username=smtp.username, password=smtp.password,
                use_tls=smtp.tls == "tls", start_tls=smtp.tls == "starttls", timeout=smtp.timeout,
                tls_context=smtp.tls_context,
            )
        except (aiosmtplib.SMTPException, OSError) as exc:
            raise delivery_error(exc) from exc
