"""Shared fixtures: the shipped rules, real uvicorn servers, real SMTP servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.rules.engine import Ruleset
from service.rules.loader import load_ruleset
from service.notify.config import build_notify

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "rules"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def shipped() -> Ruleset:
    return load_ruleset(RULES, build_notify)
