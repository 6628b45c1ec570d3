"""errtriage's Python client: report errors, follow the recovery advice, log handler.

    from errtriage_client import Client, follow_recovery
    with Client("http://errtriage:8080", source="agent-runner") as errtriage:
        answer = errtriage.report(exc, tool="web_search", attempt=1)   # None if errtriage is down
"""

from .client import AsyncClient, Client, ErrtriageError
from .logging_handler import LoggingHandler
from .recovery import GaveUp, NeedsAgent, RecoveryStop, follow_recovery, follow_recovery_async, recovering
from .reports import build_report, from_exception
from .types import AGENT_ACTIONS, Classification, Notification, Recovery

__all__ = [
    "AGENT_ACTIONS", "AsyncClient", "Classification", "Client", "ErrtriageError", "GaveUp", "LoggingHandler",
    "NeedsAgent", "Notification", "Recovery", "RecoveryStop", "build_report", "follow_recovery",
    "follow_recovery_async", "from_exception", "recovering",
]
__version__ = "0.1.0"
