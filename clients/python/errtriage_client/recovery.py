"""Run a call and follow errtriage's `recovery` advice exactly.

On each failure the helper reports it (with `attempt`, 1-based) and then, by the answer:

- an action only the agent can take (`fix_arguments`, `discover_tool`, `repair_tool_call`,
  `provide_credentials`, `check_input`): raises `NeedsAgent` with the action, the hint and
  the classification (the original exception chained);
  (a repair that would need another try is handed back only while `max_attempts` allows one);
- not retryable, or `attempts_left == 0`, or `max_attempts` tries made: raises `GaveUp`
  (a `RuntimeError`: "class/reason: action");
- otherwise waits `backoff_ms[0]` (the injected `sleep`) and tries again.

When errtriage cannot answer, the call's own exception is re-raised unchanged: advice is
an aid, never a new failure.

    NeedsAgent(RecoveryStop) ─┐
    GaveUp(RecoveryStop, RuntimeError) ─┴─ RecoveryStop(Exception): .classification, .attempt
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from .client import AsyncClient, Client
from .types import AGENT_ACTIONS, Classification

T = TypeVar("T")
_NOT_A_RETRY = frozenset({"provide_credentials", "check_input"})  # handed back even on the last attempt
ToReport = Callable[[BaseException], "BaseException | Mapping[str, Any]"]


class RecoveryStop(Exception):
    """The helper stopped retrying; `classification` says why, `attempt` is the try that failed."""

    def __init__(self, message: str, classification: Classification, attempt: int) -> None:
        super().__init__(message)
        self.classification = classification
        self.attempt = attempt

    @property
    def action(self) -> str:
        return self.classification.recovery.action

    @property
    def hint(self) -> str | None:
        return self.classification.hint


class NeedsAgent(RecoveryStop):
    """The agent must act (`action`: change the tool, the arguments, supply a credential, check
    its input) before a retry can help. `wait_seconds` is the advised wait before that retry;
    pass `next_attempt` as `attempt=` to keep counting."""

    def __init__(self, classification: Classification, attempt: int) -> None:
        recovery = classification.recovery
        super().__init__(f"{classification.class_}/{classification.reason}: {recovery.action}"
                         + (f" ({recovery.retry_hint})" if recovery.retry_hint else ""), classification, attempt)

    @property
    def wait_seconds(self) -> float:
        return self.classification.recovery.next_wait_seconds

    @property
    def next_attempt(self) -> int:
        return self.attempt + 1


class GaveUp(RecoveryStop, RuntimeError):
    """Retrying cannot help, or the attempts are used up: a human (or another model) decides."""

    def __init__(self, classification: Classification, attempt: int) -> None:
        super().__init__(f"{classification.class_}/{classification.reason}: {classification.recovery.action}",
                         classification, attempt)


def _decide(advice: Classification | None, failure: BaseException, attempt: int, max_attempts: int) -> float:
    """The wait before the next try, or raises (NeedsAgent, GaveUp, or the failure itself)."""
    if advice is None:
        raise failure
    recovery = advice.recovery
    if recovery.action in AGENT_ACTIONS and (recovery.action in _NOT_A_RETRY or attempt < max_attempts):
        raise NeedsAgent(advice, attempt) from failure
    if not advice.retryable or recovery.attempts_left <= 0 or attempt >= max_attempts:
        raise GaveUp(advice, attempt) from failure
    return recovery.next_wait_seconds


def follow_recovery(client: Client, call: Callable[[], T], *, tool: str | None = None,
                    context: Mapping[str, Any] | None = None, max_attempts: int = 3, attempt: int = 1,
                    retry_on: type[BaseException] | tuple[type[BaseException], ...] = Exception,
                    to_report: ToReport | None = None, sleep: Callable[[float], None] = time.sleep) -> T:
    """Run `call()` until it succeeds or the advice says stop. `to_report(exc)` turns a failure into
    the report (default: the exception itself); `attempt` continues a count (after `NeedsAgent`).

    Raises NeedsAgent, GaveUp, or the call's own exception when errtriage cannot answer or it is
    not one of `retry_on`."""
    while True:
        try:
            return call()
        except retry_on as failure:
            advice = client.report(to_report(failure) if to_report else failure, tool=tool, attempt=attempt,
                                   context=context)
            wait = _decide(advice, failure, attempt, max_attempts)
        sleep(wait)
        attempt += 1


async def follow_recovery_async(client: AsyncClient, call: Callable[[], Awaitable[T]], *, tool: str | None = None,
                                context: Mapping[str, Any] | None = None, max_attempts: int = 3, attempt: int = 1,
                                retry_on: type[BaseException] | tuple[type[BaseException], ...] = Exception,
                                to_report: ToReport | None = None,
                                sleep: Callable[[float], Awaitable[None]] | None = None) -> T:
    """`follow_recovery` for coroutines: `call()` returns an awaitable; `sleep` defaults to asyncio.sleep."""
    import asyncio

    pause = sleep or asyncio.sleep
    while True:
        try:
            return await call()
        except retry_on as failure:
            advice = await client.report(to_report(failure) if to_report else failure, tool=tool, attempt=attempt,
                                         context=context)
            wait = _decide(advice, failure, attempt, max_attempts)
        await pause(wait)
        attempt += 1


def recovering(client: Client, **options: Any) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorator form: `@recovering(client, tool="search")` runs each call under `follow_recovery`."""
    def wrap(function: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> T:
            return follow_recovery(client, lambda: function(*args, **kwargs), **options)
        return run
    return wrap
