"""Structured logging: one JSON object per line (or plain text), with the request id."""

from __future__ import annotations

import contextvars
import logging
import sys
from typing import Any

import orjson

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)

# Record attributes that are not a line's own fields (uvicorn adds `color_message`, the message with ANSI colours).
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName",
                                                                         "color_message"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        rid = request_id.get()
        if rid:
            entry["request_id"] = rid
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extra = " ".join(f"{k}={v}" for k, v in record.__dict__.items() if k not in _STANDARD)
        rid = request_id.get()
        base = f"{record.levelname.lower():7} {record.name}: {record.getMessage()}"
        return " ".join(part for part in (base, f"request_id={rid}" if rid else "", extra) if part)


def configure(log_format: str, level: str) -> None:
    """Our loggers and uvicorn's (started with `log_config=None`) write through one handler, so
    every line of the server's output has the same format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    for name in ("errtriage", "uvicorn"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False
