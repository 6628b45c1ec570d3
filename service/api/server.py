"""Running the app under uvicorn: one process or several, fast on any event loop.

Why the protocol subclasses: with several workers uvicorn binds the listening socket
itself with `proto=0`, and asyncio only sets TCP_NODELAY on sockets whose proto is
IPPROTO_TCP, so every accepted connection kept Nagle's algorithm on and each response
waited ~40 ms for a delayed ACK. Setting TCP_NODELAY in `connection_made` fixes it for
every loop and every worker count.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import tempfile
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from service.logs import configure
from service.settings import Settings, load_settings


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _NoDelay(asyncio.Protocol):
    """Mixed in before a uvicorn HTTP protocol: TCP_NODELAY on every accepted connection."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        set_nodelay(transport)
        super().connection_made(transport)


class NoDelayH11Protocol(_NoDelay, H11Protocol):
    pass


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class NoDelayHttpToolsProtocol(_NoDelay, HttpToolsProtocol):
        pass

    HTTP_PROTOCOL: type[Any] = NoDelayHttpToolsProtocol
except ImportError:  # httptools is optional (the `speed` extra)
    HTTP_PROTOCOL = NoDelayH11Protocol


def build_app() -> Any:
    """uvicorn factory for worker processes: settings from the environment."""
    from service.api.app import create_app

    settings = load_settings()
    configure(settings.log_format, settings.log_level)
    return create_app(settings)


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def serve(settings: Settings) -> int:
    """Run until SIGTERM/SIGINT; several workers share prometheus-client's multiprocess directory."""
    multiproc: Path | None = None
    if settings.workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiproc = settings.multiproc_dir or Path(tempfile.mkdtemp(prefix="errtriage-prom-"))
        shutil.rmtree(multiproc, ignore_errors=True)  # stale files of an earlier run would be summed in
        multiproc.mkdir(parents=True)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(multiproc)
    # uvicorn drains, then re-raises the signal it caught under the handler it found: make that
    # handler a clean exit, so a graceful SIGTERM/SIGINT stop exits 0 (and cleans up below).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_cleanly)
    configure(settings.log_format, settings.log_level)  # the supervisor's lines, with several workers
    try:
        uvicorn.run(
            "service.api.server:build_app",
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=settings.workers,
            http=HTTP_PROTOCOL,
            log_level=settings.log_level,
            log_config=None,  # uvicorn's own lines go through our handler (configure, above and in build_app)
            access_log=False,
            timeout_graceful_shutdown=int(settings.shutdown_grace_seconds) or None,
        )
    finally:
        if multiproc is not None:
            shutil.rmtree(multiproc, ignore_errors=True)
    return 0
