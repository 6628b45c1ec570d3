"""Operations: live reload (file change, endpoint, SIGHUP), several workers, logs, shutdown."""

from __future__ import annotations

import gc
import json
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client import CollectorRegistry

from service.api.server import HTTP_PROTOCOL, NoDelayH11Protocol, _NoDelay, set_nodelay
from service.metrics import Metrics
from service.rules.store import RuleStore
from service.settings import DEFAULT_RULES_DIR
from tests.servers import Process, wait_for
from tests.test_api import samples

NEW_RULE = """
rules:
  - id: ours-frobnicator
    class: account_level
    reason: plan_limit
    priority: 1000
    match: {message: {contains: [frobnicator quota]}}
    tests: [{message: "frobnicator quota hit"}]
"""
BROKEN = ("rules:\n  - id: broken\n    class: account_level\n    reason: plan_limit\n"
          "    match: {message: {regex: ['(?=x)']}}\n")


def version(client: httpx.Client) -> str:
    return str(client.get("/v1/rules").json()["version"])


def test_a_new_rule_file_is_picked_up_by_itself(live: Callable[..., httpx.Client], rules_copy: Path) -> None:
    api = live(rules_dir=rules_copy, reload_rules=True)
    before = version(api)
    time.sleep(0.3)  # let the watcher start before the change it must see
    (rules_copy / "classes" / "90-ours.yaml").write_text(NEW_RULE)
    wait_for(lambda: version(api) != before, timeout=5.0)
    assert api.post("/v1/classify", json={"message": "frobnicator quota hit"}).json()["rule"] == "ours-frobnicator"


def test_a_broken_change_is_refused_and_the_last_good_rules_keep_serving(
        live: Callable[..., httpx.Client], rules_copy: Path) -> None:
    api = live(rules_dir=rules_copy, reload_rules=True)
    good = version(api)
    time.sleep(0.3)
    (rules_copy / "classes" / "90-broken.yaml").write_text(BROKEN)
    wait_for(lambda: samples(api)[("errtriage_rules_last_reload_success", ())] == 0)
    assert version(api) == good
    errors = api.get("/v1/rules").json()["last_reload_errors"]
    assert errors[0]["file"] == "classes/90-broken.yaml" and errors[0]["rule"] == "broken"
    assert samples(api)[("errtriage_rules_reload_total", (("outcome", "failure"),))] >= 1
    assert api.post("/v1/classify", json={"message": "This operation was aborted"}).json()["class"] == "aborted"


@pytest.mark.parametrize("broken", [
    ("classes/90-x.yaml", "rules: [", "YAML"),
    ("classes/90-x.yaml", "rules:\n  - {id: x, class: nope, reason: r, match: {message: m}}\n", "undefined class"),
    ("classes/90-x.yaml", BROKEN, "does not compile under RE2"),
])
def test_reload_endpoint_answers_422_with_every_error(
        live: Callable[..., httpx.Client], rules_copy: Path, broken: tuple[str, str, str]) -> None:
    api = live(rules_dir=rules_copy, admin_token="t0ken-for-tests")
    good = version(api)
    path, text, phrase = broken
    (rules_copy / path).write_text(text)
    response = api.post("/v1/rules/reload", headers={"Authorization": "Bearer t0ken-for-tests"})
    assert response.status_code == 422 and response.headers["content-type"] == "application/problem+json"
    errors = response.json()["errors"]
    assert errors[0]["file"] == path and phrase in errors[0]["message"]
    assert good in response.json()["detail"] and version(api) == good


def test_a_broken_template_is_refused_on_reload(live: Callable[..., httpx.Client], rules_copy: Path) -> None:
    api = live(rules_dir=rules_copy, admin_token="t0ken-for-tests")
    template = next((rules_copy / "templates").rglob("*.j2"))
    template.write_text("{{ unclosed ")
    response = api.post("/v1/rules/reload", headers={"Authorization": "Bearer t0ken-for-tests"})
    assert response.status_code == 422
    assert any("templates/" in e["file"] for e in response.json()["errors"])


def test_sighup_reloads(spawn: Callable[..., Process], rules_copy: Path) -> None:
    proc = spawn("--rules", str(rules_copy), "--no-reload-rules")
    before = httpx.get(f"{proc.url}/v1/rules").json()["version"]
    (rules_copy / "classes" / "90-ours.yaml").write_text(NEW_RULE)
    proc.signal(signal.SIGHUP)
    wait_for(lambda: httpx.get(f"{proc.url}/v1/rules").json()["version"] != before)


def test_json_logs_one_line_per_report_with_request_id_and_no_secret(spawn: Callable[..., Process]) -> None:
    proc = spawn("--no-reload-rules")
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    response = httpx.post(f"{proc.url}/v1/errors", headers={"X-Request-ID": "req-42"},
                          json={"message": f"Incorrect API key provided: {secret}", "provider": "openai"})
    assert response.headers["x-request-id"] == "req-42"
    assert proc.stop() == 0
    lines = [json.loads(line) for line in proc.log.read_text().splitlines() if line.strip()]  # every line
    assert any(line["logger"].startswith("uvicorn") for line in lines)  # uvicorn's own lines too, uncoloured
    assert "\x1b[" not in proc.log.read_text()
    classified = [line for line in lines if line.get("msg") == "classified"]
    assert len(classified) == 1
    entry = classified[0]
    assert entry["request_id"] == "req-42" and entry["class"] == "ai_provider" and entry["provider"] == "openai"
    assert entry["reason"] == "invalid_api_key" and entry["latency_ms"] >= 0 and entry["rule"]
    assert secret not in proc.log.read_text()


