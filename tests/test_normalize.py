"""normalize(): one test per payload shape, each from a public source."""

from __future__ import annotations

import json

import pytest

from service.models import ErrorReport
from service.normalize import (
    MESSAGE_CAP,
    SHAPE_EMPTY_RESULT,
    SHAPE_MCP_RESULT,
    SHAPE_PIPELINE_STEP,
    SHAPE_SDK_ERROR,
    NormalizedError,
    normalize,
)
from service.redact import redact


def norm(**fields: object) -> NormalizedError:
    return normalize(ErrorReport.model_validate(fields))


def test_openai_body() -> None:
    # https://platform.openai.com/docs/guides/error-codes
    n = norm(status=429, raw={"error": {"message": "You exceeded your current quota, please check your plan and "
                                        "billing details.", "type": "insufficient_quota", "param": None,
                                        "code": "insufficient_quota"}})
    assert n.message.startswith("You exceeded your current quota")
    assert n.types == ["insufficient_quota"] and n.codes == ["insufficient_quota"] and n.status == 429


def test_openai_param_is_kept() -> None:
    # https://platform.openai.com/docs/guides/error-codes (invalid_request_error with param)
    n = norm(raw={"error": {"message": "Missing required parameter: 'messages'.", "type": "invalid_request_error",
                            "param": "messages", "code": "missing_required_parameter"}})
    assert n.param == "messages"


