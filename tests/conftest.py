"""Shared fixtures: the shipped rules, real uvicorn servers, real SMTP servers."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from service.api.app import create_app
from service.notify.config import build_notify
from service.rules.engine import Ruleset
from service.rules.loader import load_ruleset
from service.settings import Settings
from tests.servers import Process, running

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "rules"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def shipped() -> Ruleset:
    return load_ruleset(RULES, build_notify)


@pytest.fixture
def rules_copy(tmp_path: Path) -> Path:
    """A writable copy of the shipped rules."""
    target = tmp_path / "rules"
    shutil.copytree(RULES, target)
    return target


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    def build(**overrides: object) -> Settings:
        # In-process apps test the rules alone: training a fallback in each (2-4 s of CPU, ~50 MiB)
        # would slow the suite for nothing. Spawned servers keep the default (on); test_fallback.py
        # and the console tests exercise it there. The regex scanner (~6 s of CPU after each load)
        # is off here and in spawned servers; test_lifecycle.py and test_corpus.py run it.
        values: dict[str, object] = {"rules_dir": RULES, "reload_rules": False, "log_format": "text",
                                     "fallback": "off", "regex_scanner": "off"}
        values.update(overrides)
        return Settings(**values)  # type: ignore[arg-type]

    return build


@pytest.fixture
def live(make_settings: Callable[..., Settings]) -> Iterator[Callable[..., httpx.Client]]:
    """Start the app under a real uvicorn; returns an httpx client bound to it (and .app for its state)."""
    stack: list[object] = []

    def start(**overrides: object) -> httpx.Client:
        app = create_app(make_settings(**overrides), registry=CollectorRegistry())
        context = running(app)
        url = context.__enter__()
        client = httpx.Client(base_url=url, timeout=10)
        client.app = app  # type: ignore[attr-defined]
        stack.append((context, client))
        return client

    yield start
    for context, client in reversed(stack):  # type: ignore[misc]
        client.close()
        context.__exit__(None, None, None)


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., Process]]:
    """`errtriage serve` as a real child process."""
    procs: list[Process] = []

    def start(*args: str, **env: str) -> Process:
        proc = Process(list(args), {"ERRTRIAGE_LOG_FORMAT": "json", "ERRTRIAGE_REGEX_SCANNER": "off", **env},
                       tmp_path / f"server{len(procs)}.log")
        procs.append(proc)
        proc.wait_ready()
        return proc

    yield start
    for proc in procs:
        proc.stop()


# --- Notifications: real SMTP servers (aiosmtpd), TLS from trustme, a fake clock, log capture --------

import asyncio  # noqa: E402
import logging  # noqa: E402
import ssl  # noqa: E402
import threading  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from email import message_from_bytes  # noqa: E402
from email import policy as email_policy  # noqa: E402
from email.message import EmailMessage  # noqa: E402
from typing import Any  # noqa: E402

import trustme  # noqa: E402
from aiosmtpd.controller import Controller  # noqa: E402
from aiosmtpd.smtp import AuthResult, LoginPassword  # noqa: E402

from tests.servers import free_port  # noqa: E402

NOTIFY_BASE = DATA / "notify" / "base"
SMTP_USER, SMTP_PASSWORD = "errtriage", "s3cret-pass"


class Mailbox:
    """An aiosmtpd handler that keeps every accepted message, parsed. Put replies in `refusals`
    to answer the next DATA commands with them (e.g. "451 4.3.0 try again later")."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.raw: list[bytes] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self.sessions: list[dict[str, bool]] = []  # per message: was the session TLS, was it logged in
        self.refusals: list[str] = []
        self.arrived = threading.Event()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.refusals:
            return self.refusals.pop(0)
        raw = envelope.original_content or envelope.content
        self.raw.append(raw)
        self.messages.append(message_from_bytes(raw, policy=email_policy.default))  # type: ignore[arg-type]
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        tls = server.transport.get_extra_info("ssl_object") is not None  # STARTTLS or implicit TLS
        self.sessions.append({"tls": tls, "authenticated": bool(session.authenticated)})
        self.arrived.set()
        return "250 OK"


