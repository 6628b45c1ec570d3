"""Raw payload -> NormalizedError: the fields rules match on, dug out of whatever shape arrived.

Pure: no I/O, no clock, no settings. Fields the caller set win over anything found in
`raw`; inside `raw`, the first value found (outermost first) wins. Shapes recognised:
provider error bodies (OpenAI, Anthropic, Google, OpenRouter, Ollama, GitHub, GitLab,
Bitbucket), serialized SDK errors (Vercel AI SDK), MCP tool results with JSON text,
JSON-RPC errors, pipeline step-failed events, zero-result success bodies, and messages
that embed a JSON body or a Python dict repr.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import orjson
import re2

from service import re2spans
from service.models import ErrorReport
from service.redact import redact, redact_value

MESSAGE_CAP = 16 * 1024  # longer messages are matched on their head and tail
_EMBEDDED_CAP = 64 * 1024  # largest embedded body we try to parse
_MAX_DEPTH = 12

SHAPE_PLAIN = "plain"
SHAPE_PROVIDER_BODY = "provider_body"
SHAPE_SDK_ERROR = "sdk_error"
SHAPE_MCP_RESULT = "mcp_result"
SHAPE_EMPTY_RESULT = "empty_result"
SHAPE_PIPELINE_STEP = "pipeline_step"


def _re2(pattern: str) -> Any:
    """RE2: linear time on any caller text, and an order of magnitude faster than `re` on these patterns."""
    return re2.compile(pattern, re2spans.compile_options())


_STATUS_IN_MESSAGE = _re2("|".join((  # the leftmost of these phrasings wins
    r"(?i:\berror code:?\s*([45]\d\d)\b)",
    r"(?i:\bstatus(?:[ _]?code)?[\s:=]+([45]\d\d)\b)",
    r"\bHTTP(?:/\d(?:\.\d)?)?[\s:]+([45]\d\d)\b",
    r"^\W*(?:\w+(?:[. ]\w+)*\s?(?:Error|Exception)\]?:\s*)?([45]\d\d)[\s:{-]",  # `API Error: 400 {...}`
    (r"(?i:\b([45]\d\d)[\s:-]+(?:Too Many Requests|Unauthorized|Forbidden|Not Found|Payment Required|Bad Request"
     r"|Internal Server Error|Bad Gateway|Service Unavailable|Gateway Time-?out|Request Timeout|Conflict)\b)"),
)))
_HOST_IN_TEXT = _re2(
    r"(?i)(?:https?|wss?|ssh|git)://(?:[^@/\s]+@)?([a-z0-9.-]+)|(?:\bgit@)([a-z0-9.-]+):"
    r"|\b((?:[a-z0-9-]+\.)+(?:com|ai|io|org|net|dev|co|cloud|app))\b"
)
_RETRY_IN_TEXT = _re2(
    r"(?i)(?:try again|retry|retrying|wait|reset)\s+(?:in|after)\s+(\d+(?:\.\d+)?)\s*"
    r"(ms|milliseconds?|s|sec|secs|seconds?|m|mins?|minutes?)\b"
)
_AVAILABLE_TOOLS = _re2(r"\bAvailable tools: ((?:[\w.:/-]+, ?)*[\w.:/-]*\w)")
_RETRY_WORDS = ("try again", "retry", "wait", "reset")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_IDENTIFIER = re.compile(r"^[A-Za-z0-9_.:/-]{1,80}$")
_RESULT_LISTS = ("results", "items", "hits", "records", "data", "documents", "matches", "rows",
                 "features", "candidates", "predictions", "organic_results")  # GeoJSON, Google Places, SerpAPI
_RESULT_COUNTS = ("total", "total_count", "totalCount", "count", "totalResults", "total_results", "totalItems")
_META_KEYS = ("examples", "alternatives", "retry_hint", "feedback_hint")
_NOTE_KEYS = ("stderr", "errorDescription", "detail")  # text beside the message: the cause (git CLI, n8n, Bitbucket)
_COMMAND_KEYS = ("cmd", "command", "args")  # a command line often names the remote (git@host:repo)
_NORMAL_FINISH = ("stop", "end_turn", "tool_calls", "function_call", "tool_use", "finish_reason_unspecified")


@dataclass(slots=True)
class NormalizedError:
    """What the rule engine sees. Text is redacted and capped; codes and types may be several."""

    message: str = ""
    types: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    status: int | None = None
    provider_hint: str | None = None
    tool: str | None = None
    source: str | None = None
    hosts: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    shape: str = SHAPE_PLAIN
    param: str | None = None
    retry_after_ms: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    pipeline: dict[str, Any] | None = None
    attempt: int | None = None
    context: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # secondary text (stderr, errorDescription) appended to message
    upstream: str | None = None  # where a gateway sent the call (OpenRouter `metadata.provider_name`)


def normalize(report: ErrorReport) -> NormalizedError:
    """Build the NormalizedError for one report. Never raises on any JSON input."""
    found = NormalizedError(
        status=report.status,
        provider_hint=report.provider.strip().lower() or None if report.provider else None,
        tool=report.tool or None,
        source=report.source or None,
        attempt=report.attempt,
        context=report.context or {},
    )
    message = report.message or ""
    _add(found.types, report.type)
    _add(found.codes, report.code)
    if report.raw is not None:
        _absorb_raw(report.raw, found, message_set=bool(message))
    if message:
        found.message = message
    _absorb_context(found)
    for note in found.notes:
        if note not in found.message:
            found.message = f"{found.message}\n{note}" if found.message else note
    if found.message:
        _absorb_message(found)
    found.message = redact(_cap(found.message))
    if found.meta:
        found.meta = redact_value(found.meta)
    return found


def _cap(text: str) -> str:
    if len(text) <= MESSAGE_CAP:
        return text
    half = MESSAGE_CAP // 2
    return f"{text[:half]}\n…\n{text[-half:]}"


def _add(values: list[str], value: Any) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        value = str(value)
    if isinstance(value, str):
        value = value.strip()
        if value and len(value) <= 200 and value not in values:
            values.append(value)


def _set_status(found: NormalizedError, value: Any) -> None:
    if found.status is not None or isinstance(value, bool):
        return
    if isinstance(value, str) and value.strip().isdecimal():
        value = int(value.strip())
    if isinstance(value, int) and 100 <= value <= 599:
        found.status = value


def _set_message(found: NormalizedError, value: Any) -> None:
    if not found.message and isinstance(value, str) and value.strip():
        found.message = value.strip()


def _absorb_raw(raw: Any, found: NormalizedError, message_set: bool) -> None:
    if isinstance(raw, str):
        parsed = _parse_json_text(raw)
        if parsed is None:
            if not message_set:
                _set_message(found, raw)
            return
        raw = parsed
    if isinstance(raw, dict):
        found.shape = SHAPE_PROVIDER_BODY
        _absorb_dict(raw, found, 0)
        if not found.message and not found.codes and not found.types and _is_empty_result(raw):
            found.shape = SHAPE_EMPTY_RESULT
        elif not (found.message or found.notes or found.codes or found.types) and found.status is None:
            _set_message(found, _render_unknown(raw))
    elif isinstance(raw, list):
        for item in raw[:20]:
            if isinstance(item, dict):
                _absorb_dict(item, found, 1)


def _render_unknown(obj: dict[str, Any]) -> str:
    """A body of no known shape (`{"error parsing tool call": "invalid character..."}`): its text items."""
    items = [f"{key}: {value}" for key, value in list(obj.items())[:5] if isinstance(value, str) and value.strip()]
    return "\n".join(items)


def _parse_json_text(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[" or len(stripped) > _EMBEDDED_CAP:
        return None
    try:
        return orjson.loads(stripped)
    except orjson.JSONDecodeError:
        return None


_NESTED_KEYS = ("responseBody", "data", "lastError", "cause", "response", "body", "metadata", "detail", "details",
                "errors", "raw", "message", "error_description", "errorMessage")
_NESTED_SET = frozenset(_NESTED_KEYS)
# An object can be a pipeline event only with `event` or `stepId` (_absorb_pipeline_event), an MCP
# result only with `result`, `_meta` or `content` (_absorb_mcp): keep this in step with them.
_ENVELOPE_KEYS = frozenset(("event", "stepId", "result", "_meta", "content"))


def _absorb_dict(obj: dict[str, Any], found: NormalizedError, depth: int) -> None:
    """Read one JSON object; recurse into the places errors nest."""
    if depth > _MAX_DEPTH:
        return
    if obj.keys() & _ENVELOPE_KEYS:  # a pipeline event or an MCP result: rare, so tested by one intersection
        if _absorb_pipeline_event(obj, found):
            return
        _absorb_mcp(obj, found, depth)
    error = obj.get("error")
    if isinstance(error, dict):
        _absorb_dict(error, found, depth + 1)
    elif isinstance(error, str):
        _absorb_error_string(obj, error, found)
    present = obj.keys() & _FIELD_KEYS  # most bodies hold a few keys: test only those
    if present:
        _absorb_fields(obj, present, found)
    nested = obj.keys() & _NESTED_SET
    for key in _NESTED_KEYS if nested else ():
        if key in nested:
            _absorb_nested(obj[key], found, depth)
    if "candidates" in obj or "choices" in obj or "promptFeedback" in obj:
        _absorb_candidates(obj, found)


def _absorb_nested(value: Any, found: NormalizedError, depth: int) -> None:
    if isinstance(value, str):
        value = _parse_json_text(value)
    if isinstance(value, dict):
        _absorb_dict(value, found, depth + 1)
    elif isinstance(value, list):
        for item in value[:10]:
            if isinstance(item, dict):
                _absorb_google_detail(item, found)
                _absorb_dict(item, found, depth + 1)


_HOST_KEYS = ("url", "documentation_url", "request_url", "baseURL", "endpoint", "host")
_MODEL_KEYS = ("model", "model_id", "modelId")
_MESSAGE_KEYS = ("message", "error_description", "detail", "title", "msg", "errorMessage")
_FIELD_KEYS = frozenset((
    "name", "type", "code", "status", "statusCode", "status_code", "reason", "param", "availableTools",
    "available_tools", "provider_name", "headers", "responseHeaders",
    *_MESSAGE_KEYS, *_NOTE_KEYS, *_COMMAND_KEYS, *_HOST_KEYS, *_MODEL_KEYS,
))


def _absorb_fields(obj: dict[str, Any], present: set[str], found: NormalizedError) -> None:
    """The fields errors carry, read only where `present` says they are."""
    if "name" in present:
        name = obj["name"]
        if isinstance(name, str) and ("Error" in name or "Exception" in name):
            _add(found.types, name)
            found.shape = SHAPE_SDK_ERROR
    if "type" in present and isinstance(obj["type"], str) and obj["type"] != "error":
        _add(found.types, obj["type"])
    if "code" in present:
        code = obj["code"]
        if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599:
            _set_status(found, code)
        else:
            _add(found.codes, code)
    if present & _STATUS_KEYS:
        _absorb_status(obj.get("status", obj.get("statusCode", obj.get("status_code"))), found)
    if "reason" in present and isinstance(obj["reason"], str):
        _add(found.codes, obj["reason"])
    if present & _TEXT_KEYS:
        _absorb_texts(obj, present, found)
    if "param" in present and found.param is None and isinstance(obj["param"], str):
        found.param = obj["param"]
    tools = obj.get("availableTools", obj.get("available_tools"))
    if isinstance(tools, list) and "available_tools" not in found.context:  # AI SDK NoSuchToolError
        found.context = {**found.context, "available_tools": [t for t in tools[:1000] if isinstance(t, str)]}
    if present & _LOCATION_KEYS:
        for key in _HOST_KEYS:
            _add_hosts(found, obj.get(key))
        for key in _MODEL_KEYS:
            _add(found.models, obj.get(key))
        for key in _COMMAND_KEYS:
            value = obj.get(key)
            for part in value[:50] if isinstance(value, list) else [value]:
                _add_hosts(found, part)
    if "provider_name" in present and found.upstream is None and isinstance(obj["provider_name"], str):
        found.upstream = obj["provider_name"].strip().lower()[:100] or None
    headers = obj.get("headers") or obj.get("responseHeaders")
    if isinstance(headers, dict):
        _absorb_headers(headers, found)


_STATUS_KEYS = frozenset(("status", "statusCode", "status_code"))
_TEXT_KEYS = frozenset((*_MESSAGE_KEYS, *_NOTE_KEYS))
_LOCATION_KEYS = frozenset((*_HOST_KEYS, *_MODEL_KEYS, *_COMMAND_KEYS))


def _absorb_status(status: Any, found: NormalizedError) -> None:
    if isinstance(status, str) and not status.strip().isdecimal():
        _add(found.codes, status)  # Google: "RESOURCE_EXHAUSTED"
    else:
        _set_status(found, status)


def _absorb_texts(obj: dict[str, Any], present: set[str], found: NormalizedError) -> None:
    for key in _MESSAGE_KEYS:
        if key not in present:
            continue
        value = obj[key]
        if isinstance(value, str) and value[:1] in "{[" and isinstance(_parse_json_text(value), dict):
            continue  # an inner body as a JSON string (@google/genai ApiError): read by _absorb_dict
        _set_message(found, value)
    for key in _NOTE_KEYS:
        value = obj[key] if key in present else None
        if isinstance(value, str) and value.strip() and value.strip() not in found.notes:
            found.notes.append(value.strip())


def _absorb_candidates(obj: dict[str, Any], found: NormalizedError) -> None:
    """A 200 body that was blocked: Gemini `candidates[].finishReason` / `promptFeedback.blockReason`,
    OpenAI `choices[].finish_reason`. Unusual finish reasons (SAFETY, content_filter) become codes."""
    for key, reason_key in (("candidates", "finishReason"), ("choices", "finish_reason")):
        items = obj.get(key)
        for item in items[:10] if isinstance(items, list) else []:
            reason = item.get(reason_key) if isinstance(item, dict) else None
            if isinstance(reason, str) and reason.strip().lower() not in _NORMAL_FINISH:
                _add(found.codes, reason)
    feedback = obj.get("promptFeedback")
    if isinstance(feedback, dict):
        _add(found.codes, feedback.get("blockReason"))


def _absorb_context(found: NormalizedError) -> None:
    """Hosts from the caller's context: a base URL or endpoint it was calling (`ANTHROPIC_BASE_URL`, `url`)."""
    for key, value in list(found.context.items())[:50]:
        lowered = str(key).lower()
        if isinstance(value, str) and ("url" in lowered or "endpoint" in lowered or lowered in ("host", "api_base")):
            _add_hosts(found, value)


