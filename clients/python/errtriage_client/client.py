"""`Client` and `AsyncClient`: classify or report an error (a report dict or an exception).

They sit in the caller's error path, so by default they never raise: a timeout, a refused
connection, an error answer or a body that is not a Classification returns None and is
logged at debug on the `errtriage_client` logger. `raise_errors=True` raises
`ErrtriageError` instead (with the cause chained). Timeouts are short (2 s) by default.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import httpx

from .reports import build_report
from .types import Classification

log = logging.getLogger("errtriage_client")
DEFAULT_URL = "http://localhost:8080"
DEFAULT_TIMEOUT = 2.0

Error = BaseException | Mapping[str, Any]


class ErrtriageError(Exception):
    """errtriage could not answer (only raised with `raise_errors=True`). `status` is the HTTP
    status when it answered with an error, else None (timeout, refused, bad body)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class _Base:
    def __init__(self, url: str, *, timeout: float, source: str | None, context: Mapping[str, Any] | None,
                 raise_errors: bool, headers: Mapping[str, str] | None) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.source = source
        self.context = dict(context or {})
        self.raise_errors = raise_errors
        self.headers = {"user-agent": "errtriage-client/0.1", **(headers or {})}

    def _build(self, error: Error, tool: str | None, attempt: int | None, provider: str | None,
               context: Mapping[str, Any] | None) -> dict[str, Any]:
        merged = {**self.context, **(context or {})}
        report = build_report(error, tool=tool, attempt=attempt, provider=provider, source=None,
                              context=merged or None)
        if self.source and "source" not in report:
            report["source"] = self.source
        return report

    def _read(self, response: httpx.Response) -> Classification | None:
        if response.status_code != 200:
            self._failed(f"errtriage answered {response.status_code}: {response.text[:500]}", response.status_code)
            return None
        try:
            return Classification.from_json(response.json())
        except (ValueError, KeyError, TypeError) as exc:
            self._failed(f"errtriage answered something that is not a Classification: {exc!r}", None, exc)
            return None

    def _failed(self, message: str, status: int | None, cause: BaseException | None = None) -> None:
        """Raises ErrtriageError with `raise_errors`, else logs at debug."""
        if self.raise_errors:
            raise ErrtriageError(message, status) from cause
        log.debug("errtriage: %s", message)


class Client(_Base):
    """A synchronous client. Use it as a context manager or call `close()`; `transport` is
    httpx's (e.g. `httpx.MockTransport` in tests)."""

    def __init__(self, url: str = DEFAULT_URL, *, timeout: float = DEFAULT_TIMEOUT, source: str | None = None,
                 context: Mapping[str, Any] | None = None, raise_errors: bool = False,
                 headers: Mapping[str, str] | None = None, transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(url, timeout=timeout, source=source, context=context, raise_errors=raise_errors,
                         headers=headers)
        self._http = httpx.Client(base_url=self.url, timeout=timeout, headers=self.headers, transport=transport)

    def classify(self, error: Error, *, tool: str | None = None, attempt: int | None = None,
                 provider: str | None = None, context: Mapping[str, Any] | None = None,
                 explain: bool = False) -> Classification | None:
        """Classify with no side effects (`POST /v1/classify`). None when errtriage cannot answer."""
        params = {"explain": "true"} if explain else None
        return self._post("/v1/classify", self._build(error, tool, attempt, provider, context), params)

    def report(self, error: Error, *, tool: str | None = None, attempt: int | None = None,
               provider: str | None = None, context: Mapping[str, Any] | None = None) -> Classification | None:
        """Report (`POST /v1/errors`): classified, counted and notified. None when errtriage cannot answer."""
        return self._post("/v1/errors", self._build(error, tool, attempt, provider, context), None)

    def _post(self, path: str, report: dict[str, Any], params: dict[str, str] | None) -> Classification | None:
        try:
            response = self._http.post(path, json=report, params=params)
        except Exception as exc:  # noqa: BLE001 - timeouts, refusals, a report that is not JSON: never the caller's
            self._failed(f"{path}: {type(exc).__name__}: {exc}", None, exc)
            return None
        return self._read(response)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:  # not typing.Self: that needs 3.11, the client supports 3.10
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncClient(_Base):
    """The asyncio client: the same methods, awaited. `async with AsyncClient(...)` or `await aclose()`."""

    def __init__(self, url: str = DEFAULT_URL, *, timeout: float = DEFAULT_TIMEOUT, source: str | None = None,
                 context: Mapping[str, Any] | None = None, raise_errors: bool = False,
                 headers: Mapping[str, str] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(url, timeout=timeout, source=source, context=context, raise_errors=raise_errors,
                         headers=headers)
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout, headers=self.headers, transport=transport)

    async def classify(self, error: Error, *, tool: str | None = None, attempt: int | None = None,
                       provider: str | None = None, context: Mapping[str, Any] | None = None,
                       explain: bool = False) -> Classification | None:
        params = {"explain": "true"} if explain else None
        return await self._post("/v1/classify", self._build(error, tool, attempt, provider, context), params)

    async def report(self, error: Error, *, tool: str | None = None, attempt: int | None = None,
                     provider: str | None = None,
                     context: Mapping[str, Any] | None = None) -> Classification | None:
        return await self._post("/v1/errors", self._build(error, tool, attempt, provider, context), None)

    async def _post(self, path: str, report: dict[str, Any],
                    params: dict[str, str] | None) -> Classification | None:
        try:
            response = await self._http.post(path, json=report, params=params)
        except Exception as exc:  # noqa: BLE001 - timeouts, refusals, a report that is not JSON: never the caller's
            self._failed(f"{path}: {type(exc).__name__}: {exc}", None, exc)
            return None
        return self._read(response)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:  # as __enter__
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
