"""normalize(): shapes added for the default rule tables, one test each, each from a public source."""

from __future__ import annotations

from service.models import ErrorReport
from service.normalize import NormalizedError, normalize


def norm(**fields: object) -> NormalizedError:
    return normalize(ErrorReport.model_validate(fields))


def test_stderr_is_appended_to_the_message() -> None:
    # https://github.com/requarks/wiki-v1/issues/94 (Wiki.js git error object)
    n = norm(raw={"code": 1, "message": "`git pull origin master` failed with code 1",
                  "stderr": "Permission denied (publickey).\r\nfatal: Could not read from remote repository.\n"})
    assert n.message.startswith("`git pull origin master` failed")
    assert "Permission denied (publickey)." in n.message


def test_stderr_alone_is_the_message_and_the_command_names_the_host() -> None:
    # https://github.com/protobox/protobox/issues/87 (Ansible git task result)
    n = norm(raw={"cmd": ["/usr/bin/git", "ls-remote", "git@bitbucket.org:snetty/maybestand.git"], "failed": True,
                  "rc": 128, "stderr": "Permission denied (publickey).\nfatal: The remote end hung up unexpectedly"})
    assert n.message.startswith("Permission denied (publickey).")
    assert "bitbucket.org" in n.hosts


def test_error_description_beside_error_message() -> None:
    # https://github.com/n8n-io/n8n/issues/19117 (n8n node error)
    n = norm(raw={"errorMessage": "OpenAI: Rate limit reached",
                  "errorDescription": "Rate limit exceeded: free-models-per-day. Add 10 credits"})
    assert n.message.startswith("OpenAI: Rate limit reached")
    assert "free-models-per-day" in n.message


def test_caller_message_wins_and_notes_are_not_repeated() -> None:
    n = norm(message="Permission denied (publickey).", raw={"stderr": "Permission denied (publickey)."})
    assert n.message == "Permission denied (publickey)."


def test_hosts_from_the_context_base_url() -> None:
    # https://github.com/ollama/ollama/issues/13776 (Claude Code against Ollama Cloud)
    n = norm(message="401 unauthorized", status=401,
             context={"ANTHROPIC_BASE_URL": "https://ollama.com", "user_email": "dev@example.com"})
    assert n.hosts == ["ollama.com"]


def test_context_url_key() -> None:
    # https://github.com/jakobdylanc/llmcord/issues/62
    n = norm(message="openai.APIError: Service Unavailable",
             context={"url": "https://api.groq.com/openai/v1/chat/completions", "work_name": "example.com"})
    assert n.hosts == ["api.groq.com"]


def test_message_that_is_itself_a_json_body() -> None:
    # https://github.com/continuedev/continue/issues/9330 (@google/genai ApiError)
    inner = ('{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", '
             '"status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", '
             '"reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}')
    n = norm(raw={"error": {"message": inner, "code": 400, "status": "Bad Request"}})
    assert n.message == "API key not valid. Please pass a valid API key."
    assert "INVALID_ARGUMENT" in n.codes and "API_KEY_INVALID" in n.codes
    assert n.status == 400


def test_json_body_inside_an_embedded_message() -> None:
    # https://github.com/google-gemini/gemini-cli/issues/1906
    text = ('[API Error: {"error":{"message":"{\\n  \\"error\\": {\\n    \\"code\\": 429,\\n    \\"message\\": '
            '\\"Resource has been exhausted (e.g. check quota).\\",'
            '\\n    \\"status\\": \\"RESOURCE_EXHAUSTED\\"\\n  }\\n}\\n",'
            '"code":429,"status":"Too Many Requests"}}]')
    n = norm(message=text)
    assert n.message == text
    assert "RESOURCE_EXHAUSTED" in n.codes and n.status == 429


def test_blocked_candidates_become_codes() -> None:
    # https://github.com/CherryHQ/cherry-studio/issues/664 (Gemini 200 body, finishReason SAFETY)
    n = norm(raw={"candidates": [{"finishReason": "SAFETY", "safetyRatings": [
        {"category": "HARM_CATEGORY_SEXUALLY_EXPLICIT", "probability": "HIGH", "blocked": True}]}]})
    assert n.codes == ["SAFETY"]


def test_prompt_feedback_block_reason_and_normal_finish() -> None:
    # https://ai.google.dev/api/generate-content#PromptFeedback ; a normal stop adds nothing
    assert norm(raw={"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}).codes == ["PROHIBITED_CONTENT"]
    assert norm(raw={"candidates": [{"finishReason": "STOP"}], "id": "x"}).codes == []
    assert norm(raw={"choices": [{"finish_reason": "content_filter"}]}).codes == ["content_filter"]


def test_detail_beside_the_message_is_kept() -> None:
    # https://github.com/sourcebot-dev/sourcebot/issues/295 (Bitbucket Cloud 404 body)
    n = norm(status=404, raw={"type": "error", "error": {"message": "Resource not found", "detail": (
        "There is no API hosted at this URL.\n\nFor information about our API's, please refer to the documentation "
        "at: https://developer.atlassian.com/bitbucket/api/2/reference/")}})
    assert n.message.startswith("Resource not found\nThere is no API hosted at this URL.")


def test_body_of_no_known_shape_is_rendered_as_text() -> None:
    # https://github.com/ollama/ollama/issues/11704 (message under the wrong key, ollama#11781)
    n = norm(raw={"error parsing tool call": "invalid character 'c' looking for beginning of value"})
    assert n.message == "error parsing tool call: invalid character 'c' looking for beginning of value"
    assert norm(raw={"total": 0, "results": []}).message == ""


def test_status_from_an_api_error_prefix() -> None:
    # https://github.com/farion1231/cc-switch/issues/464 (Claude Code rendering, body cut short)
    assert norm(message='API Error: 400 {"error":{"message":"Provider returned error","code":400').status == 400
    assert norm(message="⏺ API Error: 529 Overloaded.").status == 529


def test_google_quota_failure_ids_become_codes() -> None:
    # https://github.com/google-gemini/gemini-cli/issues/8437 (QuotaFailure detail of a Gemini 429)
    n = norm(raw={"error": {"code": 429, "message": "You exceeded your current quota, please check your plan and "
                            "billing details.", "status": "RESOURCE_EXHAUSTED", "details": [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
            {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
             "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "59s"}]}})
    assert n.codes == ["RESOURCE_EXHAUSTED", "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"]
    assert n.retry_after_ms == 59_000


def test_available_tools_from_a_no_such_tool_error() -> None:
    # https://github.com/Kilo-Org/kilocode/pull/13446 (serialized AI SDK NoSuchToolError)
    n = norm(raw={"name": "AI_NoSuchToolError", "message": "Model tried to call unavailable tool 'Write'. "
                  "Available tools: question, bash.", "toolName": "Write", "availableTools": ["question", "bash"]})
    assert n.context["available_tools"] == ["question", "bash"]
    # seed 003: only the rendered message
    n = norm(message="Model tried to call unavailable tool 'searchWeb'. Available tools: web_search, read_url.")
    assert n.context["available_tools"] == ["web_search", "read_url"]
    # the caller's own list wins
    n = norm(message="Available tools: a, b.", context={"available_tools": ["web_search"]})
    assert n.context["available_tools"] == ["web_search"]
