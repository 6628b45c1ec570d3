"""Every metric errtriage exports, declared in one place.

Label values come only from the rule tables (class, reason, provider ids, rule ids) or
closed enums (outcome, channel kind), so no caller can grow the series count. With
several worker processes prometheus-client's multiprocess mode sums the counters;
each gauge says how it combines across workers.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from service.pacing import pace

OTHER_PROVIDER = "other"
NO_PROVIDER = "none"
NOTIFY_OUTCOMES = ("sent", "failed", "retried", "throttled", "silenced", "dropped", "no_recipient")
RELOAD_OUTCOMES = ("success", "failure")
REDIS_OPERATIONS = ("write", "read", "ack", "claim", "refresh", "stats", "group")
TABLES = ("classes", "rules", "providers", "routes", "channels", "templates", "silences")


class Children:
    """A labelled metric's children by label values. `labels()` validates and takes a lock on
    every call (~1.6 µs, five times a request); the child it returns is kept here. Bounded
    like the label values themselves."""

    def __init__(self, metric: Any) -> None:
        self.metric = metric
        self._children: dict[tuple[str, ...], Any] = {}

    def __call__(self, *values: str) -> Any:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self.metric.labels(*values)
        return child


class Metrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.errors = Counter(
            "errtriage_errors", "Errors reported on /v1/errors, by class, reason and provider.",
            ["class", "reason", "provider"], registry=registry,
        )
        self.rule_matches = Counter(
            "errtriage_rule_matches", "Reports each class rule decided (on /v1/errors).", ["rule"], registry=registry
        )
        self.classify_seconds = Histogram(
            "errtriage_classify_seconds", "Time to normalize and classify one report.",
            buckets=(0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05),
            registry=registry,
        )
        self.notifications = Counter(
            "errtriage_notifications", "Notification outcomes by channel, class and outcome.",
            ["channel", "class", "outcome"], registry=registry,
        )
        self.delivery_seconds = Histogram(
            "errtriage_notification_delivery_seconds", "Time from dispatch to a successful send.", ["channel"],
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600), registry=registry,
        )
        self.queue_depth = Gauge(
            "errtriage_notification_queue_depth", "Notifications waiting to be sent.",
            multiprocess_mode="livesum", registry=registry,
        )
        self.queue_capacity = Gauge(  # so an alert can say "80% full" whatever ERRTRIAGE_NOTIFY_QUEUE_SIZE is
            "errtriage_notification_queue_capacity", "Notifications the in-process queue holds before it drops.",
            multiprocess_mode="livesum", registry=registry,
        )
        # With ERRTRIAGE_REDIS_URL: the shared stream (every process reports the same value: take the
        # max across replicas, never the sum), this process's outbox, Redis faults and claims (counters).
        self.stream_length = Gauge(
            "errtriage_notify_stream_length", "Notifications in the shared Redis stream (not yet acknowledged).",
            multiprocess_mode="livemax", registry=registry,
        )
        self.stream_pending = Gauge(
            "errtriage_notify_stream_pending", "Stream entries read by a consumer and not yet acknowledged.",
            multiprocess_mode="livemax", registry=registry,
        )
        self.outbox_depth = Gauge(
            "errtriage_notify_outbox_depth", "Notifications held in this process until written to Redis.",
            multiprocess_mode="livesum", registry=registry,
        )
        self.redis_up = Gauge(
            "errtriage_redis_up", "1 if this process's last Redis operation succeeded, else 0.",
            multiprocess_mode="livemin", registry=registry,
        )
        self.redis_errors = Counter(
            "errtriage_redis_errors", "Failed Redis operations, by operation.", ["operation"], registry=registry,
        )
        self.claims = Counter(
            "errtriage_notify_claims", "Stream entries claimed from a consumer that stopped refreshing them.",
            registry=registry,
        )
        for operation in REDIS_OPERATIONS:
            self.redis_errors.labels(operation)
        self.reloads = Counter("errtriage_rules_reload", "Rule reloads by outcome.", ["outcome"], registry=registry)
        self.last_reload_success = Gauge(
            "errtriage_rules_last_reload_success", "1 if the last rule reload succeeded, else 0.",
            multiprocess_mode="min", registry=registry,
        )
        self.last_reload_success_time = Gauge(
            "errtriage_rules_last_reload_success_timestamp_seconds", "When the rules last loaded successfully.",
            multiprocess_mode="max", registry=registry,
        )
        self.rules_loaded = Gauge(
            "errtriage_rules_loaded", "Entries loaded per table.", ["table"], multiprocess_mode="max", registry=registry
        )
        self.rules_version = Gauge(
            "errtriage_rules_version_info", "The loaded rules' content hash (value 1 for the current one).",
            ["version"], multiprocess_mode="max", registry=registry,
        )
        for outcome in RELOAD_OUTCOMES:
            self.reloads.labels(outcome)
        self.error_count = Children(self.errors)
        self.rule_match_count = Children(self.rule_matches)
        self.notification_count = Children(self.notifications)
        self._version: str | None = None

    def rules_swapped(self, version: str, counts: dict[str, int], label_sets: list[tuple[str, str]],
                      rule_ids: list[str], channels: list[tuple[str, str]], at: float) -> None:
        """Record a successful load and pre-create the label sets the new tables can produce."""
        self.reloads.labels("success").inc()
        self.last_reload_success.set(1)
        self.last_reload_success_time.set(at)
        for table, count in counts.items():
            self.rules_loaded.labels(table).set(count)
        if self._version is not None and self._version != version:
            self.rules_version.labels(self._version).set(0)
        self.rules_version.labels(version).set(1)
        self._version = version
        for class_id, reason in label_sets:
            self.errors.labels(class_id, reason, NO_PROVIDER)
        for rule_id in rule_ids:
            pace()
            self.rule_matches.labels(rule_id)
        for channel, class_id in channels:
            for outcome in NOTIFY_OUTCOMES:
                self.notifications.labels(channel, class_id, outcome)

    def reload_failed(self) -> None:
        self.reloads.labels("failure").inc()
        self.last_reload_success.set(0)
