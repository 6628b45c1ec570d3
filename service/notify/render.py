"""Notification templates: Jinja2, sandboxed, strict, compiled and test-rendered when the rules load.

A template named `ai_credits` is the files `templates/ai_credits.<part>.j2`, part one of
subject, text (both required), html (autoescaped) and json (a webhook body; it must
render valid JSON). Files starting with `_` are layouts and partials for
`{% extends %}`/`{% include %}`. The sources are read once per load, so a template
file edited later changes nothing until the next reload.
"""

from __future__ import annotations

import json
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import (
    BaseLoader,
    Environment,
    StrictUndefined,
    Template,
    TemplateError,
    TemplateNotFound,
    TemplateSyntaxError,
)
from jinja2.sandbox import SandboxedEnvironment

from service.errors import DeliveryError, RuleError
from service.notify.variables import samples
from service.redact import redact

TEMPLATES_DIR = "templates"
PARTS = ("subject", "text", "html", "json")
REQUIRED_PARTS = ("subject", "text")
SUBJECT_LIMIT = 200
_SET_FILE = re.compile(r"^(?P<name>[a-z0-9][a-z0-9_-]{0,99})\.(?P<part>[a-z]+)\.j2$")
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]+")


def one_line(text: str, limit: int = SUBJECT_LIMIT) -> str:
    """Text safe for a header: no CR, LF or other control characters, one space between words, capped."""
    flat = " ".join(_UNSAFE.sub(" ", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Rendered:
    subject: str
    text: str
    html: str | None
    body: bytes | None  # the json part, when the template has one


class _SnapshotLoader(BaseLoader):
    """Sources read at load time; the file name is kept so errors name the file."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.sources = sources

    def get_source(self, environment: Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        if template not in self.sources:
            raise TemplateNotFound(template)
        return self.sources[template], f"{TEMPLATES_DIR}/{template}", lambda: True


@dataclass(frozen=True)
class TemplateSet:
    name: str
    parts: dict[str, Template]

    def render(self, variables: dict[str, Any]) -> Rendered:
        """Raises DeliveryError (permanent) if a template fails; load-time test renders make that rare."""
        try:
            out = {part: template.render(variables) for part, template in self.parts.items()}
        except Exception as exc:  # an expression can raise anything Python can; all of it is a failed send
            raise DeliveryError(f"template {self.name!r} failed to render: {exc}", transient=False) from exc
        body = out.get("json")
        return Rendered(
            subject=one_line(redact(out["subject"])),
            text=redact(out["text"]),
            html=redact(out["html"]) if "html" in out else None,
            body=redact(body).encode() if body is not None else None,
        )


def _environment(sources: dict[str, str]) -> SandboxedEnvironment:
    return SandboxedEnvironment(
        loader=_SnapshotLoader(sources),
        undefined=StrictUndefined,
        autoescape=lambda name: bool(name) and ".html." in name,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )


def _failing_line(exc: BaseException, filename: str) -> int:
    lines = [line for frame, line in traceback.walk_tb(exc.__traceback__) if frame.f_code.co_filename == filename]
    return lines[-1] if lines else 0


class _Loading:
    """One load of the templates folder, collecting every error."""

    def __init__(self, root: Path) -> None:
        folder = root / TEMPLATES_DIR
        files = sorted(folder.glob("*.j2")) if folder.is_dir() else []
        self.sources = {path.name: path.read_text(encoding="utf-8") for path in files}
        self.env = _environment(self.sources)
        self.errors: list[RuleError] = []

    def error(self, filename: str, line: int, name: str | None, message: str) -> None:
        self.errors.append(RuleError(f"{TEMPLATES_DIR}/{filename}", line, name, message))

    def compile(self, filename: str, name: str | None) -> Template | None:
        try:
            return self.env.get_template(filename)
        except TemplateSyntaxError as exc:
            where = exc.name or filename
            self.error(where.removeprefix(f"{TEMPLATES_DIR}/"), exc.lineno, name, f"template syntax: {exc.message}")
        except TemplateError as exc:
            self.error(filename, 0, name, f"template does not load: {exc}")
        return None

    def sets(self) -> dict[str, dict[str, str]]:
        grouped: dict[str, dict[str, str]] = {}
        for filename in self.sources:
            found = _SET_FILE.match(filename)
            if filename.startswith("_"):
                self.compile(filename, None)
            elif found is None or found["part"] not in PARTS:
                self.error(filename, 0, None, f"template file {filename!r} is not named "
                           f"<name>.<part>.j2 with part one of {', '.join(PARTS)}")
            else:
                grouped.setdefault(found["name"], {})[found["part"]] = filename
        return grouped

    def build(self, name: str, files: dict[str, str]) -> TemplateSet | None:
        missing = [part for part in REQUIRED_PARTS if part not in files]
        for part in missing:
            self.error(f"{name}.{part}.j2", 0, name, f"template {name!r} has no {part} part")
        parts = {part: self.compile(filename, name) for part, filename in files.items()}
        if missing or any(template is None for template in parts.values()):
            return None
        compiled = TemplateSet(name, {part: t for part, t in parts.items() if t is not None})
        return compiled if self.test_render(compiled, files) else None

    def test_render(self, compiled: TemplateSet, files: dict[str, str]) -> bool:
        for variables in samples():
            for part, template in compiled.parts.items():
                if not self._renders(compiled.name, part, template, variables, files[part]):
                    return False
        return True

    def _renders(self, name: str, part: str, template: Template, variables: dict[str, Any], filename: str) -> bool:
        try:
            out = template.render(variables)
        except Exception as exc:  # noqa: BLE001 - an expression can raise anything; all of it is a rule error
            line = _failing_line(exc, f"{TEMPLATES_DIR}/{filename}")
            self.error(filename, line, name, f"test render failed: {exc}")
            return False
        if part == "json":
            try:
                json.loads(out)
            except ValueError as exc:
                self.error(filename, 0, name, f"does not render valid JSON: {exc}")
                return False
        return True


def load_templates(root: Path) -> tuple[dict[str, TemplateSet], list[RuleError]]:
    """Compile and test-render every template under root/templates. Returns the sets and every error."""
    loading = _Loading(root)
    built = {name: loading.build(name, files) for name, files in loading.sets().items()}
    return {name: found for name, found in built.items() if found is not None}, loading.errors
