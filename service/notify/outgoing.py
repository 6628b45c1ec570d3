"""One notification ready for one channel: rendered text, recipients and what it is about."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.notify.render import Rendered


@dataclass(frozen=True, slots=True)
class Outgoing:
    notification_id: str
    route: str | None
    channel: str
    class_: str
    recipients: tuple[str, ...]
    rendered: Rendered
    variables: dict[str, Any]

    def summary(self) -> dict[str, Any]:
        """Everything a log record of this notification holds (text is already redacted)."""
        return {
            "notification_id": self.notification_id,
            "route": self.route,
            "channel": self.channel,
            "class": self.class_,
            "to": list(self.recipients),
            "subject": self.rendered.subject,
            "text": self.rendered.text,
            "html": self.rendered.html,
            "body": self.rendered.body.decode() if self.rendered.body is not None else None,
        }
