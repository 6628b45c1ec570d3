"""The compiled notification tables of one ruleset: channels, routes, templates, silences.

Built by `build_notify` when the rules load, cross-checked with messages that name the
file, line and id (alertmanager style: "undefined channel 'x' used in route 'y'"), and
never changed afterwards: a reload builds a new one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from service.errors import RulesInvalid
from service.models import DecidedBy
from service.notify.crosscheck import collect
from service.notify.render import TemplateSet, load_templates
from service.schema.classes import ClassSpec
from service.schema.notify import ChannelSpec, RouteSpec, SilenceMatch, SilenceSpec
from service.schema.providers import ProviderSpec


class Classified(Protocol):
    """What routing reads of a classification."""

    class_: str
    reason: str
    provider: str | None
    decided_by: DecidedBy


def _has(allowed: list[str] | None, value: str | None) -> bool:
    return allowed is None or (value is not None and value.lower() in allowed)


def silence_matches(match: SilenceMatch, classification: Classified, source: str | None) -> bool:
    return (_has(match.class_, classification.class_) and _has(match.provider, classification.provider)
            and _has(match.source, source))


@dataclass(frozen=True)
class NotifyConfig:
    channels: dict[str, ChannelSpec]
    routes: tuple[RouteSpec, ...]
    templates: dict[str, TemplateSet]
    silences: tuple[SilenceSpec, ...]
    provider_names: dict[str, str]
    routes_by_class: dict[str, tuple[RouteSpec, ...]] = field(init=False)  # each class's routes, in file order

    def __post_init__(self) -> None:
        by_class: dict[str, list[RouteSpec]] = {}
        for route in self.routes:
            for class_id in route.match.class_:
                by_class.setdefault(class_id, []).append(route)
        object.__setattr__(self, "routes_by_class", {class_id: tuple(routes) for class_id, routes in by_class.items()})

    def counts(self) -> dict[str, int]:
        return {"routes": len(self.routes), "channels": len(self.channels), "templates": len(self.templates),
                "silences": len(self.silences)}

    def label_sets(self) -> list[tuple[str, str]]:
        """Every (channel id, class) a route can count under, to pre-create the metric series."""
        pairs = {(channel, class_id) for route in self.routes for class_id in route.match.class_
                 for channel in route.channels}
        return sorted(pairs)

    def route_for(self, classification: Classified, report: Any) -> RouteSpec | None:
        """The first route (file order) whose match holds; `report` is anything with a `.source`."""
        source = getattr(report, "source", None)
        guessed = classification.decided_by == "fallback"
        for route in self.routes_by_class.get(classification.class_, ()):  # the class already holds
            if guessed and not route.allow_fallback:
                continue
            match = route.match
            if _has(match.reason, classification.reason) and _has(match.provider, classification.provider) \
                    and _has(match.source, source):
                return route
        return None

    def silence_for(self, classification: Classified, source: str | None, now: float) -> SilenceSpec | None:
        """The first silence that matches and has not expired at `now` (epoch seconds, the notifier's clock)."""
        if not self.silences:  # the common case: no datetime to build
            return None
        at = datetime.fromtimestamp(now, UTC)
        return next((s for s in self.silences if at < s.until and silence_matches(s.match, classification, source)),
                    None)


def build_notify(root: Path, files: list[Any], classes: dict[str, ClassSpec],
                 providers: dict[str, ProviderSpec]) -> NotifyConfig:
    """Channels, routes and silences of the parsed files, plus the compiled templates.
    Raises RulesInvalid with every error found."""
    templates, errors = load_templates(root)
    collected = collect(files, classes, providers, set(templates), errors)
    if errors:
        raise RulesInvalid(errors)
    return NotifyConfig(
        channels=collected.channels,
        routes=tuple(collected.routes),
        templates=templates,
        silences=tuple(collected.silences),
        provider_names={pid: spec.name or pid for pid, spec in providers.items()},
    )

