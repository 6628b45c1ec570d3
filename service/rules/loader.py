"""Rule files -> one immutable Ruleset, or RulesInvalid with every error (file, line, rule id).

Build first, swap later: nothing here touches live state. A table is every `*.yaml`
file of its folder, read in file-name order.

Files are parsed with yaml-rs (YAML 1.2, duplicate keys refused, ~20x faster than
PyYAML's C loader: 10,000 rules in a fraction of a second). Only when a file has an
error is it parsed again with PyYAML, whose marks give every node its line.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, cast

import yaml
import yaml_rs
from pydantic import TypeAdapter, ValidationError

from service.errors import RuleError, RulesInvalid
from service.models import ErrorReport
from service.pacing import pace, paced_each
from service.rules.engine import FileInfo, Ruleset, decisions_for, provider_entries, reason_decisions
from service.rules.labelled import LabelledReport
from service.rules.matcher import Entry, PatternError, SetMatcher
from service.rules.training import with_fallback
from service.schema.classes import ClassRule, ClassSpec
from service.schema.providers import ProviderSpec
from service.schema.rulefile import RuleFile

TABLES = {
    "classes": ("classes", "rules"),
    "providers": ("providers",),
    "routes": ("channels", "routes"),
    "silences": ("silences",),
    "examples": ("examples",),
}
TEMPLATES_DIR = "templates"

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LineDict(dict[str, Any]):
    """A YAML mapping that remembers the line it starts on (1-based)."""

    line: int = 0


class _LineLoader(_Loader):  # type: ignore[misc,valid-type]
    pass


def _construct_mapping(loader: Any, node: yaml.MappingNode) -> LineDict:
    mapping = LineDict(loader.construct_mapping(node, deep=True))
    mapping.line = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


@dataclass
class ParsedFile:
    path: Path
    relative: str
    table: str
    model: RuleFile
    text: str

    @cached_property
    def raw(self) -> LineDict:
        """The file again, with line numbers: only computed when an error needs a line."""
        return _with_lines(self.text)


def _with_lines(text: str) -> LineDict:
    data = yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    return data if isinstance(data, LineDict) else LineDict()


_YAML_RS_LINE = re.compile(r"at line (\d+)")


def _yaml_error(relative: str, text: str, exc: Exception) -> RuleError:
    """The clearest account of a syntax error: PyYAML's, with its mark, else yaml-rs's own."""
    try:
        yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as marked:
        mark = marked.problem_mark
        return RuleError(relative, mark.line + 1 if mark else 0, None, f"YAML: {marked.problem}")
    except yaml.YAMLError as other:
        return RuleError(relative, 0, None, f"YAML: {other}")
    found = _YAML_RS_LINE.search(str(exc))
    return RuleError(relative, int(found.group(1)) if found else 0, None, f"YAML: {str(exc).splitlines()[0]}")


def _line_of(data: Any, loc: tuple[Any, ...]) -> int:
    """The line of the deepest mapping on the error's path."""
    line = data.line if isinstance(data, LineDict) else 0
    for key in loc:
        try:
            data = data[key]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(data, LineDict):
            line = data.line
    return line


def _rule_id_at(data: Any, loc: tuple[Any, ...]) -> str | None:
    if len(loc) >= 2 and isinstance(data, dict):
        try:
            item = data[loc[0]][loc[1]]
        except (KeyError, IndexError, TypeError):
            return None
        rule_id = item.get("id") if isinstance(item, dict) else None
        if isinstance(rule_id, str):
            return rule_id
    return None


