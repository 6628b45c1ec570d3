"""Project hygiene held in CI: one-way imports, clean types and lint, a lint-clean Dockerfile."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def test_import_contracts_hold() -> None:
    result = subprocess.run([str(BIN / "lint-imports")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 4 kept, 0 broken." in result.stdout


def test_mypy_is_clean() -> None:
    """Strict, with pydantic's plugin ([tool.mypy] in pyproject.toml); the client package too."""
    result = subprocess.run([str(BIN / "mypy"), "service", "clients/python/errtriage_client"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_is_clean() -> None:
    """The rules chosen in [tool.ruff] of pyproject.toml, on the service and every other Python file."""
    result = subprocess.run([str(BIN / "ruff"), "check", "--no-cache", "service", "clients/python", "tests", "bench",
                             "examples"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint") or str(BIN / "hadolint")
    result = subprocess.run([hadolint, "Dockerfile"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_builds_with_the_classic_builder_too() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "# syntax=" not in text and "--mount" not in text and "<<" not in text and "@sha256:" not in text
    assert "FROM python:3.12-slim" in text and "EXPOSE 8080" in text and "HEALTHCHECK" in text
    assert "\nUSER 10001" in text


def test_compose_runs_two_replicas_on_one_persistent_redis() -> None:
    import yaml

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    replicas = [s for s in compose["services"].values() if s.get("build") == "."]
    assert len(replicas) == 2
    assert {s["environment"]["ERRTRIAGE_REDIS_URL"] for s in replicas} == {"redis://redis:6379/0"}
    command = compose["services"]["redis"]["command"]
    assert command[command.index("--appendonly") + 1] == "yes" and "--appendfsync" in command
    targets = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())["scrape_configs"][0]
    assert len(targets["static_configs"][0]["targets"]) == 2


def test_a_start_loads_neither_the_models_numerics_nor_an_http_client() -> None:
    """What every start pays for: the app built and the shipped rules loaded import no numpy or
    scikit-learn (the fallback trains in a child, after /readyz answers) and no httpcore (the
    webhook client is made on the first webhook send)."""
    script = (
        "import sys\n"
        "from service.api.app import create_app\n"
        "from service.settings import load_settings\n"
        "app = create_app(load_settings())\n"
        "app.state.services.store.load_now()\n"
        "print(sorted(m for m in ('numpy', 'scipy', 'sklearn', 'httpcore') if m in sys.modules))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "ERRTRIAGE_FALLBACK": "off"}
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
