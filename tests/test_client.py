"""errtriage_client against a real server (uvicorn over HTTP), with exceptions shaped like the SDKs'."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from errtriage_client import (
    AsyncClient,
    Classification,
    Client,
    ErrtriageError,
    GaveUp,
    LoggingHandler,
    NeedsAgent,
    follow_recovery,
    follow_recovery_async,
    from_exception,
    recovering,
)

from tests.servers import free_port

# --- exception classes shaped like the SDKs' (the stacks themselves are not installed) ---------------


def sdk_class(module: str, name: str, base: type[Exception] = Exception) -> type[Exception]:
    return type(name, (base,), {"__module__": module})


OpenAIError = sdk_class("openai", "APIStatusError")
OpenAIRateLimitError = sdk_class("openai", "RateLimitError", OpenAIError)
AnthropicError = sdk_class("anthropic", "APIStatusError")
AnthropicOverloaded = sdk_class("anthropic._exceptions", "OverloadedError", AnthropicError)
GenaiError = sdk_class("google.genai.errors", "ClientError")
BotoClientError = sdk_class("botocore.exceptions", "ClientError")
RequestsHTTPError = sdk_class("requests.exceptions", "HTTPError", OSError)


def openai_quota() -> Exception:
    body = {"message": "You exceeded your current quota, please check your plan and billing details.",
            "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}
    exc = OpenAIRateLimitError(f"Error code: 429 - {{'error': {body!r}}}")
    exc.status_code, exc.body, exc.code, exc.type = 429, body, "insufficient_quota", "insufficient_quota"  # type: ignore[attr-defined]
    return exc


def anthropic_overloaded() -> Exception:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    exc = AnthropicOverloaded(f"Error code: 529 - {body!r}")
    exc.status_code, exc.body = 529, body  # type: ignore[attr-defined]
    return exc


def genai_exhausted() -> Exception:
    details = {"error": {"code": 429, "message": "Resource exhausted. Please try again later.",
                         "status": "RESOURCE_EXHAUSTED", "details": [
                             {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"}]}}
    exc = GenaiError("429 RESOURCE_EXHAUSTED. {'error': {'code': 429, 'message': 'Resource exhausted.'}}")
    exc.code, exc.status, exc.message, exc.details = 429, "RESOURCE_EXHAUSTED", "Resource exhausted.", details  # type: ignore[attr-defined]
    return exc


def bedrock_throttled() -> Exception:
    exc = BotoClientError("An error occurred (ThrottlingException) when calling the InvokeModel operation "
                          "(reached max retries: 4): Too many requests, please wait before trying again.")
    exc.response = {"Error": {"Code": "ThrottlingException", "Message": "Too many requests"},  # type: ignore[attr-defined]
                    "ResponseMetadata": {"HTTPStatusCode": 429, "HTTPHeaders": {"x-amzn-requestid": "r-1"}}}
    exc.operation_name = "InvokeModel"  # type: ignore[attr-defined]
    return exc


def httpx_rate_limited() -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions?key=sk-secret")
    response = httpx.Response(429, request=request, headers={"retry-after": "20", "authorization": "Bearer x"},
                              json={"error": {"message": "Rate limit reached for gpt-4o in organization org-x on "
                                                         "tokens per min (TPM).",
                                              "type": "tokens", "code": "rate_limit_exceeded"}})
    try:
        response.raise_for_status()
    except httpx.HTTPStatusError as exc:
        return exc
    raise AssertionError("unreachable")


class _RequestsResponse:
    def __init__(self, status: int, text: str, url: str) -> None:
        self.status_code, self.text, self.url = status, text, url
        self.headers: dict[str, str] = {}


def requests_bad_credentials() -> Exception:
    url = "https://api.github.com/repos/o/r/pulls"
    exc = RequestsHTTPError(f"401 Client Error: Unauthorized for url: {url}")
    exc.response = _RequestsResponse(401, '{"message": "Bad credentials", "documentation_url": '  # type: ignore[attr-defined]
                                     '"https://docs.github.com/rest", "status": "401"}', url)
    exc.request = None  # type: ignore[attr-defined]
    return exc


def git_push_denied() -> subprocess.CalledProcessError:
    stderr = (b"remote: Invalid username or password.\n"
              b"fatal: Authentication failed for 'https://github.com/acme/app.git/'\n")
    return subprocess.CalledProcessError(128, ["git", "push", "origin", "main"], output=b"", stderr=stderr)


# --- reports built from exceptions, no server ------------------------------------------------------


def test_reports_take_each_stacks_own_attributes() -> None:
    assert from_exception(openai_quota()) == {
        "type": "RateLimitError", "message": openai_quota().args[0], "status": 429, "code": "insufficient_quota",
        "provider": "openai", "raw": openai_quota().body}  # type: ignore[attr-defined]
    anthropic = from_exception(anthropic_overloaded())
    assert (anthropic["type"], anthropic["status"], anthropic["provider"]) == ("OverloadedError", 529, "anthropic")
    assert anthropic["raw"]["error"]["type"] == "overloaded_error" and "code" not in anthropic
    genai = from_exception(genai_exhausted())
    assert (genai["status"], genai["code"], genai["provider"]) == (429, "RESOURCE_EXHAUSTED", "google")
    boto = from_exception(bedrock_throttled())
    assert (boto["status"], boto["code"], boto["provider"]) == (429, "ThrottlingException", "aws_bedrock")
    assert boto["raw"] == {"Code": "ThrottlingException", "Message": "Too many requests"}


def test_http_errors_carry_the_body_the_wait_and_the_url_but_no_secrets() -> None:
    report = from_exception(httpx_rate_limited())
    assert (report["type"], report["status"]) == ("HTTPStatusError", 429) and "provider" not in report
    assert report["context"] == {"url": "https://api.openai.com/v1/chat/completions"}  # no query string
    assert report["raw"]["responseHeaders"] == {"retry-after": "20"}  # the wait, never Authorization
    assert report["raw"]["responseBody"]["error"]["code"] == "rate_limit_exceeded"
    github = from_exception(requests_bad_credentials())
    assert (github["type"], github["status"], github["raw"]["message"]) == ("HTTPError", 401, "Bad credentials")
    assert github["context"] == {"url": "https://api.github.com/repos/o/r/pulls"}


def test_an_sdk_calling_another_host_gets_no_provider_hint() -> None:
    exc = OpenAIRateLimitError("Error code: 429 - rate limited")
    exc.status_code = 429  # type: ignore[attr-defined]
    exc.request = httpx.Request("POST", "https://openrouter.ai/api/v1/chat/completions")  # type: ignore[attr-defined]
    report = from_exception(exc)
    assert "provider" not in report and report["context"]["url"].startswith("https://openrouter.ai/")


def test_git_errors_report_stderr_and_the_command() -> None:
    report = from_exception(git_push_denied())
    assert report["type"] == "CalledProcessError"
    assert report["message"].startswith("remote: Invalid username or password.")
    assert report["raw"] == {"command": ["git", "push", "origin", "main"], "returncode": 128}


def test_a_wrapper_takes_what_the_error_it_wraps_carries() -> None:
    class ChainError(Exception):
        pass

    try:
        try:
            raise openai_quota()
        except Exception as exc:
            raise ChainError("summarize chain failed") from exc
    except ChainError as wrapper:
        report = from_exception(wrapper)
    assert (report["type"], report["status"], report["code"], report["provider"]) == (
        "ChainError", 429, "insufficient_quota", "openai")
    assert report["message"].startswith("summarize chain failed\nRateLimitError: Error code: 429")
    try:
        try:
            raise openai_quota()
        except OpenAIRateLimitError:
            raise KeyError("unrelated")  # noqa: B904 - an implicit context is not what failed
    except KeyError as unrelated:
        assert "status" not in from_exception(unrelated)


def test_strange_exceptions_still_make_a_report() -> None:
    class Weird(Exception):
        @property
        def status_code(self) -> int:
            raise RuntimeError("no")

        def __str__(self) -> str:
            raise ValueError("unprintable")

    assert from_exception(Weird()) == {"type": "Weird", "message": "Weird"}
    odd = ValueError("x")
    odd.body = {"when": object(), b"k": {1, 2}}  # type: ignore[attr-defined]
    assert isinstance(from_exception(odd)["raw"]["when"], str)


# --- against a real server --------------------------------------------------------------------------


@pytest.fixture
def url(live: Callable[..., httpx.Client]) -> str:
    return str(live().base_url)


@pytest.mark.parametrize(("make", "expected"), [
    (openai_quota, ("ai_credits", "quota_exceeded", "openai", False)),
    (anthropic_overloaded, ("ai_provider", "overloaded", "anthropic", True)),
    (genai_exhausted, ("ai_provider", "rate_limited", "google", True)),
    (bedrock_throttled, ("ai_provider", "rate_limited", "aws_bedrock", True)),
    (httpx_rate_limited, ("ai_provider", "rate_limited", "openai", True)),
    (requests_bad_credentials, ("git_auth", "invalid_token", "github", False)),
    (git_push_denied, ("git_auth", "invalid_token", "github", False)),
])
def test_sdk_exceptions_are_classified_by_a_real_server(url: str, make: Callable[[], BaseException],
                                                        expected: tuple[str, str, str, bool]) -> None:
    with Client(url, raise_errors=True) as errtriage:
        answer = errtriage.classify(make())
    assert isinstance(answer, Classification)
    assert (answer.class_, answer.reason, answer.provider, answer.retryable) == expected
    assert answer.decided_by == "rule" and answer.confidence == 1.0 and answer.rule
    assert answer.rules_version.startswith("sha256:") and answer.notification is None


def test_the_providers_wait_comes_back_typed(url: str) -> None:
    with Client(url) as errtriage:
        for make in (genai_exhausted, httpx_rate_limited):
            answer = errtriage.classify(make(), attempt=1)
            assert answer is not None and answer.recovery.backoff_ms[0] == 20_000
            assert answer.recovery.next_wait_seconds == 20.0


def test_report_notifies_and_classify_explains(url: str) -> None:
    with Client(url, source="agent-runner", context={"user_email": "dev@example.com"}) as errtriage:
        reported = errtriage.report(openai_quota(), tool="summarize", attempt=1)
        explained = errtriage.classify({"message": "Overloaded", "type": "overloaded_error"}, explain=True)
    assert reported is not None and reported.notification is not None
    assert reported.notification.status == "queued" and reported.notification.route == "ai-credits-user"
    assert reported.recovery.action == "top_up_credits" and reported.recovery.attempts_left == 0
    assert explained is not None and explained.explain and explained.notification is None


def test_async_client(url: str) -> None:
    async def run() -> tuple[Classification | None, Classification | None]:
        async with AsyncClient(url) as errtriage:
            return await errtriage.classify(anthropic_overloaded()), await errtriage.report(git_push_denied())

    classified, reported = asyncio.run(run())
    assert classified is not None and classified.reason == "overloaded"
    assert reported is not None and reported.class_ == "git_auth" and reported.notification is not None


def test_never_raises_into_the_error_path_unless_asked(url: str, caplog: pytest.LogCaptureFixture) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    caplog.set_level(logging.DEBUG, logger="errtriage_client")
    started = time.monotonic()
    with Client(down) as errtriage:
        assert errtriage.report(openai_quota()) is None
    assert time.monotonic() - started < 2.5
    assert any("ConnectError" in r.getMessage() for r in caplog.records if r.name == "errtriage_client")
    with Client(url) as errtriage:
        assert errtriage.classify({"context": {"user_id": "u"}}) is None  # 422: no key field
        assert errtriage.classify({"message": "x", "context": {"not json": object()}}) is None
    with Client(down, raise_errors=True) as errtriage, pytest.raises(ErrtriageError) as refused:
        errtriage.classify(openai_quota())
    assert refused.value.status is None and isinstance(refused.value.__cause__, httpx.ConnectError)
    with Client(url, raise_errors=True) as errtriage, pytest.raises(ErrtriageError) as invalid:
        errtriage.classify({"context": {"user_id": "u"}})
    assert invalid.value.status == 422


def test_a_slow_server_costs_at_most_the_short_timeout() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with Client("http://errtriage.invalid", transport=httpx.MockTransport(slow)) as errtriage:
        assert errtriage.timeout == 2.0 and errtriage.report(ValueError("x")) is None


# --- follow_recovery ---------------------------------------------------------------------------------


class Flaky:
    """Fails with the given exceptions in order, then answers."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