@dataclass
class SmtpServer:
    """A real SMTP server on a free loopback port. Made with start=False, the port is
    chosen but nothing listens: an outage until `start()`."""

    host: str
    port: int
    mailbox: Mailbox
    options: dict[str, Any] = field(default_factory=dict)
    controller: Controller | None = None

    def start(self) -> SmtpServer:
        self.controller = Controller(self.mailbox, hostname=self.host, port=self.port, **self.options)
        self.controller.start()
        return self

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


@pytest.fixture
def smtp_server() -> Iterator[Callable[..., SmtpServer]]:
    """smtp_server(start=True, **aiosmtpd Controller options) -> SmtpServer; all stopped after the test."""
    servers: list[SmtpServer] = []

    def make(start: bool = True, **options: Any) -> SmtpServer:
        server = SmtpServer("127.0.0.1", free_port(), Mailbox(), options)
        servers.append(server)
        return server.start() if start else server

    yield make
    for server in servers:
        server.stop()


def smtp_authenticator(server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
    """aiosmtpd authenticator accepting only SMTP_USER / SMTP_PASSWORD."""
    ok = (isinstance(auth_data, LoginPassword) and auth_data.login == SMTP_USER.encode()
          and auth_data.password == SMTP_PASSWORD.encode())
    return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd itself answers 235 or 535


@pytest.fixture(scope="session")
def tls_contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server, client) SSL contexts: a throwaway trustme CA and a certificate for 127.0.0.1."""
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return server, client


class FakeClock:
    """The notifier's injected clock and sleep: sleeping advances time at once (no real waiting).
    `on_sleep(n)` runs after the n-th sleep, e.g. to end a simulated outage."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:  # 2027-01-15T08:00:00Z
        self.now = start
        self.sleeps: list[float] = []
        self.on_sleep: Callable[[int], None] | None = None

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep(len(self.sleeps))
        await asyncio.sleep(0)


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _ListHandler(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.DEBUG)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def notify_log() -> Iterator[list[logging.LogRecord]]:
    """Every record the errtriage.notify logger emits during the test (whatever the root config)."""
    records: list[logging.LogRecord] = []
    logger = logging.getLogger("errtriage.notify")
    handler, level = _ListHandler(records), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield records
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.fixture(scope="session")
def notify_rules() -> Ruleset:
    """tests/data/notify/base: a small fixed vocabulary with every channel type, routes and silences."""
    return load_ruleset(NOTIFY_BASE, build_notify)


@pytest.fixture
def notify_settings(make_settings: Callable[..., Settings]) -> Callable[..., Settings]:
    """Settings for notification tests: no SMTP unless given, an admin token, a short grace, two workers."""
    def build(**overrides: object) -> Settings:
        values: dict[str, object] = {"smtp_host": None, "admin_token": "test-token", "shutdown_grace_seconds": 5,
                                     "notify_workers": 2}
        values.update(overrides)
        return make_settings(**values)

    return build


# --- Redis: a real redis-server per session (flushed for each test), or one of a test's own ------------

import redis  # noqa: E402

from tests.servers import RedisServer  # noqa: E402


@pytest.fixture(scope="session")
def redis_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed: apt-get install redis-server (.ci/run does)")
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_session: RedisServer) -> Iterator[str]:
    """The session's Redis, emptied for this test."""
    with redis.Redis.from_url(redis_session.url) as client:
        client.flushall()
    yield redis_session.url


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """redis_server(start=True) -> a Redis of this test's own, to stop, pause or restart."""
    servers: list[RedisServer] = []

    def make(start: bool = True) -> RedisServer:
        server = RedisServer(tmp_path / f"redis{len(servers)}")
        servers.append(server)
        return server.start() if start else server

    yield make
    for server in servers:
        if server.proc is not None:
            server.resume()
        server.stop()
