"""`LoggingHandler`: ERROR records that carry an exception, posted to errtriage off the caller's thread.

`emit` builds the report (cheap: attributes of the exception) and puts it on a bounded queue;
it never blocks and never raises. One daemon thread posts the queue. A full queue, a post
that fails, and everything queued while errtriage is down (after a failure the worker skips
posting for `down_seconds`) are dropped and counted in `dropped`; `sent` counts answers.
`close()` (which `logging.shutdown` calls at exit) waits at most `close_timeout` seconds
for the queue to drain, then counts what is left as dropped.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from .client import DEFAULT_URL, Client

_STOP = object()
_OWN_LOGGERS = ("errtriage_client", "httpx", "httpcore")  # never report our own transport's records


class LoggingHandler(logging.Handler):
    def __init__(self, url: str = DEFAULT_URL, *, level: int = logging.ERROR, queue_size: int = 1000,
                 timeout: float = 2.0, source: str | None = None, context: Mapping[str, Any] | None = None,
                 close_timeout: float = 5.0, down_seconds: float = 5.0,
                 transport: httpx.BaseTransport | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(level)
        self.sent = 0
        self.dropped = 0
        self.close_timeout = close_timeout
        self.down_seconds = down_seconds
        self._clock = clock
        self._down_until = 0.0
        self._client = Client(url, timeout=timeout, source=source, context=context, transport=transport)
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._counts = threading.Lock()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="errtriage-logging", daemon=True)
        self._worker.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            exc = record.exc_info[1] if record.exc_info else None
            if exc is None or self._closed or record.name.split(".")[0] in _OWN_LOGGERS:
                return
            if threading.current_thread() is self._worker:
                return
            context = {"logger": record.name, "log_message": record.getMessage()[:2000]}
            report = self._client._build(exc, None, None, None, context)
            self._queue.put_nowait(report)
        except queue.Full:
            self._drop(1)
        except Exception:  # noqa: BLE001 - a logging handler must never fail the application
            self._drop(1)

    def _drop(self, count: int) -> None:
        with self._counts:
            self.dropped += count

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                self._post(item)
            finally:
                self._queue.task_done()

    def _post(self, report: dict[str, Any]) -> None:
        if self._clock() < self._down_until:
            self._drop(1)
            return
        answer = self._client._post("/v1/errors", report, None)
        if answer is None:
            self._down_until = self._clock() + self.down_seconds
            self._drop(1)
        else:
            with self._counts:
                self.sent += 1

    def _discard_queued(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not _STOP:
                self._drop(1)
            self._queue.task_done()

    def flush(self) -> None:
        """Wait at most `close_timeout` for the queue to drain (`logging.shutdown` calls it)."""
        self.drain()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait (at most `timeout`, default `close_timeout`) until every queued report was handled.
        True when the queue drained."""
        deadline = time.monotonic() + (self.close_timeout if timeout is None else timeout)
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._queue.all_tasks_done.wait(left)
        return True

    def close(self) -> None:
        """Drain for at most `close_timeout` seconds, stop the worker; what is left counts as dropped."""
        if self._closed:
            return
        self._closed = True
        try:
            deadline = time.monotonic() + self.close_timeout
            self.drain(self.close_timeout)
            with contextlib.suppress(queue.Full):
                self._queue.put(_STOP, timeout=max(0.0, deadline - time.monotonic()) or 0.01)
            self._worker.join(max(0.0, deadline - time.monotonic()))
            if self._worker.is_alive():  # still posting: leave the daemon thread, count the rest dropped
                self._discard_queued()
            else:
                self._client.close()
        finally:
            super().close()
