"""The `webhook` channel: a JSON POST through httpx, signed so the receiver can verify it.

The signature is `sha256=<hex HMAC-SHA256 of the exact body bytes>` under the channel's
shared secret. The URL, the secret and secret header values come from environment
variables named in the rule file, read at send time (a missing one is a permanent failure).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime

import httpx
import orjson

from service.errors import DeliveryError, DeliveryTimeout
from service.notify.outgoing import Outgoing
from service.schema.notify import WebhookChannelSpec

USER_AGENT = "errtriage-webhook/1"


def sign(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def default_body(out: Outgoing) -> bytes:
    """The body when the route's template has no json part."""
    keys = ("class", "reason", "provider", "provider_kind", "message", "recovery", "context", "source", "tool",
            "status", "rule")
    document = {"id": out.notification_id, "route": out.route, "channel": out.channel,
                "subject": out.rendered.subject, "text": out.rendered.text,
                **{key: out.variables.get(key) for key in keys}}
    return orjson.dumps(document, default=str)


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    if text.isdecimal():
        return float(text)
    try:
        return max(0.0, parsedate_to_datetime(text).timestamp() - now)
    except (TypeError, ValueError):
        return None


def _env(environ: Mapping[str, str], name: str) -> str:
    value = environ.get(name)
    if not value:
        raise DeliveryError(f"environment variable {name} is not set", transient=False)
    return value


class WebhookChannel:
    def __init__(self, spec: WebhookChannelSpec, client: Callable[[], httpx.AsyncClient],
                 environ: Mapping[str, str], clock: Callable[[], float]) -> None:
        """`client` gives the shared httpx client, made on the first send (Channels.client)."""
        self._spec = spec
        self._client = client
        self._environ = environ
        self._clock = clock

    def _headers(self, body: bytes) -> dict[str, str]:
        spec = self._spec
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **spec.headers}
        headers.update({name: _env(self._environ, env) for name, env in spec.headers_env.items()})
        if spec.secret_env is not None:
            headers[spec.signature_header] = sign(_env(self._environ, spec.secret_env).encode(), body)
        return headers

    async def send(self, out: Outgoing) -> None:
        """Raises DeliveryError: transient on network errors, 408, 429 and 5xx (with Retry-After)."""
        url = _env(self._environ, self._spec.url_env)
        body = out.rendered.body if out.rendered.body is not None else default_body(out)
        headers = self._headers(body)
        try:
            response = await self._client().post(url, content=body, headers=headers,
                                               timeout=self._spec.timeout_seconds)
        except httpx.TimeoutException as exc:
            raise DeliveryTimeout(f"webhook timed out: {type(exc).__name__}") from exc
        except httpx.TransportError as exc:
            reason = str(exc).replace(url, f"${self._spec.url_env}")  # the URL itself is a secret
            raise DeliveryError(f"webhook connection failed: {type(exc).__name__}: {reason}", transient=True) from exc
        if response.is_success:
            return
        status = response.status_code
        transient = status in (408, 429) or status >= 500
        raise DeliveryError(f"webhook answered HTTP {status}", transient=transient,
                            retry_after=retry_after(response.headers.get("retry-after"), self._clock()))