def test_retries_with_the_advised_backoff_then_succeeds(url: str) -> None:
    waits: list[float] = []
    call = Flaky(anthropic_overloaded(), anthropic_overloaded())
    with Client(url) as errtriage:
        assert follow_recovery(errtriage, call, tool="chat", sleep=waits.append) == "ok"
    assert call.calls == 3 and len(waits) == 2 and all(w > 0 for w in waits)


def test_stops_when_the_attempts_are_used_up_and_passes_attempt(url: str) -> None:
    waits: list[float] = []
    call = Flaky(*(anthropic_overloaded() for _ in range(5)))
    with Client(url) as errtriage, pytest.raises(GaveUp, match="ai_provider/overloaded: escalate") as stopped:
        follow_recovery(errtriage, call, sleep=waits.append)
    assert call.calls == 3 and len(waits) == 2  # the server said attempts_left 0 at attempt 3
    assert stopped.value.attempt == 3 and stopped.value.classification.recovery.attempts_left == 0
    assert not stopped.value.classification.retryable
    assert isinstance(stopped.value.__cause__, AnthropicOverloaded)
    call = Flaky(*(anthropic_overloaded() for _ in range(5)))
    with Client(url) as errtriage, pytest.raises(GaveUp) as capped:
        follow_recovery(errtriage, call, max_attempts=2, sleep=waits.append)
    assert call.calls == 2 and capped.value.classification.retryable  # our own cap, below the server's


