"""The HTTP contract against a real uvicorn server: answers, side effects, and bad input."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from service.api.middleware import new_id

QUOTA = {"message": "Error code: 429 - {'error': {'message': 'You exceeded your current quota, please check your "
                    "plan and billing details.', 'type': 'insufficient_quota', 'param': None, "
                    "'code': 'insufficient_quota'}}"}
CLASSIFICATION_KEYS = {"id", "class", "reason", "provider", "provider_kind", "retryable", "rule", "recovery",
                       "details", "rules_version", "decided_by", "confidence"}


def samples(client: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, parsed by prometheus-client's own parser."""
    text = client.get("/metrics").text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def errors_total(client: httpx.Client, cls: str, reason: str, provider: str) -> float:
    key = ("errtriage_errors_total", (("class", cls), ("provider", provider), ("reason", reason)))
    return samples(client).get(key, -1.0)


@pytest.fixture
def api(live: Callable[..., httpx.Client]) -> httpx.Client:
    return live()


def test_classify_answers_the_full_classification(api: httpx.Client) -> None:
    response = api.post("/v1/classify", json=QUOTA)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == CLASSIFICATION_KEYS
    assert (body["class"], body["reason"], body["provider"], body["provider_kind"]) == (
        "ai_credits", "quota_exceeded", "openai", "ai")
    assert body["retryable"] is False and body["recovery"]["action"] == "top_up_credits"
    assert body["rules_version"].startswith("sha256:")


def test_classify_has_no_side_effects_but_errors_counts(api: httpx.Client) -> None:
    before = errors_total(api, "ai_credits", "quota_exceeded", "openai")
    api.post("/v1/classify", json=QUOTA)
    assert errors_total(api, "ai_credits", "quota_exceeded", "openai") == before
    response = api.post("/v1/errors", json=QUOTA)
    assert response.status_code == 200 and "notification" in response.json()
    assert errors_total(api, "ai_credits", "quota_exceeded", "openai") == max(before, 0) + 1


def test_a_gateway_body_names_the_upstream_provider_in_details(api: httpx.Client) -> None:
    """OpenRouter's error metadata says which provider it routed to: ours is the gateway, theirs is upstream."""
    body = api.post("/v1/classify", json={"context": {"base_url": "https://openrouter.ai/api/v1"}, "raw": {"error": {
        "code": 402, "message": "Insufficient credits", "metadata": {"provider_name": "Anthropic"}}}}).json()
    assert (body["class"], body["provider"]) == ("ai_credits", "openrouter")
    assert body["details"]["upstream_provider"] == "anthropic"


def test_explain_shows_rules_tried_and_provider_source(api: httpx.Client) -> None:
    body = api.post("/v1/classify", params={"explain": "true"}, json=QUOTA).json()
    explain = body["explain"]
    assert explain["winner"] == body["rule"]
    assert any(t["won"] and t["rule"] == body["rule"] for t in explain["rules_tried"])
    assert explain["provider"]["decided_by"] in {"types/codes", "hosts", "models", "text"}


def test_unknown_provider_hint_is_echoed_but_counted_as_other(api: httpx.Client) -> None:
    body = api.post("/v1/errors", json={"message": "something odd", "provider": "MyLLM"}).json()
    assert body["provider"] == "myllm" and body["class"] == "unknown" and body["rule"] is None
    assert errors_total(api, "unknown", "unclassified", "other") == 1
    assert not any(("provider", "myllm") in labels for _, labels in samples(api))


def test_batch_keeps_order_and_caps_at_1000(api: httpx.Client) -> None:
    reports = [QUOTA, {"message": "This operation was aborted"}, {"raw": {"total": 0, "results": []}}]
    results = api.post("/v1/errors/batch", json={"errors": reports}).json()["results"]
    assert [r["class"] for r in results] == ["ai_credits", "aborted", "empty_result"]
    over = api.post("/v1/errors/batch", json={"errors": [QUOTA] * 1001})
    assert over.status_code == 422 and over.headers["content-type"] == "application/problem+json"


