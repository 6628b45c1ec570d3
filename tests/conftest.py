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
        values: dict[str, object] = {"rules_dir": RULES, "reload_rules": False, "log_format": "text"}
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
        proc = Process(list(args), {"ERRTRIAGE_LOG_FORMAT": "json", **env}, tmp_path / f"server{len(procs)}.log")
        procs.append(proc)
        proc.wait_ready()
        return proc

    yield start
    for proc in procs:
        proc.stop()