def test_non_retryable_stops_at_once(url: str) -> None:
    call = Flaky(openai_quota())
    with Client(url) as errtriage, pytest.raises(GaveUp, match="ai_credits/quota_exceeded: top_up_credits"):
        follow_recovery(errtriage, call, sleep=lambda s: pytest.fail("must not wait"))
    assert call.calls == 1


def test_agent_actions_are_handed_back_with_the_hint(url: str) -> None:
    failure = ValueError("ATTOM API key required. Get one at https://api.gateway.attomdata.com and pass via _apiKey.")
    with Client(url) as errtriage, pytest.raises(NeedsAgent) as needed:
        follow_recovery(errtriage, Flaky(failure), tool="attom_avm", sleep=lambda s: None)
    assert needed.value.action == "provide_credentials" and "_apiKey" in (needed.value.hint or "")
    assert needed.value.classification.details["key_argument"] == "_apiKey"
    assert needed.value.__cause__ is failure and needed.value.next_attempt == 2
    missing = ValueError("ct_get_study received an invalid argument: nct_id is required but was not provided.")
    with Client(url) as errtriage, pytest.raises(NeedsAgent) as fix:
        follow_recovery(errtriage, Flaky(missing), tool="ct_get_study", attempt=2, sleep=lambda s: None)
    assert fix.value.action == "fix_arguments" and fix.value.attempt == 2
    assert fix.value.classification.recovery.attempts_left == 1 and fix.value.wait_seconds == 1.0
    with Client(url) as errtriage, pytest.raises(GaveUp) as capped:  # no try left for the repair
        follow_recovery(errtriage, Flaky(missing), tool="ct_get_study", attempt=2, max_attempts=2)
    assert capped.value.action == "fix_arguments" and capped.value.attempt == 2