def _absorb_error_string(obj: dict[str, Any], error: str, found: NormalizedError) -> None:
    """`{"error": "..."}`: a code when a message sits beside it (GitLab OAuth, Pipeworx), else the message (Ollama)."""
    has_message = any(isinstance(obj.get(k), str) for k in ("message", "error_description", "detail"))
    if has_message and _IDENTIFIER.match(error):
        _add(found.codes, error)
    else:
        _set_message(found, error)


def _absorb_mcp(obj: dict[str, Any], found: NormalizedError, depth: int) -> None:
    result = obj.get("result")
    if isinstance(result, dict) and ("content" in result or "_meta" in result):
        _absorb_mcp(result, found, depth + 1)
        return
    meta = obj.get("_meta")
    if isinstance(meta, dict):
        for key in _META_KEYS:
            if key in meta and key not in found.meta:
                found.meta[key] = meta[key]
    content = obj.get("content")
    if not isinstance(content, list):
        return
    found.shape = SHAPE_MCP_RESULT
    for item in content[:10]:
        text = item.get("text") if isinstance(item, dict) else None
        if not isinstance(text, str):
            continue
        parsed = _parse_json_text(text)
        if isinstance(parsed, dict):
            _absorb_dict(parsed, found, depth + 1)
            if not found.message and _is_empty_result(parsed) and not obj.get("isError"):
                found.shape = SHAPE_EMPTY_RESULT
        elif obj.get("isError"):
            _set_message(found, text)


