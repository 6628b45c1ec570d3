"""One YAML rule file: the top level, whose sections are the tables' models.

`errtriage schema` publishes the JSON Schema of RuleFile for editors.
"""

from __future__ import annotations

from pydantic import Field

from service.schema.base import Strict
from service.schema.classes import ClassRule, ClassSpec
from service.schema.examples import LabelledExample
from service.schema.notify import ChannelSpec, RouteSpec, SilenceSpec
from service.schema.providers import ProviderSpec


class RuleFile(Strict):
    """One YAML file of any table. Each table's folder takes only its own sections."""

    classes: list[ClassSpec] = Field(default_factory=list, description="classes/: the class and reason vocabulary.")
    rules: list[ClassRule] = Field(default_factory=list, description="classes/: class rules.")
    providers: list[ProviderSpec] = Field(default_factory=list, description="providers/: provider detection.")
    channels: list[ChannelSpec] = Field(default_factory=list, description="routes/: notification channels.")
    routes: list[RouteSpec] = Field(default_factory=list, description="routes/: notification routes, first match wins.")
    silences: list[SilenceSpec] = Field(default_factory=list, description="silences/: muted notifications.")
    examples: list[LabelledExample] = Field(default_factory=list,
                                            description="examples/: labelled reports the fallback learns from.")