def test_two_workers_share_their_metrics(spawn: Callable[..., Process], tmp_path: Path) -> None:
    proc = spawn("--workers", "2", "--no-reload-rules", ERRTRIAGE_MULTIPROC_DIR=str(tmp_path / "prom"))
    with httpx.Client(base_url=proc.url) as client:
        for _ in range(40):  # fresh connections spread over both workers
            client.post("/v1/errors", json={"message": "This operation was aborted"},
                        headers={"Connection": "close"})
        key = ("errtriage_errors_total", (("class", "aborted"), ("provider", "none"), ("reason", "cancelled")))
        for _ in range(5):  # whichever worker answers the scrape, it reports the sum of both
            assert samples(client)[key] == 40
    pids = {p.name.split("_")[-1] for p in (tmp_path / "prom").glob("*.db")}
    assert len(pids) >= 2, f"one worker served everything: {pids}"
    proc.stop()
    assert not (tmp_path / "prom").exists() or not list((tmp_path / "prom").glob("*.db"))


def test_accepted_sockets_get_tcp_nodelay() -> None:
    """The multi-worker trap: uvicorn binds with proto 0, so asyncio never sets TCP_NODELAY."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0  # the trap is real here

    class Transport:
        def get_extra_info(self, name: str) -> socket.socket:
            return accepted

    set_nodelay(Transport())  # type: ignore[arg-type]
    assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    assert all(protocol.connection_made is _NoDelay.connection_made for protocol in (NoDelayH11Protocol, HTTP_PROTOCOL))
    for sock in (client, accepted, listener):
        sock.close()


def test_sigterm_stops_cleanly(spawn: Callable[..., Process]) -> None:
    proc = spawn("--no-reload-rules")
    assert httpx.get(f"{proc.url}/readyz").status_code == 200
    assert proc.stop() == 0


def test_a_bad_setting_stops_startup_with_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "service", "serve"], capture_output=True, text=True, timeout=60,
                            env={"ERRTRIAGE_PORT": "99999", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "errtriage: invalid setting ERRTRIAGE_PORT: Input should be less than or equal to 65535 (got '99999')"]


def test_a_replaced_ruleset_is_freed_though_a_load_freezes_it() -> None:
    """load_now freezes what is alive (out of the cyclic GC's sight); a replaced ruleset must still
    go, by reference counting alone, or every reload would leak a whole ruleset."""
    store = RuleStore(DEFAULT_RULES_DIR, Metrics(CollectorRegistry()))
    store.load_now()
    store.load_now()
    base = gc.get_freeze_count()
    held = store.current
    store.load_now()
    one_ruleset = gc.get_freeze_count() - base  # the held one stays alive beside the new one
    assert one_ruleset > 5_000, one_ruleset
    del held
    store.load_now()
    assert gc.get_freeze_count() - base < one_ruleset * 0.05, (gc.get_freeze_count() - base, one_ruleset)


def test_a_trained_fallback_is_frozen_with_the_rules() -> None:
    """The fallback arrives after load_now froze the rules; it is frozen when it is swapped in, or
    every full collection would scan its model and scikit-learn's modules (35-70 ms pauses)."""
    store = RuleStore(DEFAULT_RULES_DIR, Metrics(CollectorRegistry()), fallback_min_confidence=0.65)
    store.load_now()
    assert store._thread is not None
    store._thread.join(120)
    fallback = store.current.fallback
    assert store.fallback_state == "ready" and fallback is not None
    assert gc.is_tracked(fallback)
    assert not any(tracked is fallback for tracked in gc.get_objects()), "the fallback is left to the cyclic GC"


def test_a_server_answers_alike_before_and_after_its_regex_scanner_is_ready(spawn: Callable[..., Process]) -> None:
    """The scanner compiles after the load while the RE2 set serves; /readyz says when it is in,
    and every report is classified the same on both sides of that moment."""
    proc = spawn("--no-reload-rules", ERRTRIAGE_REGEX_SCANNER="on", ERRTRIAGE_FALLBACK="off")
    reports = [case["report"] for path in sorted((DEFAULT_RULES_DIR / "examples").glob("c1*.yaml"))
               for case in yaml.safe_load(path.read_text())["examples"]][:400]
    with httpx.Client(base_url=proc.url, timeout=30) as client:
        assert client.get("/readyz").json()["regex_scanner"] == "compiling"
        before = [client.post("/v1/classify", json=report).json() for report in reports]
        wait_for(lambda: client.get("/readyz").json()["regex_scanner"] == "ready", timeout=120)
        after = [client.post("/v1/classify", json=report).json() for report in reports]
    answer = ("class", "reason", "provider", "rule", "retryable")
    assert [[got[k] for k in answer] for got in before] == [[got[k] for k in answer] for got in after]
    assert len({got["class"] for got in after}) >= 8  # the reports span the taxonomy