def test_errtriage_down_reraises_the_calls_own_error() -> None:
    failure = anthropic_overloaded()
    with (Client(f"http://127.0.0.1:{free_port()}", timeout=0.5) as errtriage,
          pytest.raises(AnthropicOverloaded) as raised):
        follow_recovery(errtriage, Flaky(failure), sleep=lambda s: None)
    assert raised.value is failure


def test_errors_not_retried_on_pass_through(url: str) -> None:
    with Client(url) as errtriage, pytest.raises(KeyError):
        follow_recovery(errtriage, Flaky(KeyError("k")), retry_on=ValueError)


def test_decorator_and_async_forms(url: str) -> None:
    call = Flaky(anthropic_overloaded())
    with Client(url) as errtriage:
        wrapped = recovering(errtriage, tool="chat", sleep=lambda s: None)(lambda suffix: call() + suffix)
        assert wrapped("!") == "ok!" and call.calls == 2

    async def run() -> str:
        flaky = Flaky(anthropic_overloaded())
        waits: list[float] = []

        async def attempt() -> str:
            return flaky()

        async def sleep(seconds: float) -> None:
            waits.append(seconds)

        async with AsyncClient(url) as errtriage:
            result = await follow_recovery_async(errtriage, attempt, sleep=sleep)
        assert flaky.calls == 2 and len(waits) == 1
        return result

    assert asyncio.run(run()) == "ok"