def test_rules_endpoint_lists_version_files_and_ids(api: httpx.Client) -> None:
    api.post("/v1/errors", json=QUOTA)
    body = api.get("/v1/rules").json()
    assert body["version"].startswith("sha256:") and body["loaded_at"]
    assert body["counts"]["rules"] == len(body["rules"]) > 0
    assert any(f["path"].startswith("classes/") for f in body["files"])
    matched = [r for r in body["rules"] if r["matches"] > 0]
    assert len(matched) == 1 and matched[0]["class"] == "ai_credits"


def test_health_ready_and_request_ids(api: httpx.Client) -> None:
    assert api.get("/healthz").json() == {"status": "ok"}
    ready = api.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    assert api.get("/healthz", headers={"X-Request-ID": "abc-123"}).headers["x-request-id"] == "abc-123"
    generated = api.get("/healthz").headers["x-request-id"]
    assert len(generated) == 32 and generated != api.get("/healthz").headers["x-request-id"]


def test_made_request_ids_are_unique_hex_and_differ_in_a_forked_child() -> None:
    ids = [new_id() for _ in range(1000)]
    assert len(set(ids)) == 1000 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child writes its first id and leaves at once
        os.write(write, new_id().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    in_child = os.read(read, 64).decode()
    os.close(read)
    assert len(in_child) == 32 and in_child[:16] != new_id()[:16]


def test_metrics_exposes_contract_names_with_precreated_labels(api: httpx.Client) -> None:
    names = {name for name, _ in samples(api)}
    for expected in ("errtriage_errors_total", "errtriage_rule_matches_total", "errtriage_classify_seconds_count",
                     "errtriage_rules_loaded", "errtriage_rules_last_reload_success",
                     "errtriage_rules_reload_total", "errtriage_notification_queue_depth"):
        assert expected in names
    values = samples(api)
    assert values[("errtriage_rules_last_reload_success", ())] == 1
    assert values[("errtriage_notification_queue_capacity", ())] == 10_000  # ERRTRIAGE_NOTIFY_QUEUE_SIZE
    assert values[("errtriage_errors_total", (("class", "git_auth"), ("provider", "none"),
                                               ("reason", "token_expired")))] == 0
    api.get("/healthz")
    api.get("/no/such/path/123")
    http = {labels: v for (name, labels), v in samples(api).items() if name == "errtriage_http_requests_total"}
    assert http[(("handler", "/healthz"), ("method", "GET"), ("status", "200"))] >= 1
    assert http[(("handler", "unmatched"), ("method", "GET"), ("status", "404"))] == 1


def problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status and body["title"] and body["type"] == "about:blank"
    return body


@pytest.mark.parametrize(("body", "status", "detail"), [
    (b"{not json", 400, "not valid JSON"),
    (b"\xff\xfe\x00", 400, "not valid UTF-8"),
    (b"[" * 5000 + b"]" * 5000, 400, "not valid JSON"),
    (b"[1, 2]", 422, "does not fit"),
    (b"\"text\"", 422, "does not fit"),
    (b"{\"message\": \"x\"} trailing", 400, "not valid JSON"),
    (b"{}", 422, "does not fit"),
    (b"{\"message\": null, \"raw\": \"\"}", 422, "does not fit"),
])
def test_bad_bodies_are_problems_never_500(api: httpx.Client, body: bytes, status: int, detail: str) -> None:
    for path in ("/v1/classify", "/v1/errors", "/v1/errors/batch"):
        doc = problem(api.post(path, content=body, headers={"content-type": "application/json"}), status)
        assert detail in str(doc["detail"])


def test_every_field_error_is_listed(api: httpx.Client) -> None:
    doc = problem(api.post("/v1/errors", json={"status": "teapot", "attempt": 0, "context": [1]}), 422)
    locations = {tuple(e["loc"]) for e in doc["errors"]}  # type: ignore[union-attr]
    assert {("status",), ("attempt",), ("context",)} <= locations
    assert "teapot" not in json.dumps(doc)  # input is not echoed back


def test_fields_are_read_as_documented_not_coerced(api: httpx.Client) -> None:
    """The OpenAPI document says integer and string: a bool or a numeric string is refused, while
    500.0 is an integer to JSON Schema and is taken."""
    for body in ({"code": False}, {"status": True}, {"message": "x", "attempt": "2"}, {"status": "429"}):
        problem(api.post("/v1/classify", json=body), 422)
    assert api.post("/v1/classify", json={"message": "x", "status": 500.0, "attempt": 2.0}).status_code == 200


def test_body_over_the_limit_is_413_declared_or_streamed(live: Callable[..., httpx.Client]) -> None:
    api = live(max_body_bytes=2048)
    problem(api.post("/v1/errors", content=b"x" * 4096), 413)

    def chunks():  # no content-length: counted while streaming
        for _ in range(100):
            yield b" " * 1024

    problem(api.post("/v1/errors", content=chunks()), 413)
    assert api.post("/v1/errors", json={"message": "x" * 1000}).status_code == 200


def test_long_message_matches_on_head_and_tail(api: httpx.Client) -> None:
    body = api.post("/v1/classify", json={"message": "x" * 500_000 + " You exceeded your current quota"}).json()
    assert body["class"] == "ai_credits"


def test_query_validation_and_unknown_paths_are_problems(api: httpx.Client) -> None:
    problem(api.post("/v1/classify", params={"explain": "maybe"}, json=QUOTA), 422)
    problem(api.post("/v1/classify?explain=", json=QUOTA), 422)
    problem(api.get("/nope"), 404)
    problem(api.get("/v1/classify"), 405)


def test_secrets_never_echo(api: httpx.Client) -> None:
    body = api.post("/v1/classify", params={"explain": "true"}, json={
        "message": "Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwxyz0123. Bearer abcdefghijklmnop"})
    assert "sk-proj-abcdefghij" not in body.text and "abcdefghijklmnop" not in body.text


def test_reload_endpoint_needs_a_token(live: Callable[..., httpx.Client]) -> None:
    closed = live()
    problem(closed.post("/v1/rules/reload"), 403)
    guarded = live(admin_token="s3cret-token")
    problem(guarded.post("/v1/rules/reload"), 401)
    problem(guarded.post("/v1/rules/reload", headers={"Authorization": "Bearer wrong"}), 401)
    ok = guarded.post("/v1/rules/reload", headers={"Authorization": "Bearer s3cret-token"})
    assert ok.status_code == 200 and ok.json()["version"].startswith("sha256:")


def test_openapi_declares_bodies_and_problem_responses(api: httpx.Client) -> None:
    doc = api.get("/openapi.json").json()
    errors = doc["paths"]["/v1/errors"]["post"]
    assert errors["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorReport")
    for status in ("400", "413", "422"):
        assert "application/problem+json" in errors["responses"][status]["content"]
    assert {"ErrorReport", "Classification", "Problem", "BatchRequest"} <= set(doc["components"]["schemas"])
    limit_refused = doc["paths"]["/v1/unknowns"]["get"]["responses"]["422"]  # ?limit=0
    assert list(limit_refused["content"]) == ["application/problem+json"]
    probe = doc["paths"]["/v1/notifications/test"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert {"type": "string", "maxLength": 320, "format": "email"} in probe["properties"]["to"]["anyOf"]
    assert api.get("/docs").status_code == 200


def test_a_fault_inside_triage_is_a_logged_500_problem_and_counted(api: httpx.Client,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    class Exploding:
        def dispatch(self, *args: object) -> None:
            raise RuntimeError("notifier bug")

    services = api.app.state.services  # type: ignore[attr-defined]
    working, services.notifier = services.notifier, Exploding()
    with caplog.at_level("ERROR", logger="errtriage.api"):
        body = problem(api.post("/v1/errors", json=QUOTA), 500)
    assert "notifier bug" not in json.dumps(body)  # the cause is logged, never echoed
    assert any(r.message == "unhandled error" and r.exc_info for r in caplog.records)
    key = ("errtriage_http_requests_total", (("handler", "/v1/errors"), ("method", "POST"), ("status", "500")))
    assert samples(api)[key] == 1
    services.notifier = working
    assert api.post("/v1/errors", json=QUOTA).status_code == 200
