"""Reports built from exceptions, duck-typed: no SDK is imported.

What each stack's exception carries, and where it goes in the report:

| stack | status | code | raw |
|---|---|---|---|
| openai, groq, mistral, ... (`APIStatusError`) | `status_code` | `code` (`insufficient_quota`) | `body` |
| anthropic (`APIStatusError`) | `status_code` | – (in `body.error.type`) | `body` |
| google-genai (`errors.APIError`) | `code` (an int) | `status` (`RESOURCE_EXHAUSTED`) | `details` |
| httpx `HTTPStatusError`, requests `HTTPError` | `response.status_code` | – | the response body (JSON or text) |
| botocore `ClientError` | `response.ResponseMetadata.HTTPStatusCode` | `response.Error.Code` | `response.Error` |
| `subprocess.CalledProcessError` (git) | – | – | the command; `message` is its stderr |

`type` is the exception's class name, `message` its text. The provider hint comes from the
module that defined the exception (`openai.RateLimitError` -> `openai`) when the module is
one provider's SDK and the request's URL is not known; with a URL (`context.url`) errtriage
tells the provider from its host, since an openai SDK may be calling OpenRouter or Groq. Response
`Retry-After` headers ride along in `raw`, so the provider's own wait comes first.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

MAX_TEXT = 16_384  # the service matches the first and last 8 KiB of a message anyway
_MAX_DEPTH = 20

#: Top-level module of an exception's class -> errtriage provider id.
SDK_PROVIDERS = {
    "openai": "openai", "anthropic": "anthropic", "groq": "groq", "mistralai": "mistral", "cohere": "cohere",
    "together": "together", "fireworks": "fireworks", "ollama": "ollama", "huggingface_hub": "huggingface",
    "google.genai": "google", "google.generativeai": "google", "vertexai": "google",
}
_BEDROCK_OPERATIONS = frozenset({"InvokeModel", "InvokeModelWithResponseStream", "Converse", "ConverseStream"})
_WAIT_HEADERS = ("retry-after", "retry-after-ms", "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")


def from_exception(exc: BaseException, *, _depth: int = 0) -> dict[str, Any]:
    """A report (type, message, status, code, provider, raw, context) from any exception. Never raises.
    An exception that carries none of them takes them from the one it wraps (`__cause__`)."""
    depth = _depth
    report: dict[str, Any] = {"type": type(exc).__name__}
    with contextlib.suppress(Exception):  # a strange attribute (a property that raises): keep what is known
        _fill(exc, report)
    if not report.get("message"):
        report["message"] = _text(_safe_str(exc)) or type(exc).__name__
    if report.get("status") is None and report.get("raw") is None:
        _from_cause(exc, report, depth)
    return {key: value for key, value in report.items() if value not in (None, "", {}, [])}


def _from_cause(exc: BaseException, report: dict[str, Any], depth: int) -> None:
    """A wrapper (a framework's own error, tenacity's RetryError) says little: take what the
    exception it wraps carries (status, code, body, provider, URL), keeping the wrapper's text."""
    last = getattr(exc, "last_attempt", None)  # tenacity.RetryError
    inner = exc.__cause__  # `raise ... from`, never an implicit context (an unrelated error while handling)
    if inner is None and last is not None and callable(getattr(last, "exception", None)):
        try:
            inner = last.exception()
        except Exception:  # noqa: BLE001 - a future that is not one: no cause to read
            inner = None
    if not isinstance(inner, BaseException) or depth >= 5:
        return
    found = from_exception(inner, _depth=depth + 1)
    if found.get("type"):
        report["message"] = f"{report['message']}\n{found['type']}: {found.get('message', '')}"[:MAX_TEXT]
    for key in ("status", "code", "raw", "provider", "context"):
        if report.get(key) in (None, "", {}) and key in found:
            report[key] = found[key]