# --- LoggingHandler ----------------------------------------------------------------------------------


@pytest.fixture
def app_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("tests.client.app")
    logger.propagate, logger.level = False, logging.DEBUG
    yield logger
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


def test_handler_posts_error_records_with_exceptions(live: Callable[..., httpx.Client],
                                                     app_logger: logging.Logger) -> None:
    api = live()
    handler = LoggingHandler(str(api.base_url), source="worker", context={"user_email": "dev@example.com"})
    app_logger.addHandler(handler)
    try:
        raise openai_quota()
    except Exception:
        app_logger.exception("summarize failed for %s", "w-42")
    app_logger.error("no exception here")
    app_logger.warning("a warning", exc_info=ValueError("below ERROR"))
    assert handler.drain(10)
    assert (handler.sent, handler.dropped) == (1, 0)
    metrics = api.get("/metrics").text
    assert 'errtriage_errors_total{class="ai_credits",provider="openai",reason="quota_exceeded"} 1.0' in metrics
    handler.close()
    handler.close()  # idempotent


def test_handler_drops_and_counts_when_errtriage_is_down(app_logger: logging.Logger) -> None:
    handler = LoggingHandler(f"http://127.0.0.1:{free_port()}", timeout=0.5, close_timeout=2)
    app_logger.addHandler(handler)
    started = time.monotonic()
    for n in range(20):
        app_logger.error("failed %d", n, exc_info=anthropic_overloaded())
    assert time.monotonic() - started < 0.5  # emit never waits for the network
    assert handler.drain(5)
    assert (handler.sent, handler.dropped) == (0, 20)  # one refused post, the rest skipped while down


def test_handler_never_blocks_on_a_full_queue_and_close_is_bounded(app_logger: logging.Logger) -> None:
    stuck = threading.Event()

    def hang(request: httpx.Request) -> httpx.Response:
        stuck.wait(10)
        return httpx.Response(503)

    handler = LoggingHandler("http://errtriage.invalid", queue_size=2, close_timeout=0.5,
                             transport=httpx.MockTransport(hang))
    app_logger.addHandler(handler)
    started = time.monotonic()
    for n in range(10):
        app_logger.error("failed %d", n, exc_info=ValueError(str(n)))
    assert time.monotonic() - started < 0.5
    app_logger.removeHandler(handler)
    handler.close()
    assert time.monotonic() - started < 2
    assert handler.sent == 0 and handler.dropped >= 9  # 1 in flight when close gave up, or all 10
    stuck.set()


def test_handler_ignores_its_own_transport_records(app_logger: logging.Logger) -> None:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(500)

    handler = LoggingHandler("http://errtriage.invalid", transport=httpx.MockTransport(record))
    for name in ("httpx", "httpcore.connection", "errtriage_client"):
        handler.handle(logging.LogRecord(name, logging.ERROR, __file__, 1, "x", None,
                                         (ValueError, ValueError("x"), None)))
    assert handler.drain(2) and seen == [] and handler.dropped == 0
    handler.close()
