"""The standard agent recovery loop on errtriage_client: `follow_recovery` retries as advised; the agent
acts on what it hands back (a real tool name, arguments of a known-good shape), under one attempt count."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

from errtriage_client import Client, NeedsAgent, follow_recovery


class ToolFailed(Exception):
    """What a tool call raises: the raw result (an MCP result, a provider body) rides along."""

    def __init__(self, raw: Any) -> None:
        super().__init__(str(raw))
        self.raw = raw


def _report_of(failure: BaseException) -> dict[str, Any]:
    """The report errtriage classifies: the tool's raw result when it carried one."""
    return {"raw": failure.raw} if isinstance(failure, ToolFailed) else {"message": str(failure)}


def call_with_recovery(call: Callable[[str, dict[str, Any]], Any], tool: str, arguments: dict[str, Any],
                       available_tools: list[str], errtriage: Client,
                       sleep: Callable[[float], None] = time.sleep) -> Any:
    attempt = 1
    while True:
        try:  # retries and backoff as advised; GaveUp (a RuntimeError) when a human must decide
            return follow_recovery(errtriage, partial(call, tool, arguments), tool=tool, attempt=attempt,
                                   context={"available_tools": available_tools}, retry_on=ToolFailed,
                                   to_report=_report_of, sleep=sleep)
        except NeedsAgent as needed:
            recovery = needed.classification.recovery
            if needed.action == "discover_tool" and recovery.suggested_tools:
                tool = recovery.suggested_tools[0]  # the nearest real name, never the same one
            elif needed.action == "fix_arguments" and recovery.examples:
                arguments = {**arguments, **recovery.examples[0]}  # a shape that is known to work
            else:
                raise  # credentials, input to check: the agent's caller decides
            sleep(needed.wait_seconds)
            attempt = needed.next_attempt
