"""Real servers for tests: uvicorn in a thread (in-process app) or `errtriage serve` as a subprocess."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from service.api.server import HTTP_PROTOCOL

_HANDED_OUT: set[int] = set()


def wait_for(predicate: Callable[[], bool], timeout: float = 8.0) -> None:
    """Poll `predicate` every 0.1 s until it holds; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def free_port() -> int:
    """A free loopback port never handed out before in this run: two servers started one after
    the other could otherwise be given the same one, and the second's readiness probe would
    be answered by the first."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


@contextmanager
def running(app: Any) -> Iterator[str]:
    """Serve `app` with a real uvicorn on a free loopback port; yields the base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, http=HTTP_PROTOCOL, log_level="warning",
                            lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class Process:
    """`errtriage serve` in a child process, with its stderr log captured to a file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        full_env = {**os.environ, **env, "ERRTRIAGE_PORT": str(self.port)}
        self._out = log.open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "service", "serve", *args], env=full_env,
                                     stdout=self._out, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server not ready: {self.log.read_text()[-2000:]}")

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()
        return self.proc.returncode


class RedisServer:
    """A real redis-server (the Debian package) on a free loopback port, stopped by its pid.
    Append-only file with `appendfsync always`: what Redis acknowledged survives a SIGKILL."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.directory = directory
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 10) -> RedisServer:
        import redis

        self.directory.mkdir(parents=True, exist_ok=True)
        log = (self.directory / "redis.log").open("ab")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
             "--appendfsync", "always", "--dir", str(self.directory), "--daemonize", "no"],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if client.ping():
                    client.close()
                    return self
            except redis.RedisError as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    log = (self.directory / "redis.log").read_text()
                    raise RuntimeError(f"redis-server did not start: {log}") from exc
                time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(timeout=20)
        self.proc = None

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)
