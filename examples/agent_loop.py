"""The standard agent recovery loop: post the error to errtriage, follow `recovery`, cap the attempts."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx


class ToolFailed(Exception):
    """What a tool call raises: the raw result (an MCP result, a provider body) rides along."""

    def __init__(self, raw: Any) -> None:
        super().__init__(str(raw))
        self.raw = raw


def call_with_recovery(call: Callable[[str, dict[str, Any]], Any], tool: str, arguments: dict[str, Any],
                       available_tools: list[str], errtriage: httpx.Client,
                       sleep: Callable[[float], None] = time.sleep) -> Any:
    attempt = 1
    while True:
        try:
            return call(tool, arguments)
        except ToolFailed as failure:
            advice = errtriage.post("/v1/errors", json={
                "raw": failure.raw, "tool": tool, "attempt": attempt,
                "context": {"available_tools": available_tools}}).json()
            recovery = advice["recovery"]
            if not advice["retryable"]:  # attempts used up, or retrying cannot help: a human decides
                raise RuntimeError(f"{advice['class']}/{advice['reason']}: {recovery['action']}") from failure
            if recovery["action"] == "discover_tool" and recovery["suggested_tools"]:
                tool = recovery["suggested_tools"][0]  # the nearest real name, never the same one
            elif recovery["action"] == "fix_arguments" and recovery["examples"]:
                arguments = {**arguments, **recovery["examples"][0]}  # a shape that is known to work
            sleep(recovery["backoff_ms"][0] / 1000 if recovery["backoff_ms"] else 0)
            attempt += 1
