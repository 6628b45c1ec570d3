"""A notification as a Redis stream entry (JSON), and back.

Stored: the report id (the same on every attempt and in every process, so receivers can
deduplicate on it), the classification, the normalized error's fields that templates read,
the route and channel ids, the recipients, the created and deadline times. Not stored: the
channel spec, the template and the provider's display name; the process that delivers the
entry looks them up by id in the rules it serves then. A route or channel a reload removed
cannot be delivered: `decode` raises EntryUnusable (the caller counts it `failed` and acks it).
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from service.errors import EntryUnusable
from service.models import Classification
from service.normalize import NormalizedError
from service.notify.config import NotifyConfig
from service.notify.delivery import Delivery

VERSION = 1
_NOT_STORED = {"notification", "explain"}


def encode(item: Delivery) -> bytes:
    error = item.error
    return orjson.dumps({
        "v": VERSION,
        "classification": item.classification.model_dump(mode="json", exclude=_NOT_STORED),
        "error": {"message": error.message, "status": error.status, "source": error.source, "tool": error.tool,
                  "context": error.context},
        "route": item.route,
        "channel": item.channel.id,
        "recipients": list(item.recipients),
        "created": item.created,
        "deadline": item.deadline,
    }, default=str)  # context is caller JSON; default=str only guards against the odd non-JSON value


def decode(data: bytes, config: NotifyConfig | None) -> Delivery:
    """The Delivery an entry stands for, built against `config` (the serving rules' notify tables).
    Raises EntryUnusable when it does not decode or names a route or channel that no longer exists."""
    try:
        fields: dict[str, Any] = orjson.loads(data)
        channel_id, route_id = str(fields["channel"]), str(fields["route"])
        summary: dict[str, object] = {"notification_id": fields["classification"]["id"], "route": route_id,
                                      "channel": channel_id, "class": fields["classification"]["class"],
                                      "to": fields["recipients"]}
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise EntryUnusable(f"stored notification does not decode: {exc}", "unknown", "unknown", {}) from exc
    class_id = str(summary["class"])
    if fields.get("v") != VERSION:
        raise EntryUnusable(f"stored notification has version {fields.get('v')!r}, not {VERSION}",
                            channel_id, class_id, summary)
    route = next((r for r in config.routes if r.id == route_id), None) if config is not None else None
    spec = config.channels.get(channel_id) if config is not None else None
    if config is None or route is None or spec is None:
        missing = f"route {route_id!r}" if route is None else f"channel {channel_id!r}"
        raise EntryUnusable(f"{missing} no longer exists in the rules", channel_id, class_id, summary)
    try:
        classification = Classification.model_validate(fields["classification"])
    except ValidationError as exc:
        raise EntryUnusable(f"stored classification does not validate: {exc}", channel_id, class_id, summary) from exc
    stored = fields["error"]
    error = NormalizedError(message=stored["message"], status=stored["status"], source=stored["source"],
                            tool=stored["tool"], context=stored["context"] or {})
    return Delivery(classification, error, route_id, config.provider_names.get(classification.provider or ""),
                    spec, config.templates[route.template], tuple(fields["recipients"]), float(fields["created"]),
                    float(fields["deadline"]), None)
