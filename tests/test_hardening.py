"""Hardening: arbitrary JSON into normalize and the API, a schema-driven fuzzer, hostile regexes and sizes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from schemathesis.checks import positive_data_acceptance
from schemathesis.config import SchemathesisConfig

from service.api.app import create_app
from service.errors import RulesInvalid
from service.models import ErrorReport
from service.normalize import normalize
from service.rules.engine import Ruleset, classify
from service.rules.loader import load_ruleset
from service.settings import Settings
from service.triage import triage
from tests.conftest import RULES
from tests.servers import running

ADMIN_TOKEN = "fuzz-admin-token"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(
        st.sampled_from(["error", "message", "type", "code", "status", "result", "content", "text", "_meta",
                         "responseBody", "name", "statusCode", "url", "total", "results", "stepId", "payload",
                         "event", "details", "headers", "retry-after", "@type", "retryDelay", "x"]) | st.text(),
        children, max_size=6),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=json_values, message=st.none() | st.text(max_size=300))
def test_normalize_and_triage_are_total_on_any_json(shipped: Ruleset, raw: Any, message: str | None) -> None:
    try:
        report = ErrorReport(raw=raw, message=message)
    except ValueError:
        return  # nothing to classify: the API answers 422 for this
    classification, error, _ = triage(report, shipped, "h")
    assert classification.reason in shipped.classes[classification.class_].reasons
    assert len(error.message) <= 16 * 1024 + 3


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    app = create_app(Settings(rules_dir=RULES, reload_rules=False, admin_token=ADMIN_TOKEN),
                     registry=CollectorRegistry())
    with running(app) as url:
        yield url


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=json_values)
def test_api_never_answers_5xx_to_any_json(served: str, body: Any) -> None:
    for path in ("/v1/classify", "/v1/errors/batch"):
        response = httpx.post(f"{served}{path}", json=body, timeout=10)
        assert response.status_code in (200, 400, 422), response.text
        if response.status_code != 200:
            assert response.headers["content-type"] == "application/problem+json"


# The document comes from the app itself (no server needed to collect); the calls go to a real
# uvicorn, with the admin token, so the admin paths are read too. The coverage phase (boundary
# values: `?limit=0` found an undocumented content type) runs from schemathesis 4.32 on. A reload
# retrains the fallback in a child process each time: that path has its own tests.
schema = schemathesis.openapi.from_dict(
    create_app(Settings(rules_dir=RULES), registry=CollectorRegistry()).openapi(),
    config=SchemathesisConfig.from_dict({"phases": {"coverage": {"enabled": True}}}),
).exclude(path="/v1/rules/reload")


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_openapi_contract_holds_under_fuzzing(case: schemathesis.Case, served: str) -> None:
    """No 5xx, responses match their documented schemas, invalid data is refused."""
    # A recipient is checked by email-validator, stricter than JSON Schema's `format: email`
    # (reserved names such as `.test`, label lengths, quoting): a schema-valid address it refuses
    # is a documented 422, not a contract break.
    lenient = [positive_data_acceptance] if case.path == "/v1/notifications/test" else []
    case.call_and_validate(base_url=served, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                           excluded_checks=lenient)


def test_pathological_regex_runs_in_linear_time(tmp_path: Path) -> None:
    (tmp_path / "classes").mkdir()
    (tmp_path / "classes" / "00.yaml").write_text(
        "classes:\n  - {id: demo, reasons: {a: {}}}\n"
        "rules:\n  - {id: evil, class: demo, reason: a, "
        "match: {message: {regex: ['(a+)+$', '(x|x)*y', '(.*a){20}b']}}}\n")
    ruleset = load_ruleset(tmp_path)
    started = time.perf_counter()
    verdict = classify(normalize(ErrorReport(message="a" * 16_000 + "!")), ruleset)
    assert time.perf_counter() - started < 2.0  # backtracking engines take hours here
    assert verdict.rule is None


def test_regex_features_re2_cannot_run_linearly_are_refused(tmp_path: Path) -> None:
    (tmp_path / "classes").mkdir()
    (tmp_path / "classes" / "00.yaml").write_text(
        "classes:\n  - {id: demo, reasons: {a: {}}}\n"
        "rules:\n  - {id: backref, class: demo, reason: a, match: {message: {regex: ['(a)\\1']}}}\n")
    with pytest.raises(RulesInvalid, match="does not compile under RE2"):
        load_ruleset(tmp_path)


def test_a_one_mebibyte_message_classifies_in_bounded_time(live: Callable[..., httpx.Client]) -> None:
    api = live(max_body_bytes=2 * 1024 * 1024)
    message = "You exceeded your current quota " + "z" * (1024 * 1024)
    started = time.perf_counter()
    response = api.post("/v1/classify", json={"message": message})
    assert response.status_code == 200 and response.json()["class"] == "ai_credits"
    assert time.perf_counter() - started < 5.0