def test_anthropic_body() -> None:
    # https://docs.anthropic.com/en/api/errors
    n = norm(raw={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    assert n.types == ["overloaded_error"] and n.message == "Overloaded"


def test_google_body_with_retry_info() -> None:
    # https://ai.google.dev/gemini-api/docs/troubleshooting (429 RESOURCE_EXHAUSTED with RetryInfo)
    n = norm(raw={"error": {"code": 429, "message": "You exceeded your current quota.", "status": "RESOURCE_EXHAUSTED",
                            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"}]}})
    assert n.status == 429 and "RESOURCE_EXHAUSTED" in n.codes and n.retry_after_ms == 20_000


def test_openrouter_body() -> None:
    # https://openrouter.ai/docs/api-reference/errors
    n = norm(raw={"error": {"code": 402, "message": "Insufficient credits",
                            "metadata": {"provider_name": "Anthropic"}}})
    assert n.status == 402 and n.message == "Insufficient credits" and n.upstream == "anthropic"
    assert not any("anthropic" in code for code in n.codes)


def test_ollama_body() -> None:
    # https://github.com/ollama/ollama/blob/main/docs/api.md (errors are {"error": "..."})
    n = norm(raw={"error": "model \"llama3\" not found, try pulling it first"})
    assert n.message == 'model "llama3" not found, try pulling it first' and n.codes == []


def test_github_body() -> None:
    # https://docs.github.com/en/rest/using-the-rest-api/troubleshooting-the-rest-api
    n = norm(raw={"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"})
    assert n.message == "Bad credentials" and n.status == 401 and "docs.github.com" in n.hosts


def test_gitlab_oauth_body() -> None:
    # https://docs.gitlab.com/ee/api/rest/troubleshooting.html
    n = norm(raw={"error": "invalid_token", "error_description": "Token is expired. You can either do re-authorization "
                                                                 "or token refresh."})
    assert n.codes == ["invalid_token"] and n.message.startswith("Token is expired")


def test_bitbucket_body() -> None:
    # https://developer.atlassian.com/cloud/bitbucket/rest/intro/#errors
    n = norm(status=404, raw={"type": "error", "error": {"message": "Repository not found", "detail": "x"}})
    assert n.message == "Repository not found\nx" and n.status == 404  # the detail follows the message


def test_vercel_ai_sdk_error_with_json_response_body() -> None:
    # https://github.com/vercel/ai/blob/main/packages/provider/src/errors/api-call-error.ts
    body = {"error": {"message": "Rate limit reached for gpt-4o", "type": "requests", "code": "rate_limit_exceeded"}}
    n = norm(raw={"name": "AI_APICallError", "message": "Rate limit reached for gpt-4o", "statusCode": 429,
                  "url": "https://api.openai.com/v1/chat/completions", "responseBody": json.dumps(body),
                  "isRetryable": True, "responseHeaders": {"retry-after": "7"}})
    assert n.shape == SHAPE_SDK_ERROR and n.status == 429
    assert "AI_APICallError" in n.types and "rate_limit_exceeded" in n.codes
    assert "api.openai.com" in n.hosts and n.retry_after_ms == 7000


def test_mcp_result_with_json_text_and_meta() -> None:
    # seed 000 (Pipeworx error recovery)
    text = json.dumps({"error": "tool_error", "message": "Missing required parameter: country_code (string)"})
    n = norm(raw={"result": {"content": [{"type": "text", "text": text}],
                             "_meta": {"examples": [{"country_code": "US"}], "retry_hint": "Retry with an example.",
                                       "alternatives": [{"tool": "list_countries"}]}}})
    assert n.shape == SHAPE_MCP_RESULT and n.codes == ["tool_error"]
    assert n.message == "Missing required parameter: country_code (string)"
    assert n.meta["examples"] == [{"country_code": "US"}] and n.meta["retry_hint"] == "Retry with an example."


def test_mcp_error_with_plain_text() -> None:
    # https://modelcontextprotocol.io/specification/2025-06-18/server/tools#error-handling
    n = norm(raw={"content": [{"type": "text", "text": "Failed to fetch weather data: API rate limit exceeded"}],
                  "isError": True})
    assert n.message == "Failed to fetch weather data: API rate limit exceeded"


def test_openai_sdk_message_with_python_repr() -> None:
    # https://github.com/openai/openai-python/blob/main/src/openai/_exceptions.py (APIStatusError str)
    n = norm(message="Error code: 429 - {'error': {'message': 'You exceeded your current quota.', "
                     "'type': 'insufficient_quota', 'param': None, 'code': 'insufficient_quota'}}")
    assert n.status == 429 and n.codes == ["insufficient_quota"]
    assert n.message.startswith("Error code: 429")  # the caller's message is kept as sent


def test_message_with_embedded_json() -> None:
    # https://github.com/PyGithub/PyGithub/blob/main/github/GithubException.py (str: status + data)
    n = norm(message='github.GithubException.BadCredentialsException: 401 {"message": "Bad credentials", '
                     '"documentation_url": "https://docs.github.com/rest"}')
    assert n.status == 401 and "docs.github.com" in n.hosts


def test_zero_results_is_empty_result() -> None:
    # seed 000: fda_drug_events on a misspelled drug
    assert norm(raw={"total": 0, "skip": 0, "limit": 0, "results": []}).shape == SHAPE_EMPTY_RESULT
    # https://docs.github.com/en/rest/search/search
    assert norm(raw={"total_count": 0, "incomplete_results": False, "items": []}).shape == SHAPE_EMPTY_RESULT
    assert norm(raw={"total": 3, "results": [1, 2, 3]}).shape != SHAPE_EMPTY_RESULT
    # a tool's result logged as the message: the same body, as text (Mapbox geocoding, no match)
    assert norm(message='{"type":"FeatureCollection","query":["x"],"features":[]}').shape == SHAPE_EMPTY_RESULT
    assert norm(message='lookup failed: {"features":[]}').shape != SHAPE_EMPTY_RESULT  # words before it: not a result
    assert norm(message='{"error":"bad query","results":[]}').shape != SHAPE_EMPTY_RESULT
    # one level down (Spotify search); every nested result must be empty
    assert norm(raw={"tracks": {"href": "x", "items": [], "total": 0}}).shape == SHAPE_EMPTY_RESULT
    assert norm(raw={"tracks": {"items": []}, "albums": {"items": [{"id": 1}]}}).shape != SHAPE_EMPTY_RESULT
    assert norm(raw={"user": {"name": "x"}}).shape != SHAPE_EMPTY_RESULT


def test_pipeline_step_failed_event() -> None:
    # seed 003: PipelineStepFailedPayload
    n = norm(raw={"event": "pipeline:step-failed", "payload": {
        "stepId": "screenshots", "stepName": "Capture screenshots", "stepIndex": 4, "totalSteps": 9,
        "error": "Navigation timeout of 30000 ms exceeded", "recoverable": True, "timestamp": "2026-11-30T10:00:00Z"}})
    assert n.shape == SHAPE_PIPELINE_STEP and n.message.startswith("Navigation timeout")
    assert n.pipeline == {"stepId": "screenshots", "stepName": "Capture screenshots", "stepIndex": 4,
                          "totalSteps": 9, "recoverable": True}


def test_caller_fields_win_over_raw() -> None:
    n = norm(message="mine", status=500, code="own", raw={"error": {"message": "theirs", "code": "other"}})
    assert n.message == "mine" and n.status == 500 and n.codes[0] == "own"


def test_status_and_hosts_from_text() -> None:
    n = norm(message="fatal: unable to access 'https://gitlab.com/a/b.git/': The requested URL returned error: 403")
    assert "gitlab.com" in n.hosts
    assert norm(message="HTTP 503 Service Unavailable").status == 503
    assert norm(message="Request failed with status code 401").status == 401
    assert norm(message="took 429 ms").status is None


def test_retry_wait_in_text() -> None:
    assert norm(message="Rate limit reached. Please try again in 20s.").retry_after_ms == 20_000
    assert norm(message="Please retry in 1.2s").retry_after_ms == 1200
    assert norm(message="try again in 350ms").retry_after_ms == 350


def test_long_message_keeps_head_and_tail() -> None:
    n = norm(message="HEAD " + "x" * 100_000 + " TAIL insufficient_quota")
    assert len(n.message) <= MESSAGE_CAP + 3
    assert n.message.startswith("HEAD") and n.message.endswith("insufficient_quota")


def test_secrets_are_redacted_before_matching() -> None:
    n = norm(message="Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwxyz0123456789.")
    assert n.message == "Incorrect API key provided: sk-proj-[REDACTED]."


VENDOR_KEYS = (  # (the prefix the mask keeps, the rest of a made-up key in the vendor's documented shape)
    ("sk_live_", "51HAbCdEfGhIjKlMnOpQrStUv"), ("rk_test_", "51HAbCdEfGhIjKlMnOpQrStUv"),
    ("whsec_", "AbCdEfGhIjKlMnOpQrStUvWx"),
    ("hf_", "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"), ("gsk_", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefGHIJKLMN"),
    ("pplx-", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefGH"), ("xai-", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd"),
    ("r8_", "AbCdEfGhIjKlMnOpQrStUvWxYz012345678"), ("fw_", "AbCdEfGhIjKlMnOpQrStUvWx"),
    ("tvly-dev-", "AbCdEfGhIjKlMnOpQrStUvWxYz012345"), ("fc-", "0123456789abcdef0123456789abcdef"),
    ("lsv2_pt_", "0123456789abcdef0123456789abcdef_0123456789"), ("pcsk_", "AbCdEf_0123456789AbCdEfGhIjKlMnOpQrStUv"),
    ("ntn_", "0123456789AbCdEfGhIjKlMnOpQrStUvWxYz"), ("lin_api_", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    ("shpat_", "0123456789abcdef0123456789abcdef"), ("ATATT", "3xFfGF0AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    ("ya29.", "a0AbCdEfGhIjKlMnOpQrStUvWxYz"), ("npm_", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    ("dop_v1_", "0123456789abcdef" * 4), ("SG.", "AbCdEfGhIjKlMnOpQrStUv.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefg"),
    ("sk-ant-", "api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123"), ("sk-or-v1-", "0123456789abcdef0123456789abcdef"),
    ("sk-proj-", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"), ("ghp_", "Ab1" * 12), ("AKIA", "IOSFODNN7EXAMPLE"),
    ("AIza", "SyA1234567890abcdefghijklmnopqrstuv"), ("xoxb-", "123456789012-AbCdEfGhIjKl"),
)


@pytest.mark.parametrize(("prefix", "secret"), VENDOR_KEYS)
@pytest.mark.parametrize("template", ["Error 401: Incorrect API key provided: {key}.", "auth failed ({key}) for /v1/x",
                                      "{{\"error\": \"invalid key\", \"key\": \"{key}\"}}"])
def test_each_vendors_key_is_masked_after_its_prefix_wherever_it_stands(prefix: str, secret: str,
                                                                        template: str) -> None:
    """The prefix says whose key was sent (a Groq key sent to OpenAI), and is no secret."""
    text = template.format(key=prefix + secret)
    assert redact(text) == template.format(key=prefix + "[REDACTED]")


def test_a_key_of_no_known_shape_is_redacted_where_the_text_names_it_a_key() -> None:
    assert redact('{"error": "invalid", "key": "Zx81kqPq09aLm3Ns7Uv2"}') == '{"error": "invalid", "key": "[REDACTED]"}'
    assert redact("Incorrect API key provided: Zx81kqPq09aLm3Ns7Uv2") == "Incorrect API key provided: [REDACTED]"
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    assert redact(f"Incorrect API key provided: {jwt}") == "Incorrect API key provided: [REDACTED]"
    assert redact(f'{{"key": "{jwt}"}}') == '{"key": "[REDACTED]"}'
    for harmless in ("Incorrect API key provided: sk-proj-****abcd", "Invalid token: expired",
                     '"key": "messages.0.content"', "hf_hub_download failed", "model pplx-70b-online not found",
                     '"token": "expired"'):
        assert redact(harmless) == harmless


def test_a_text_with_several_kinds_of_secret_has_each_masked() -> None:
    """The detector names the shapes present; the masking pass runs just those, all of them."""
    text = ("Authorization: Bearer abcdefghijklmnop; sent gsk_AbCdEfGhIjKlMnOpQrStUvWx to "
            "https://bot:hunter2hunter2@git.example.org/r.git?token=zzzzzzzz with api_key=q1w2e3r4")
    assert redact(text) == ("Authorization: Bearer [REDACTED]; sent gsk_[REDACTED] to "
                            "https://bot:[REDACTED]@git.example.org/r.git?token=[REDACTED] with api_key=[REDACTED]")


def test_scheme_names_in_prose_are_not_credentials() -> None:
    assert redact("Basic authentication with passwords is deprecated") == (
        "Basic authentication with passwords is deprecated")
    assert redact("Bearer token required for this endpoint") == "Bearer token required for this endpoint"
    assert redact("Authorization: Basic dXNlcjpwYXNzd29yZA==") == "Authorization: Basic [REDACTED]"
    assert redact("Authorization: Bearer abcdefghijklmnop") == "Authorization: Bearer [REDACTED]"
    assert redact("Bearer tokenized-abc123") == "Bearer [REDACTED]"  # a word only as a whole


def test_hostile_shapes_never_raise() -> None:
    deep: object = "x"
    for _ in range(500):
        deep = {"error": deep}
    for raw in (deep, [[[]]], "{" * 5000, "not json", 42, True, {"error": {"code": True, "status": [1]}},
                {"content": "x"}, {"result": {"content": [{"text": "{" * 3000}]}}):
        normalize(ErrorReport(raw=raw))
    normalize(ErrorReport(message="Error code: 500 - {" + "'a': {" * 3000))


def test_digit_like_characters_are_not_statuses() -> None:
    """'¹'.isdigit() is True but int('¹') raises: found by hypothesis."""
    assert norm(raw={"error": {"status": "¹", "message": "x"}}).status is None
    assert "¹" in norm(raw={"error": {"status": "¹", "message": "x"}}).codes
    assert norm(raw={"statusCode": "429", "message": "x"}).status == 429