def _fill(exc: BaseException, report: dict[str, Any]) -> None:
    report["message"] = _text(_safe_str(exc))
    provider = _sdk_provider(exc)
    response = getattr(exc, "response", None)
    status = _first_status(
        getattr(exc, "status_code", None), getattr(exc, "http_status", None), getattr(response, "status_code", None),
        getattr(response, "status", None), getattr(exc, "status", None),
    )
    if isinstance(response, Mapping):  # botocore ClientError: exc.response is the parsed error dict
        error = _mapping(response.get("Error"))
        meta = _mapping(response.get("ResponseMetadata"))
        status = status or _first_status(meta.get("HTTPStatusCode"))
        report["code"] = _code(error.get("Code"))
        report["raw"] = _jsonable(dict(error)) if error else None
        if getattr(exc, "operation_name", None) in _BEDROCK_OPERATIONS:
            provider = provider or "aws_bedrock"
    code = getattr(exc, "code", None)
    if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599:  # google-genai: code is HTTP
        status = status or code
        report["code"] = report.get("code") or _code(getattr(exc, "status", None))
    else:
        report["code"] = report.get("code") or _code(code)
    report["status"] = status
    if report.get("raw") is None:
        body = _first_present(getattr(exc, "body", None), getattr(exc, "details", None),
                              getattr(exc, "response_json", None))
        if body is None and response is not None and not isinstance(response, Mapping):
            body = _response_body(response)
        headers = _wait_headers(getattr(response, "headers", None)) if response is not None else {}
        if headers:
            report["raw"] = {"statusCode": status, "responseBody": _jsonable(body), "responseHeaders": headers}
        else:
            report["raw"] = _jsonable(body)
    url = _url(exc, response)
    if url:  # the host says who answered (an openai SDK may be calling OpenRouter or Groq): no SDK hint
        report["context"] = {"url": url}
        provider = "aws_bedrock" if provider == "aws_bedrock" else None
    stderr = getattr(exc, "stderr", None)
    cmd = getattr(exc, "cmd", None)
    if stderr is not None and hasattr(exc, "returncode"):  # subprocess.CalledProcessError (git and friends)
        text = _text(stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else str(stderr)).strip()
        if text:
            report["message"] = text
        command = [str(part) for part in cmd] if isinstance(cmd, (list, tuple)) else ([str(cmd)] if cmd else [])
        if command:
            report["raw"] = {"command": command[:50], "returncode": getattr(exc, "returncode", None)}
    report["provider"] = provider


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sdk_provider(exc: BaseException) -> str | None:
    for klass in type(exc).__mro__:
        module = getattr(klass, "__module__", "") or ""
        for prefix, provider in SDK_PROVIDERS.items():
            if module == prefix or module.startswith(prefix + "."):
                return provider
    return None


def _first_status(*values: Any) -> int | None:
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def _first_present(*values: Any) -> Any:
    for value in values:
        if value is not None and not callable(value):
            return value
    return None


def _code(value: Any) -> str | int | None:
    if isinstance(value, str) and value.strip():
        return value.strip()[:200]
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _response_body(response: Any) -> Any:
    """The body of an httpx or requests response: JSON when it parses, else its text."""
    text = getattr(response, "text", None)
    if callable(text):  # aiohttp: text() is a coroutine
        return None
    if isinstance(text, str) and text:
        try:
            return json.loads(text)
        except ValueError:
            return _text(text)
    return None


def _wait_headers(headers: Any) -> dict[str, str]:
    if headers is None or not hasattr(headers, "get"):
        return {}
    found = {}
    for name in _WAIT_HEADERS:
        value = headers.get(name)
        if value is not None:
            found[name] = str(value)
    return found


def _url(exc: BaseException, response: Any) -> str | None:
    for holder in (getattr(exc, "request", None), getattr(response, "request", None), response):
        try:
            url = getattr(holder, "url", None)
        except Exception:  # noqa: BLE001 - httpx raises when a response has no request
            continue
        if url is not None and str(url).startswith(("http://", "https://")):
            return str(url).split("?", 1)[0][:2000]  # query strings may hold keys
    return None


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails still gets reported
        return ""


def _text(value: str) -> str:
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT // 2] + "\n...\n" + value[-MAX_TEXT // 2:]


def _jsonable(value: Any, depth: int = 0) -> Any:
    """A JSON-safe copy: unknown objects become text, depth is bounded."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bytes):
        return _text(value.decode("utf-8", "replace"))
    if depth >= _MAX_DEPTH:
        return None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, depth + 1) for k, v in list(value.items())[:1000]}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v, depth + 1) for v in list(value)[:1000]]
    return _text(_safe_repr(value))


def _safe_repr(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - unprintable objects become their type's name
        return type(value).__name__


def build_report(error: BaseException | Mapping[str, Any], *, tool: str | None = None, attempt: int | None = None,
                 provider: str | None = None, source: str | None = None,
                 context: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The report to post: `error` as a dict (copied) or built from an exception, with the given fields
    added (explicit arguments win; `context` is merged over the report's own)."""
    report = dict(error) if isinstance(error, Mapping) else from_exception(error)
    for key, value in (("tool", tool), ("attempt", attempt), ("provider", provider), ("source", source)):
        if value is not None:
            report[key] = value
    if context:
        own = report.get("context")
        report["context"] = {**(own if isinstance(own, Mapping) else {}), **context}
    if "raw" in report:
        report["raw"] = _jsonable(report["raw"])
    return report