def _absorb_pipeline_event(obj: dict[str, Any], found: NormalizedError) -> bool:
    """Seed 003's `pipeline:step-failed` payload, bare or wrapped in {event, payload}."""
    payload = obj.get("payload") if obj.get("event") == "pipeline:step-failed" else obj
    if not isinstance(payload, dict) or "stepId" not in payload or "error" not in payload:
        return False
    found.shape = SHAPE_PIPELINE_STEP
    found.pipeline = {
        key: payload.get(key) for key in ("stepId", "stepName", "stepIndex", "totalSteps", "recoverable")
    }
    error = payload.get("error")
    if isinstance(error, dict):
        _absorb_dict(error, found, 1)
    else:
        _set_message(found, error)
    return True


def _absorb_google_detail(item: dict[str, Any], found: NormalizedError) -> None:
    kind = item.get("@type")
    if not isinstance(kind, str):
        return
    if kind.endswith("RetryInfo") and found.retry_after_ms is None:
        found.retry_after_ms = _duration_ms(item.get("retryDelay"))
    elif kind.endswith("ErrorInfo"):
        _add(found.codes, item.get("reason"))
        _add_hosts(found, item.get("domain"))
    elif kind.endswith("QuotaFailure") and isinstance(item.get("violations"), list):
        for violation in item["violations"][:10]:  # quotaId tells a per-minute limit from a daily cap
            if isinstance(violation, dict):
                _add(found.codes, violation.get("quotaId"))