_SLICE_BYTES = 16 * 1024
_TOP_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):[ \t]*(#.*)?")
_ITEM = re.compile(r"( *)- ")


def load_yaml(text: str) -> Any:
    """yaml-rs builds a file's objects in one call that holds the GIL (77 ms for 10,000 rules),
    which stalls the event loop a reload runs beside. A large file that is one top-level key
    over a block sequence (the shape of every table) is parsed a slice of items at a time,
    with pace() between: the same data. Any other shape, or a slice that does not parse alone
    (an alias of an anchor in another slice, a flow collection across items), is parsed whole."""
    sliced = _item_slices(text) if len(text) > _SLICE_BYTES else None
    if sliced is None:
        return yaml_rs.loads(text)
    key, slices = sliced
    items: list[Any] = []
    for piece in slices:
        pace()
        try:
            part = yaml_rs.loads(f"{key}:\n{piece}")
        except yaml_rs.YAMLDecodeError:
            return yaml_rs.loads(text)
        if not isinstance(part, dict) or list(part) != [key] or not isinstance(part[key], list):
            return yaml_rs.loads(text)
        items.extend(part[key])
    return {key: items}


def _item_slices(text: str) -> tuple[str, list[str]] | None:
    """The top-level key and the text of its sequence's items, cut between items about every
    _SLICE_BYTES; None unless the file is exactly `key:` then a block sequence."""
    lines = text.splitlines(keepends=True)
    content = [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
    if len(content) < 2 or not (head := _TOP_KEY.fullmatch(lines[content[0]].rstrip("\r\n"))):
        return None
    first = _ITEM.match(lines[content[1]])
    if first is None:
        return None
    marker = f"{first.group(1)}- "
    body = lines[content[1]:]
    if any(line[:1] not in (" ", "\n", "\r", "#") and not line.startswith(marker) for line in body):
        return None  # another top-level key, or a document marker
    slices: list[str] = []
    start = size = 0
    for index, line in enumerate(body):
        if size > _SLICE_BYTES and line.startswith(marker):
            slices.append("".join(body[start:index]))
            start, size = index, 0
        size += len(line)
    slices.append("".join(body[start:]))
    return head.group(1), slices


_ITEMS_AT_ONCE = 100
_ITEM_ADAPTERS: dict[str, TypeAdapter[list[Any]]] = {  # every section is a list of one model
    name: TypeAdapter(cast("type[list[Any]]", field.annotation)) for name, field in RuleFile.model_fields.items()}


def validate_file(data: dict[str, Any]) -> tuple[RuleFile, list[Any]]:
    """The file's model and every validation error (pydantic's, with their locations). A long
    section is validated a slice of items at a time, pace() between: pydantic validates a whole
    file in one call that held the GIL ~130 ms for 10,000 rules."""
    long = {name: items for name, items in data.items()
            if name in _ITEM_ADAPTERS and isinstance(items, list) and len(items) > _ITEMS_AT_ONCE}
    errors: list[Any] = []
    try:
        model = RuleFile.model_validate({**data, **{name: [] for name in long}})
    except ValidationError as exc:
        model, errors = RuleFile(), exc.errors()
    sections: dict[str, list[Any]] = {}
    for name, items in long.items():
        sections[name] = []
        for start in range(0, len(items), _ITEMS_AT_ONCE):
            pace()
            try:
                sections[name] += _ITEM_ADAPTERS[name].validate_python(items[start:start + _ITEMS_AT_ONCE])
            except ValidationError as exc:
                errors += [{**err, "loc": (name, int(err["loc"][0]) + start, *err["loc"][1:])} for err in exc.errors()]
    if errors:
        return RuleFile(), errors
    return model.model_copy(update=sections) if sections else model, errors


def parse_file(path: Path, relative: str, table: str) -> ParsedFile:
    """Raises RulesInvalid with every schema error of this one file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RulesInvalid([RuleError(relative, 0, None, f"unreadable: {exc}")]) from exc
    try:
        data: Any = load_yaml(text)  # any YAML value (None for an empty file), not just what the stub says
    except yaml_rs.YAMLDecodeError as exc:
        raise RulesInvalid([_yaml_error(relative, text, exc)]) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RulesInvalid([RuleError(relative, 1, None, "a rule file must be a mapping")])
    errors = [
        RuleError(relative, 1, None, f"section {key!r} does not belong in {table}/") for key in data
        if key not in TABLES[table]
    ]
    model, invalid = validate_file(data)
    if invalid:
        raw = _with_lines(text)
        for err in invalid:
            loc = tuple(err["loc"])
            where = ".".join(str(part) for part in loc)
            errors.append(RuleError(relative, _line_of(raw, loc), _rule_id_at(raw, loc), f"{where}: {err['msg']}"))
    if errors:
        raise RulesInvalid(errors)
    return ParsedFile(path, relative, table, model, text)


def read_tables(root: Path) -> tuple[list[ParsedFile], str, list[RuleError]]:
    """Parse every table file; returns the files, the content hash and the errors."""
    if not root.is_dir():
        raise RulesInvalid([RuleError(str(root), 0, None, "rules directory does not exist")])
    digest = hashlib.sha256()
    files: list[ParsedFile] = []
    errors: list[RuleError] = []
    for table in TABLES:
        for path in sorted((root / table).glob("*.yaml")) if (root / table).is_dir() else []:
            pace()  # the examples table is hundreds of small files: 50-70 ms in a row
            relative = path.relative_to(root).as_posix()
            digest.update(relative.encode() + b"\0" + path.read_bytes() + b"\0")
            try:
                files.append(parse_file(path, relative, table))
            except RulesInvalid as exc:
                errors.extend(exc.errors)
    templates = root / TEMPLATES_DIR
    for path in sorted(templates.rglob("*")) if templates.is_dir() else []:
        if path.is_file():
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return files, f"sha256:{digest.hexdigest()[:16]}", errors


def _line_of_item(parsed: ParsedFile, section: str, index: int) -> int:
    return _line_of(parsed.raw, (section, index))


def _collect(files: list[ParsedFile], errors: list[RuleError]) -> tuple[
    dict[str, ClassSpec], list[tuple[ClassRule, ParsedFile, int]], dict[str, ProviderSpec], dict[str, str]
]:
    classes: dict[str, ClassSpec] = {}
    rules: list[tuple[ClassRule, ParsedFile, int]] = []
    providers: dict[str, ProviderSpec] = {}
    sources: dict[str, str] = {}
    for parsed in files:
        for index, spec in enumerate(parsed.model.classes):
            if spec.id in classes:
                errors.append(RuleError(parsed.relative, _line_of_item(parsed, "classes", index), spec.id,
                                        f"class {spec.id!r} is declared twice"))
            classes[spec.id] = spec
        for index, rule in enumerate(parsed.model.rules):
            pace()
            if rule.id in sources:
                errors.append(RuleError(parsed.relative, _line_of_item(parsed, "rules", index), rule.id,
                                        f"duplicate rule id {rule.id!r} (first in {sources[rule.id]})"))
                continue
            sources[rule.id] = parsed.relative
            rules.append((rule, parsed, index))
        for index, provider in enumerate(parsed.model.providers):
            if provider.id in providers:
                errors.append(RuleError(parsed.relative, _line_of_item(parsed, "providers", index), provider.id,
                                        f"provider {provider.id!r} is declared twice"))
            providers[provider.id] = provider
            sources.setdefault(f"provider:{provider.id}", parsed.relative)
    return classes, rules, providers, sources


def _check_vocabulary(
    classes: dict[str, ClassSpec], rules: list[tuple[ClassRule, ParsedFile, int]], errors: list[RuleError]
) -> None:
    for rule, parsed, index in rules:
        pace()
        spec = classes.get(rule.class_)
        if spec is None:
            problem = f"undefined class {rule.class_!r}"
        elif rule.reason not in spec.reasons:
            problem = f"reason {rule.reason!r} is not declared for class {rule.class_!r}"
        else:
            continue
        errors.append(RuleError(parsed.relative, _line_of_item(parsed, "rules", index), rule.id, problem))


def _compile(tables: list[list[Entry]], where: list[Callable[[int], tuple[str, int, str | None]]],
             errors: list[RuleError], previous: SetMatcher | None) -> SetMatcher | None:
    try:
        return SetMatcher(tables, previous)
    except PatternError as exc:
        relative, line, rule_id = where[exc.table](exc.entry)
        errors.append(RuleError(relative, line, rule_id, str(exc)))
        return None


NotifyBuilder = Callable[[Path, list[ParsedFile], dict[str, ClassSpec], dict[str, ProviderSpec]], Any]


def load_ruleset(root: Path, notify_builder: NotifyBuilder | None = None, now: datetime | None = None,
                 previous: Ruleset | None = None, fallback_min_confidence: float | None = None) -> Ruleset:
    """Build a complete Ruleset from a rules directory. Raises RulesInvalid listing every error.
    `previous`, the ruleset a reload replaces, lends the compiled parts it did not change.
    With `fallback_min_confidence` set, the learned fallback is trained on the examples/ table
    and the rules' test cases; None leaves it off."""
    with gc_paused():
        ruleset = _build_ruleset(root, notify_builder, now, previous)
    return ruleset if fallback_min_confidence is None else with_fallback(ruleset, fallback_min_confidence)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """A load allocates a large structure that lives on; the cyclic GC would scan it over and
    over as it grows (0.8 s of a 2.1 s load of 10,000 rules). Reference counting still frees."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _examples(files: list[ParsedFile], classes: dict[str, ClassSpec],
              errors: list[RuleError]) -> list[LabelledReport]:
    """Every labelled example, its report validated; a bad report, or a class or reason the
    vocabulary lacks, is an error naming the example's line."""
    found = []
    for parsed in files:
        for index, example in enumerate(parsed.model.examples):
            pace()
            label = example.expect
            spec = classes.get(label.class_)
            try:
                report = ErrorReport.model_validate(example.report)
            except ValidationError as exc:
                problem: str | None = f"invalid report: {exc.errors()[0]['msg']}"
            else:
                problem = None if spec is not None and label.reason in spec.reasons else (
                    f"example labelled {label.class_}/{label.reason}, which the classes table does not declare")
            if problem is not None:
                errors.append(RuleError(parsed.relative, _line_of_item(parsed, "examples", index), None, problem))
                continue
            found.append(LabelledReport(report, label.class_, label.reason, f"{parsed.relative}#{index}"))
    return found


def _by_priority(collected: list[tuple[ClassRule, ParsedFile, int]]) -> list[tuple[ClassRule, ParsedFile, int]]:
    """Higher priority first, file order within one: a stable sort by priority, made as buckets
    in a paced loop (one `sorted` with a key function held the GIL 5-15 ms at 10,000 rules)."""
    buckets: dict[int, list[tuple[ClassRule, ParsedFile, int]]] = {}
    for item in paced_each(collected):
        buckets.setdefault(item[0].priority, []).append(item)
    return [item for priority in sorted(buckets, reverse=True) for item in paced_each(buckets[priority])]


def _build_ruleset(root: Path, notify_builder: NotifyBuilder | None, now: datetime | None,
                   previous: Ruleset | None) -> Ruleset:
    files, version, errors = read_tables(root)
    classes, collected, providers, sources = _collect(files, errors)
    _check_vocabulary(classes, collected, errors)
    rules = _by_priority(collected)
    entries, keys = provider_entries(list(providers.values()))
    matcher = _compile(
        [[Entry(rule.id, rule.blocks(), rule.not_) for rule, _, _ in paced_each(rules)], entries],
        [lambda i: (rules[i][1].relative, _line_of_item(rules[i][1], "rules", rules[i][2]), rules[i][0].id),
         lambda i: (sources[f"provider:{keys[i][0]}"], 0, keys[i][0])],
        errors,
        previous.matcher if previous is not None else None,
    )
    notify = None
    if notify_builder is not None:
        try:
            notify = notify_builder(root, files, classes, providers)
        except RulesInvalid as exc:
            errors.extend(exc.errors)
    examples = _examples(files, classes, errors)
    if errors or matcher is None:
        raise RulesInvalid(errors)
    ordered_rules = tuple(rule for rule, _, _ in rules)
    by_reason = reason_decisions(classes)
    return Ruleset(
        version=version,
        loaded_at=now or datetime.now(UTC),
        files=tuple(
            FileInfo(f.relative, len(f.model.rules), len(f.model.providers), len(f.model.classes)) for f in files
        ),
        classes=classes,
        rules=ordered_rules,
        providers=providers,
        aliases={alias.lower(): spec.id for spec in providers.values() for alias in spec.aliases},
        provider_entries=tuple(keys),
        decisions=decisions_for(ordered_rules, classes, by_reason),
        by_reason=by_reason,
        notify=notify,
        sources=sources,
        labelled=tuple(examples),
        matcher=matcher.finish(),  # last: the literal sets compiled on their thread meanwhile
    )
