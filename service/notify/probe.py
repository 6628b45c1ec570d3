"""A test message through one channel, so an operator can check SMTP or a webhook before an incident."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from service.notify.outgoing import Outgoing
from service.notify.render import Rendered
from service.schema.notify import ChannelSpec, EmailChannelSpec, checked_address


class ProbeResult(BaseModel):
    channel: str
    outcome: Literal["sent", "failed", "no_recipient"]
    detail: str = Field(..., description="Where it went, or why it did not.")


def probe_recipients(spec: ChannelSpec, to: str | None) -> tuple[str, ...] | None:
    """Recipients of a test message: `to`, else the channel's fixed ones; None if an email channel has neither.
    Raises ValueError if `to` is not a valid address."""
    if not isinstance(spec, EmailChannelSpec):
        return ()
    if to:
        return (checked_address(to),)
    return tuple(spec.to) or None


def probe_message(spec: ChannelSpec, recipients: tuple[str, ...], probe_id: str, now: float) -> Outgoing:
    when = datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds")
    text = (f"This is a test message from errtriage through channel '{spec.id}', sent at {when}.\n"
            "If you can read it, notifications through this channel work.\n")
    rendered = Rendered(subject=f"errtriage test message ({spec.id})", text=text, html=None, body=None)
    return Outgoing(probe_id, None, spec.id, "test", recipients, rendered,
                    {"class": "test", "reason": "test", "message": text.strip()})