def _absorb_headers(headers: dict[str, Any], found: NormalizedError) -> None:
    lowered = {str(k).lower(): v for k, v in headers.items()}
    if found.retry_after_ms is None and "retry-after-ms" in lowered:
        found.retry_after_ms = _duration_ms(f"{lowered['retry-after-ms']}ms")
    if found.retry_after_ms is None and "retry-after" in lowered:
        found.retry_after_ms = _duration_ms(lowered["retry-after"])


_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, None: 1000}  # no unit: seconds
_MAX_WAIT_MS = 86_400_000  # a longer "wait" is not a backoff


def _duration_ms(value: Any) -> int | None:
    """'20s', '1.5', '250ms', 3 -> milliseconds (seconds when no unit); None when unreadable."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None
    match = _DURATION.match(value)
    if not match:
        return None
    return _millis(float(match.group(1)), match.group(2))


def _millis(number: float, unit: str | None) -> int | None:
    """`number` of `unit` (ms, s, m, h; None: seconds) in milliseconds; None past a day."""
    millis = number * _UNIT_MS[unit]
    return int(millis) if 0 <= millis <= _MAX_WAIT_MS else None


def _add_hosts(found: NormalizedError, text: Any) -> None:
    if isinstance(text, str):
        _add_hosts_in(found, text.encode())


def _add_hosts_in(found: NormalizedError, data: bytes) -> None:
    for spans in re2spans.finditer(_HOST_IN_TEXT, data, 0, 4096):
        host = re2spans.group(spans, data, 1, 2, 3).decode().lower().strip(".")
        if host and host not in found.hosts and len(found.hosts) < 16:
            found.hosts.append(host)


def _is_empty_result(obj: dict[str, Any], nested: bool = True) -> bool:
    """Result counts and lists, all zero or empty; one level down when the top has none
    (Spotify's {"tracks": {"items": [], "total": 0}}, Google's {"data": {"totalItems": 0}})."""
    if any(key in obj for key in ("error", "errors", "isError", "message")):
        return False
    counts = [obj[k] for k in _RESULT_COUNTS if k in obj]
    lists = [obj[k] for k in _RESULT_LISTS if isinstance(obj.get(k), list)]
    if not counts and not lists:
        inner = [value for value in list(obj.values())[:10] if isinstance(value, dict)] if nested else []
        return bool(inner) and all(_is_empty_result(value, nested=False) for value in inner)
    return all(c == 0 for c in counts) and all(len(v) == 0 for v in lists)


def _absorb_message(found: NormalizedError) -> None:
    """Read what a rendered message carries: an embedded body, an HTTP status, hosts, a wait."""
    message = found.message
    body = _embedded_body(message)
    if isinstance(body, dict):
        kept = found.message
        _absorb_dict(body, found, 1)
        found.message = kept
        if found.shape == SHAPE_PLAIN:  # a message that is one JSON body with empty result lists: as in `raw`
            whole = message.lstrip()[:1] == "{"
            found.shape = SHAPE_EMPTY_RESULT if whole and _is_empty_result(body) else SHAPE_PROVIDER_BODY
    data = message.encode()  # RE2 on bytes: no re-encoding and no offset mapping per call
    if found.status is None:
        spans = re2spans.search(_STATUS_IN_MESSAGE, data, 0, 2048)
        if spans:  # one of the five groups took part
            found.status = int(re2spans.group(spans, data, *range(1, 6)))
    _add_hosts_in(found, data)
    lowered = message.lower()  # cheap substring gates keep the regexes off most messages
    if "available_tools" not in found.context and "available tools" in lowered:
        match = _AVAILABLE_TOOLS.search(data, 0, 8192)
        if match:
            names = [name for name in re.split(r",\s*", match.group(1).decode()) if name]
            found.context = {**found.context, "available_tools": names[:1000]}
    if found.retry_after_ms is None and any(word in lowered for word in _RETRY_WORDS):
        spans = re2spans.search(_RETRY_IN_TEXT, data)
        if spans:
            unit = re2spans.group(spans, data, 2).lower()
            found.retry_after_ms = _millis(float(re2spans.group(spans, data, 1)),
                                           "ms" if unit.startswith((b"ms", b"milli")) else chr(unit[0]))


_JSON = json.JSONDecoder()
_REPR_WORDS = (("None", "null"), ("True", "true"), ("False", "false"))


def _repr_as_json(text: str) -> Any:
    """A Python dict repr read as JSON, for the common case only (no double quote anywhere, so
    every string is single-quoted and holds no quote); anything else returns None. Between the
    quotes only punctuation, numbers and None/True/False can stand. About 20x cheaper than
    ast.literal_eval, which stays the fallback."""
    parts = text.split("'")
    if '"' in text or len(parts) % 2 == 0:
        return None
    for word, literal in _REPR_WORDS:
        if word in text:  # replaced outside the strings only
            parts[0::2] = [part.replace(word, literal) for part in parts[0::2]]
    try:
        return orjson.loads('"'.join(parts))
    except orjson.JSONDecodeError:
        return None


def _embedded_body(message: str) -> Any:
    """The JSON body or Python dict repr a message embeds (`Error code: 429 - {...}`), or None."""
    start = message.find("{")
    if start < 0 or len(message) - start > _EMBEDDED_CAP:
        return None
    text = message[start:]
    if text[1:].lstrip()[:1] != "'":  # `{'error': ...` is a repr: skip the JSON attempt
        try:
            return _JSON.raw_decode(text)[0]
        except (ValueError, RecursionError):
            pass
    end = text.rfind("}")
    if end < 0:
        return None
    fast = _repr_as_json(text[: end + 1])
    if fast is not None:
        return fast
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes in caller text are not our warning
            return ast.literal_eval(text[: end + 1])
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
