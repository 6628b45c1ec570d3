"""Recovery advice with the shipped tables, payloads in the exact shapes of the seeds."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from errtriage_client import Client, GaveUp, NeedsAgent

from examples.agent_loop import ToolFailed, call_with_recovery
from service.models import ErrorReport
from service.rules.engine import Ruleset
from service.triage import triage

ROOT = Path(__file__).resolve().parent.parent


def advise(ruleset: Ruleset, **report: Any) -> dict[str, Any]:
    classification, _, _ = triage(ErrorReport.model_validate(report), ruleset, "t")
    return classification.model_dump(mode="json")


def mcp_result(error: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Seed 000's shape: the error as JSON text in content[], recovery guidance in _meta."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": json.dumps(error)}]}
    if meta is not None:
        result["_meta"] = meta
    return {"result": result}


PIPEWORX_META = {
    "alternatives": [{"tool": "list_countries", "reason": "Find a valid country_code first"}],
    "examples": [{"country_code": "US"}, {"country_code": "GB"}],
    "retry_hint": "Retry the same tool with arguments matching one of the example shapes.",
    "feedback_hint": "If this looks like a bug in is_today_holiday, file pipeworx_feedback({type:\"bug\", ...}).",
    "tier": "anonymous",
}


def test_missing_parameter_keeps_the_payloads_guidance(shipped: Ruleset) -> None:
    body = advise(shipped, tool="is_today_holiday", raw=mcp_result(
        {"error": "tool_error", "message": "Missing required parameter: country_code (string)"}, PIPEWORX_META))
    assert (body["class"], body["reason"]) == ("tool_calling", "invalid_arguments")
    assert body["details"]["parameter"] == "country_code"
    recovery = body["recovery"]
    assert recovery["action"] == "fix_arguments"
    assert recovery["examples"][:2] == PIPEWORX_META["examples"]
    assert recovery["alternatives"][0] == PIPEWORX_META["alternatives"][0]
    assert recovery["retry_hint"] == PIPEWORX_META["retry_hint"]
    assert recovery["feedback_hint"] == PIPEWORX_META["feedback_hint"]
    assert recovery["backoff_ms"] == [1000, 3000] and recovery["max_attempts"] == 3


def test_tool_calling_attempts_are_capped_then_switch_model(shipped: Ruleset) -> None:
    message = "ct_get_study received an invalid argument: nct_id is required but was not provided."
    first, second, third = (advise(shipped, message=message, tool="ct_get_study", attempt=n) for n in (1, 2, 3))
    assert [r["recovery"]["attempts_left"] for r in (first, second, third)] == [2, 1, 0]
    assert [r["recovery"]["backoff_ms"] for r in (first, second)] == [[1000, 3000], [1000]]
    assert first["retryable"] and second["retryable"] and not third["retryable"]
    assert third["recovery"]["action"] == "switch_model" and third["recovery"]["backoff_ms"] == []
    assert first["details"]["parameter"] == "nct_id"


def test_exhausted_provider_retries_escalate(shipped: Ruleset) -> None:
    body = advise(shipped, raw={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
                  attempt=3)
    assert body["reason"] == "overloaded" and not body["retryable"] and body["recovery"]["action"] == "escalate"


def test_unknown_tool_suggests_real_names_and_no_retry_hint(shipped: Ruleset) -> None:
    body = advise(shipped, message="Model tried to call unavailable tool 'searchWeb'. Available tools: web_search.",
                  context={"available_tools": ["read_file", "web_search", "fetch_url", "search_files"]},
                  raw=mcp_result({"error": "unknown_tool"},
                                 {"retry_hint": "try again", "alternatives": [{"tool": "x"}]}))
    recovery = body["recovery"]
    assert (body["class"], body["reason"], recovery["action"]) == ("tool_calling", "unknown_tool", "discover_tool")
    assert recovery["retry_hint"] is None and recovery["alternatives"] == []
    assert recovery["suggested_tools"][0] == "web_search"
    assert body["details"]["tool"] == "searchWeb"


@pytest.mark.parametrize(("message", "argument"), [
    # the tool messages seed 000 describes (pipeworx-io packs), as the corpus quotes them
    ("ATTOM API key required. Get one at https://api.gateway.attomdata.com and pass via _apiKey.", "_apiKey"),
    ("Altos Research API key required. Get one at https://altosresearch.com and pass via _altosKey.", "_altosKey"),
])
def test_credentials_name_the_exact_argument(shipped: Ruleset, message: str, argument: str) -> None:
    body = advise(shipped, message=message, tool="attom_avm")
    assert (body["class"], body["recovery"]["action"]) == ("auth_required", "provide_credentials")
    assert body["details"]["key_argument"] == argument and not body["retryable"]
    assert argument in body["recovery"]["retry_hint"] and "_apikey" not in body["recovery"]["retry_hint"]


def test_a_hint_whose_capture_is_missing_never_shows_its_placeholder(shipped: Ruleset) -> None:
    """The key argument named in a phrasing no pattern captures: the hint says it without it."""
    body = advise(shipped, message="Altos Research API key required. This tool reads its key from the _altosKey "
                  "argument.", tool="altos_market_stats")
    assert body["class"] == "auth_required" and "key_argument" not in body["details"]
    hint = body["recovery"]["retry_hint"]
    assert hint and "{" not in hint and "}" not in hint and "exact argument name the message gives" in hint


def test_zero_results_is_a_question_about_the_input(shipped: Ruleset) -> None:
    body = advise(shipped, tool="fda_drug_events", raw={"total": 0, "skip": 0, "limit": 0, "results": []})
    assert (body["class"], body["reason"], body["retryable"]) == ("empty_result", "zero_results", False)
    assert body["recovery"]["action"] == "check_input" and "before reporting" in body["recovery"]["retry_hint"]


@pytest.mark.parametrize("report", [
    {"message": ("Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM). "
                 "Please try again in 20s.")},
    {"raw": {"error": {"code": 429, "message": "Resource exhausted. Please try again later.",
                       "status": "RESOURCE_EXHAUSTED", "details": [
                           {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"}]}}},
    {"raw": {"name": "AI_APICallError", "message": "Rate limited", "statusCode": 429,
             "url": "https://api.anthropic.com/v1/messages", "responseHeaders": {"retry-after": "20"},
             "responseBody": "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"rate\"}}"}},
])
def test_the_providers_own_wait_comes_first(shipped: Ruleset, report: dict[str, Any]) -> None:
    body = advise(shipped, **report)
    assert (body["class"], body["reason"]) == ("ai_provider", "rate_limited")
    assert body["recovery"]["backoff_ms"][0] == 20_000 and body["retryable"]


def test_aborts_are_never_retried(shipped: Ruleset) -> None:
    for attempt in (1, 2):
        body = advise(shipped, type="AbortError", message="This operation was aborted", attempt=attempt)
        assert body["class"] == "aborted" and not body["retryable"] and body["recovery"]["backoff_ms"] == []


def test_a_crashed_tool_gets_a_feedback_hint_ready_to_file(shipped: Ruleset) -> None:
    body = advise(shipped, tool="ct_get_study",
                  message="Cannot read properties of undefined (reading 'protocolSection')")
    assert (body["class"], body["reason"]) == ("tool_error", "internal")
    hint = body["recovery"]["feedback_hint"]
    assert "ct_get_study" in hint and "Cannot read properties of undefined" in hint


@pytest.mark.parametrize(("recoverable", "can_continue", "nxt"), [
    (True, True, "continue"), (False, False, "resume_from_checkpoint")])
def test_pipeline_step_failed_event_is_a_report(live: Callable[..., httpx.Client], recoverable: bool,
                                                can_continue: bool, nxt: str) -> None:
    event = {"stepId": "seo", "stepName": "SEO analysis", "stepIndex": 6, "totalSteps": 9,
             "error": "Navigation timeout of 30000 ms exceeded", "recoverable": recoverable,
             "timestamp": "2026-11-30T10:00:00Z"}
    api = live()
    for body in (event, {"event": "pipeline:step-failed", "payload": event}):
        answer = api.post("/v1/classify", json=body)
        assert answer.status_code == 200, answer.text
        pipeline = answer.json()["details"]["pipeline"]
        assert (pipeline["can_continue"], pipeline["next"], pipeline["stepId"]) == (can_continue, nxt, "seo")


def test_the_documented_agent_loop_recovers_against_a_real_server(live: Callable[..., httpx.Client]) -> None:
    api = live()
    calls: list[tuple[str, dict[str, Any]]] = []

    def tool_server(tool: str, arguments: dict[str, Any]) -> str:
        calls.append((tool, dict(arguments)))
        if tool != "is_today_holiday":
            raise ToolFailed({"error": "unknown_tool", "message": f"Unknown tool: {tool}"})
        if "country_code" not in arguments:
            raise ToolFailed(mcp_result({"error": "tool_error",
                                         "message": "Missing required parameter: country_code (string)"},
                                        PIPEWORX_META))
        return f"holiday in {arguments['country_code']}: no"

    waits: list[float] = []
    with Client(str(api.base_url), raise_errors=True) as errtriage:
        answer = call_with_recovery(tool_server, "isTodayHoliday", {}, ["list_countries", "is_today_holiday"],
                                    errtriage, sleep=waits.append)
    assert answer == "holiday in US: no"
    assert [c[0] for c in calls] == ["isTodayHoliday", "is_today_holiday", "is_today_holiday"]
    assert waits == [1.0, 1.0]
    docs = (ROOT / "docs" / "agents.md").read_text()
    example = (ROOT / "examples" / "agent_loop.py").read_text()
    body = example[example.index("def call_with_recovery"):]
    assert body.strip() in docs, "the agent loop in docs/agents.md must be examples/agent_loop.py"


def test_the_agent_loop_gives_up_when_advised(live: Callable[..., httpx.Client]) -> None:
    api = live()

    def always_broken(tool: str, arguments: dict[str, Any]) -> str:
        raise ToolFailed({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota",
                                    "code": "insufficient_quota"}})

    with Client(str(api.base_url), raise_errors=True) as errtriage, pytest.raises(
            RuntimeError, match=re.escape("ai_credits/quota_exceeded: top_up_credits")) as stopped:
        call_with_recovery(always_broken, "summarize", {}, [], errtriage, sleep=lambda s: None)
    assert isinstance(stopped.value, GaveUp) and stopped.value.attempt == 1
    assert isinstance(stopped.value.__cause__, ToolFailed)


def test_the_agent_loop_hands_credentials_back_to_its_caller(live: Callable[..., httpx.Client]) -> None:
    api = live()
    calls: list[str] = []

    def needs_key(tool: str, arguments: dict[str, Any]) -> str:
        calls.append(tool)
        raise ToolFailed(mcp_result({"error": "tool_error", "message": "ATTOM API key required. Get one at "
                                     "https://api.gateway.attomdata.com and pass via _apiKey."}))

    with Client(str(api.base_url), raise_errors=True) as errtriage, pytest.raises(NeedsAgent) as needed:
        call_with_recovery(needs_key, "attom_avm", {}, [], errtriage, sleep=lambda s: pytest.fail("no wait"))
    assert calls == ["attom_avm"] and needed.value.action == "provide_credentials"
    assert needed.value.classification.details["key_argument"] == "_apiKey" and "_apiKey" in needed.value.hint
