"""Collect the notification sections of every rule file and check what they refer to.

Every problem becomes one RuleError naming the file, the line of the entry and its id;
all of them are reported together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from service.errors import RuleError
from service.schema.classes import ClassSpec
from service.schema.notify import ChannelSpec, RouteSpec, SilenceSpec
from service.schema.providers import ProviderSpec


@dataclass
class Collected:
    channels: dict[str, ChannelSpec] = field(default_factory=dict)
    routes: list[RouteSpec] = field(default_factory=list)
    silences: list[SilenceSpec] = field(default_factory=list)


@dataclass(frozen=True)
class Where:
    """An entry's place; its line is looked up only when an error needs it (that re-parses the file)."""

    parsed: Any
    section: str
    index: int

    @property
    def file(self) -> str:
        return str(self.parsed.relative)

    def error(self, entry_id: str, message: str) -> RuleError:
        try:
            line = int(self.parsed.raw[self.section][self.index].line)
        except (KeyError, IndexError, TypeError, AttributeError):
            line = 0
        return RuleError(self.file, line, entry_id, message)


class _Checker:
    def __init__(self, classes: dict[str, ClassSpec], providers: dict[str, ProviderSpec], templates: set[str],
                 errors: list[RuleError]) -> None:
        self.classes = classes
        self.providers = providers
        self.templates = templates
        self.errors = errors
        self.first_in: dict[tuple[str, str], str] = {}

    def unique(self, kind: str, entry_id: str, where: Where) -> bool:
        first = self.first_in.get((kind, entry_id))
        if first is not None:
            self.errors.append(where.error(entry_id, f"duplicate {kind} id {entry_id!r} (first in {first})"))
            return False
        self.first_in[(kind, entry_id)] = where.file
        return True

    def undefined(self, kind: str, names: list[str] | None, known: Any, owner: str, entry_id: str,
                  where: Where) -> None:
        for name in names or []:
            if name not in known:
                self.errors.append(where.error(entry_id, f"undefined {kind} {name!r} used in {owner} {entry_id!r}"))

    def route(self, route: RouteSpec, channels: dict[str, ChannelSpec], where: Where) -> None:
        self.undefined("class", route.match.class_, self.classes, "route", route.id, where)
        reasons = {r for c in route.match.class_ if c in self.classes for r in self.classes[c].reasons}
        self.undefined("reason", route.match.reason, reasons, "route", route.id, where)
        self.undefined("provider", route.match.provider, self.providers, "route", route.id, where)
        self.undefined("channel", route.channels, channels, "route", route.id, where)
        self.undefined("template", [route.template], self.templates, "route", route.id, where)

    def silence(self, silence: SilenceSpec, where: Where) -> None:
        self.undefined("class", silence.match.class_, self.classes, "silence", silence.id, where)
        self.undefined("provider", silence.match.provider, self.providers, "silence", silence.id, where)


def collect(files: list[Any], classes: dict[str, ClassSpec], providers: dict[str, ProviderSpec],
            templates: set[str], errors: list[RuleError]) -> Collected:
    """Channels first (a route may name a channel of a later file), then routes and silences in file order."""
    checker = _Checker(classes, providers, templates, errors)
    found = Collected()
    for parsed in files:
        for index, channel in enumerate(parsed.model.channels):
            if checker.unique("channel", channel.id, Where(parsed, "channels", index)):
                found.channels[channel.id] = channel
    for parsed in files:
        for index, route in enumerate(parsed.model.routes):
            where = Where(parsed, "routes", index)
            checker.route(route, found.channels, where)
            if checker.unique("route", route.id, where):
                found.routes.append(route)
        for index, silence in enumerate(parsed.model.silences):
            where = Where(parsed, "silences", index)
            checker.silence(silence, where)
            if checker.unique("silence", silence.id, where):
                found.silences.append(silence)
    return found
