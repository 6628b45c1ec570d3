"""A whole table of match conditions compiled into set matchers, so a message is scanned once.

Per text field: one literal set (service/rules/literals.py, Hyperscan, over UTF-8) for every
literal (`contains`), one dict for `equals`, and an RE2 set for the regexes (linear time,
whatever an operator writes). On a serving ruleset a Hyperscan scanner of the same regexes
(literals.RegexScanner, compiled in the background) then reads ASCII texts, and RE2 confirms
its candidates: the set's lazy DFA never warms up on traffic whose every message is new.
Regexes that span a gap of any text (`.{0,80}`, `.*`) run apart, in RE2's FilteredRE2
(see _SPANS_GAP). On a field with thousands of regexes, each regex instead
waits for its required literals (service/rules/prefilter.py), found by the same literal set;
only regexes without usable literals stay in the set.
A scan yields the satisfied conditions; only the entries one of those triggers are checked,
in evaluation order. The cost per message grows with what matches, not with the rule count:
an RE2 set of thousands of regexes rebuilds its DFA on every fresh text (~170 µs a message
at 3,000 regexes here), the literal set does not.
"""

from __future__ import annotations

import logging
import re
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from typing import Any

import re2

from service import re2spans
from service.pacing import lower_priority, pace, paced_each
from service.rules.literals import LiteralSet, RegexScanner
from service.rules.prefilter import atoms
from service.schema.match import MatchBlock, StatusItem, TextCondition

log = logging.getLogger("errtriage.rules")

Fields = dict[str, list[str]]  # normalized text values by field name (original case)
# From this many regexes on a field (gap regexes aside), a regex waits for its required literals.
# Below it one RE2 set is cheaper: on real messages common atoms ("error", "limit") make many
# candidates (the shipped tables' rate-limit message: 53 at 1,100 regexes, ~200 µs).
PREFILTER_FROM = 2000
# A regex that spans a gap of any text (`.{0,80}`, `.*`, `[^,]+`, `\S+`) keeps many positions
# live at once. In one RE2 set with hundreds of others, the lazy DFA's states multiply with
# every fresh text until its memory fills and it starts over: on the tuning corpus 718 message
# regexes cost ~0.5 ms a message (1,100: ~1.5 ms), 8-10 µs without their gap regexes. So these
# run apart, in RE2's FilteredRE2: a literal set of their atoms, then only the candidates, in C++.
# A broad class counted up to ten or more (`[\w ]{1,40}`, `\w{1,80}`) spans a gap as well: 15
# such regexes among 1,675 made the set cost 1,063 µs a real message, 9 µs without them.
_SPANS_GAP = re.compile(r"\.[*+{]|\[\^(?:\\.|[^\]\\])*\][*+{]|\\[SWD][*+{]|(?:\]|\\[swd])\{\d*,?\d{2,}\}")
# RE2 compiles a set or a FilteredRE2 in one call that holds the GIL (~0.02 ms a set regex,
# ~0.07 ms a gap regex here), so a reload building beside the event loop stalls it that long.
# Gap regexes compile in groups of about FILTER_GROUP (400 in one call: 33 ms; in groups: at most
# 12 ms; a message runs each group's atom scan, ~6 µs more on the bench's message). The RE2 set
# stays whole: in groups of 512 it cost real messages 25-60 µs more (a DFA pass
# per group), so a reload that changes one of the shipped tables' set regexes holds the GIL
# ~25 ms once; a reload that changes none reuses the set (Parts).
FILTER_GROUP = 128
# Short values (types, codes, hosts, sources, short messages) repeat: their scan result is kept,
# a pure memo of an immutable index. Bounded: cleared when full.
MEMO_UP_TO = 256
MEMO_SIZE = 4096


class PatternError(ValueError):
    """An entry's regex does not compile under RE2; carries where it stands (table, entry)."""

    def __init__(self, where: tuple[int, int], field_name: str, pattern: str, reason: str) -> None:
        super().__init__(f"{field_name}: regex {pattern!r} does not compile under RE2: {reason}")
        self.table, self.entry = where


def re2_options(max_mem: int = 8 << 20) -> re2.Options:
    return re2spans.compile_options(case_sensitive=False, max_mem=max_mem)


class Parts:
    """What one matcher build compiles, by source: regex atoms and RE2 objects by pattern, a
    field's literal set by its words. A reload lends the serving matcher's parts to the next
    build, which compiles only what changed (an edited route or silence changes none of them).
    The matcher keeps just `made`, the parts it uses, so nothing outlives the rulesets being
    served; RE2 objects and literal sets are immutable and thread-safe, so rulesets may share them."""

    def __init__(self, lent: dict[Hashable, Any]) -> None:
        self.lent = lent
        self.made: dict[Hashable, Any] = {}

    def reuse(self, key: Hashable) -> bool:
        """Whether `made` holds the part under `key`, taken from `lent` if the last build made it."""
        if key not in self.made and key in self.lent:
            self.made[key] = self.lent[key]
        return key in self.made

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        if not self.reuse(key):
            self.made[key] = build()
        return self.made[key]


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing a table can decide: blocks are any-of, `exclude` vetoes."""

    key: Any
    blocks: Sequence[MatchBlock]
    exclude: MatchBlock | None = None


@dataclass(slots=True)
class _Block:
    table: int
    entry: int
    index: int
    specs: frozenset[int]
    fields: dict[str, int]  # field name -> spec id


@dataclass(slots=True)
class _FieldIndex:
    """Every condition on one field. Literals and regex atoms share one literal set; a regex with
    atoms runs only when one of them is in the text, the others run together in an RE2 set."""

    literals: dict[str, list[int]] = field(default_factory=dict)
    equals: dict[str, list[int]] = field(default_factory=dict)
    regexes: list[tuple[str, list[int]]] = field(default_factory=list)
    regex_at: dict[str, int] = field(default_factory=dict)  # pattern -> its place in `regexes`
    literal_set: LiteralSet | None = None
    word_specs: list[tuple[int, ...]] = field(default_factory=list)  # literal-set word -> the spec ids it satisfies
    word_regexes: list[tuple[int, ...]] = field(default_factory=list)  # literal-set word -> the regexes it triggers
    regex_specs: list[tuple[int, ...]] = field(default_factory=list)  # regex index -> the spec ids it satisfies
    also_required: dict[int, list[frozenset[int]]] = field(default_factory=dict)  # regex id -> other atom sets
    compiled: list[Any] = field(default_factory=list)  # regex index -> its own RE2 object, None until needed
    unfiltered: list[int] = field(default_factory=list)  # regexes that run in RE2 sets
    regex_sets: list[tuple[Any, tuple[int, ...]]] = field(default_factory=list)  # the set (one at most), its regexes
    scan_members: tuple[int, ...] = ()  # the set's regexes a RegexScanner can take, in its pattern order
    rest_sets: list[tuple[Any, tuple[int, ...]]] = field(default_factory=list)  # the set's other regexes
    scanner: RegexScanner | None = None  # installed once compiled (start_scanners); the set serves till then
    scanner_build: Future[RegexScanner] | None = None  # the build start_scanners asked for
    gapped: list[int] = field(default_factory=list)  # regexes that span a gap
    gap_filters: list[tuple[Any, tuple[int, ...]]] = field(default_factory=list)  # a FilteredRE2, its regex indexes
    captures: dict[int, list[Any]] = field(default_factory=dict)  # spec id -> its regexes that have groups
    memo: dict[str, frozenset[int]] = field(default_factory=dict)  # short value -> its conditions

    def add(self, spec: int, condition: TextCondition) -> None:
        for literal in condition.contains:
            self.literals.setdefault(literal.lower(), []).append(spec)
        for value in condition.equals:
            self.equals.setdefault(value.lower(), []).append(spec)
        for pattern in condition.regex:  # a pattern several rules share is one regex with their specs
            at = self.regex_at.setdefault(pattern, len(self.regexes))
            if at == len(self.regexes):
                self.regexes.append((pattern, []))
            self.regexes[at][1].append(spec)

    def index_words(self, parts: Parts) -> list[str]:
        """Index every literal and regex atom (`word_specs`, `word_regexes`, `also_required`, `unfiltered`) and return
        the words, in target order, for the literal set.

        A regex is triggered by an atom of its most selective required set; it runs when the text
        also holds an atom of each of its other sets (`also_required`, by word index)."""
        words: dict[str, tuple[list[int], list[int]]] = {
            w: (specs, []) for w, specs in paced_each(self.literals.items())}
        others: dict[int, tuple[frozenset[str], ...]] = {}
        self.gapped = [index for index, (pattern, _) in enumerate(paced_each(self.regexes))
                       if _SPANS_GAP.search(pattern)]
        prefilter = len(self.regexes) - len(self.gapped) >= PREFILTER_FROM
        gapped = set(self.gapped)
        for index, (pattern, _) in enumerate(self.regexes):
            pace()
            if index in gapped:
                continue
            required = parts.get(("atoms", pattern), partial(atoms, pattern)) if prefilter else None
            if required is None:
                self.unfiltered.append(index)
                continue
            trigger, *rest = required
            for word in trigger:
                words.setdefault(word, ([], []))[1].append(index)
            for word in (word for atom_set in rest for word in atom_set):
                words.setdefault(word, ([], []))
            if rest:
                others[index] = tuple(rest)
        position = {word: i for i, word in enumerate(paced_each(words))}
        self.also_required = {index: [frozenset(position[w] for w in atom_set) for atom_set in rest]
                              for index, rest in paced_each(others.items())}
        self.word_specs = [tuple(specs) for specs, _ in paced_each(words.values())]
        self.word_regexes = [tuple(regexes) for _, regexes in paced_each(words.values())]
        self.regex_specs = [tuple(specs) for _, specs in paced_each(self.regexes)]
        return list(words)

    def compile_regexes(self, entry_of: dict[int, tuple[int, int]], field_name: str, parts: Parts) -> None:
        """Raises PatternError for a regex RE2 refuses. Every regex is parsed here (~12 µs); only
        one with named groups (captures) is compiled on its own now (~90 µs). One that a literal
        triggers compiles when first triggered (`_runs`): most of 10,000 rules' never are. The
        rest run only in the sets and filters."""
        checker = re2.Set.SearchSet(re2_options())
        for pattern, specs in self.regexes:
            pace()
            try:
                checker.Add(pattern)
            except re2.error:
                raise _refusal(entry_of[specs[0]], field_name, pattern) from None
            named = "(?P<" in pattern or "(?<" in pattern
            compiled = parts.get(("regex", pattern), partial(re2.compile, pattern, re2_options())) if named else None
            self.compiled.append(compiled)
            if compiled is not None and compiled.groupindex:
                for spec in specs:
                    self.captures.setdefault(spec, []).append(compiled)
        self.regex_sets = self._grouped(self.unfiltered, max(1, len(self.unfiltered)), "set", _compile_set, parts)
        taken = {index for index in self.unfiltered if RegexScanner.takes(self.regexes[index][0])}
        self.scan_members = tuple(sorted(taken, key=lambda index: self.regexes[index][0]))
        rest = [index for index in self.unfiltered if index not in taken]
        self.rest_sets = self._grouped(rest, max(1, len(rest)), "set", _compile_set, parts)
        self.gap_filters = self._grouped(self.gapped, FILTER_GROUP, "filter", _compile_filter, parts)

    def install_scanner(self, built: Future[RegexScanner]) -> None:
        if built.exception() is None:  # else _build_scanner logged it, and the set keeps serving
            self.scanner = built.result()

    def _grouped(self, indexes: list[int], size: int, kind: str, build: Callable[[tuple[str, ...]], Any],
                 parts: Parts) -> list[tuple[Any, tuple[int, ...]]]:
        """Compile `indexes` in groups of about `size`, by a hash of each pattern and sorted: an edit
        changes only its own group, so a reload reuses the others' compiled objects."""
        count = -(-len(indexes) // size)
        groups: list[list[int]] = [[] for _ in range(count)]
        for index in indexes:
            groups[zlib.crc32(self.regexes[index][0].encode()) % count].append(index)
        compiled = []
        for group in filter(None, groups):
            group.sort(key=lambda index: self.regexes[index][0])
            patterns = tuple(self.regexes[index][0] for index in group)
            pace()
            compiled.append((parts.get((kind, patterns), partial(build, patterns)), tuple(group)))
        return compiled

    def scan(self, values: list[str], satisfied: set[int], trace: dict[int, str] | None) -> None:
        for value in values:
            if trace is not None or len(value) > MEMO_UP_TO:
                satisfied.update(self._specs_of(value, trace))
                continue
            specs = self.memo.get(value)
            if specs is None:
                if len(self.memo) >= MEMO_SIZE:
                    self.memo.clear()
                specs = self.memo[value] = frozenset(self._specs_of(value, None))
            satisfied.update(specs)

    def _specs_of(self, value: str, trace: dict[int, str] | None) -> set[int]:
        """The ids of the conditions one value satisfies (with why, into `trace` when given).

        The unions run in C (`chain` over per-word and per-regex tuples): a rate-limit message
        satisfies ~20 regexes and a few literals, and a Python loop over them cost ~4 µs."""
        lowered = value.lower()
        hits: list[int] = self.literal_set.indexes(lowered.encode()) if self.literal_set is not None else []
        found = set(chain.from_iterable(map(self.word_specs.__getitem__, hits)))
        triggered = set(chain.from_iterable(map(self.word_regexes.__getitem__, hits)))
        matched: list[int] = []  # regex indexes
        if triggered or self.regex_sets or self.gap_filters:
            data = value.encode()  # bytes: the binding skips re-encoding and offset mapping
            if triggered:
                matched = [index for index in self._candidates(triggered, hits) if self._runs(index, data)]
            scanner, sets = self.scanner, self.regex_sets
            if scanner is not None and scanner.reads(data):
                members, unsure = self.scan_members, scanner.unsure
                matched.extend(members[found] for found in scanner.scan(data)
                               if found not in unsure or self._runs(members[found], data))
                sets = self.rest_sets
            for regex_set, members in sets:
                matched.extend(map(members.__getitem__, regex_set.Match(data) or ()))
            for gap_filter, members in self.gap_filters:
                matched.extend(map(members.__getitem__, gap_filter.Match(data, False)))
            found.update(chain.from_iterable(map(self.regex_specs.__getitem__, matched)))
        exact = self.equals.get(lowered.strip())
        if exact:
            found.update(exact)
        if trace is not None:
            self._trace(value, hits, exact or (), matched, trace)
        return found

    def _runs(self, index: int, data: bytes) -> bool:
        compiled = self.compiled[index]
        if compiled is None:  # its first trigger (a benign race: two threads may both compile it)
            compiled = self.compiled[index] = re2.compile(self.regexes[index][0], re2_options())
        return re2spans.search(compiled, data) is not None

    def _trace(self, value: str, hits: list[int], exact: Iterable[int], matched: list[int],
               trace: dict[int, str]) -> None:
        """Why each condition holds, for explain: the first reason found wins."""
        for word in hits:
            for spec in self.word_specs[word]:
                trace.setdefault(spec, f"{value[:80]!r} contains a listed literal")
        for spec in exact:
            trace.setdefault(spec, f"equals {value[:80]!r}")
        for index in matched:
            for spec in self.regex_specs[index]:
                trace.setdefault(spec, f"regex {self.regexes[index][0]!r}")

    def _candidates(self, triggered: set[int], hits: list[int]) -> Iterable[int]:
        """The triggered regexes whose other required atom sets each have a word among the hits."""
        if not self.also_required:
            return triggered
        present = set(hits)
        return [index for index in triggered
                if all(not atom_set.isdisjoint(present) for atom_set in self.also_required.get(index, ()))]

    def capture(self, spec: int, values: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for compiled in self.captures.get(spec, ()):
            for value in values:
                match = compiled.search(value)
                if match:
                    found.update({k: v for k, v in match.groupdict().items() if v is not None and k not in found})
        return found


def _refusal(where: tuple[int, int], field_name: str, pattern: str) -> PatternError:
    """RE2's reason for refusing a pattern its set parser refused."""
    try:
        re2.compile(pattern, re2_options())
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
    else:
        reason = "refused by RE2's set parser"
    return PatternError(where, field_name, pattern, reason)


_SCANNERS: OrderedDict[tuple[str, ...], Future[RegexScanner]] = OrderedDict()
_SCANNERS_KEPT = 2  # the serving ruleset's and the one a reload is building
_scanners_lock = threading.Lock()


def scanner_for(patterns: tuple[str, ...]) -> Future[RegexScanner]:
    """The scanner of these patterns, built once per process on a daemon thread at low priority
    (an exiting CLI does not wait for it), shared by every ruleset with the same regexes: a
    reload that changes no set regex, or the tests' many apps on the shipped tables."""
    with _scanners_lock:
        built = _SCANNERS.get(patterns)
        if built is None:
            built = _SCANNERS[patterns] = Future()
            threading.Thread(target=_build_scanner, args=(patterns, built), name="errtriage-regex-scanner",
                             daemon=True).start()
            while len(_SCANNERS) > _SCANNERS_KEPT:
                _SCANNERS.popitem(last=False)
        _SCANNERS.move_to_end(patterns)
        return built


def _build_scanner(patterns: tuple[str, ...], built: Future[RegexScanner]) -> None:
    lower_priority()
    try:
        scanner = RegexScanner(patterns)
    except Exception as exc:  # logged; the RE2 set keeps serving and /readyz says "failed"
        log.exception("regex scanner not built; RE2's set keeps serving")
        built.set_exception(exc)
        return
    if scanner.always:
        log.warning("Hyperscan refuses some regexes; they run on every text",
                    extra={"regexes": [patterns[i] for i in scanner.always][:20]})
    built.set_result(scanner)


def _compile_set(patterns: tuple[str, ...]) -> Any:
    regex_set = re2.Set.SearchSet(re2_options(max(8 << 20, len(patterns) * (64 << 10))))
    for pattern in patterns:
        regex_set.Add(pattern)
    regex_set.Compile()
    return regex_set


def _compile_filter(patterns: tuple[str, ...]) -> Any:
    gap_filter = re2._re2.Filter()
    for pattern in patterns:
        gap_filter.Add(pattern.encode(), re2_options())
    gap_filter.Compile()
    return gap_filter


def _status_codes(item: StatusItem) -> range:
    if isinstance(item, int):
        return range(item, item + 1)
    if item.endswith("xx"):
        start = int(item[0]) * 100
        return range(start, start + 100)
    low, high = item.split("-")
    return range(int(low), int(high) + 1)


@dataclass(frozen=True, slots=True)
class Hit:
    """The earliest entry of a table whose conditions all hold, and which of its blocks held."""

    entry: int
    block: int
    position: int  # the block's place in SetMatcher._blocks


class SetMatcher:
    """Several tables of entries, each in evaluation order, sharing one scan of the fields.

    `satisfied` scans once; `first(table, ...)` then returns the earliest entry of that table
    whose conditions all hold, so provider detection and class rules read one scan.
    """

    def __init__(self, tables: Sequence[Sequence[Entry]], previous: SetMatcher | None = None) -> None:
        """Raises PatternError for a regex RE2 refuses. `previous`: the matcher a reload replaces."""
        self._fields: dict[str, _FieldIndex] = {}
        self._status: dict[int, list[int]] = {}
        self._blocks: list[_Block] = []
        self._excludes: list[list[frozenset[int]]] = []
        self._triggers: list[dict[int, list[int]]] = []
        self._trigger_specs: list[frozenset[int]] = []  # per table: the specs that index a block
        entry_of: dict[int, tuple[int, int]] = {}
        for table, entries in enumerate(tables):
            excludes: list[frozenset[int]] = []
            triggers: dict[int, list[int]] = {}
            for position, entry in enumerate(entries):
                pace()
                where = (table, position)
                for index, block in enumerate(entry.blocks):
                    spec_fields = self._add_block(block, where, entry_of)
                    triggers.setdefault(self._pick_trigger(spec_fields), []).append(len(self._blocks))
                    self._blocks.append(_Block(table, position, index, frozenset(spec_fields.values()), spec_fields))
                excluded = self._add_block(entry.exclude, where, entry_of) if entry.exclude else {}
                excludes.append(frozenset(excluded.values()))
            self._excludes.append(excludes)
            self._triggers.append(triggers)
            self._trigger_specs.append(frozenset(triggers))
        parts = Parts(previous.parts if previous is not None else {})
        self._pending: Callable[[], None] | None = self._compile(entry_of, parts)
        self.parts: dict[Hashable, Any] = parts.made  # what the next reload may reuse

    def _compile(self, entry_of: dict[int, tuple[int, int]], parts: Parts) -> Callable[[], None]:
        """Hyperscan compiles without the GIL: the literal sets build on a second thread while
        RE2 compiles the regexes on this one (0.4-0.6 s and 0.26 s at 10,000 rules). Returns
        what installs the literal sets once built (`finish`)."""
        compiler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="errtriage-literals",
                                      initializer=lower_priority)
        words = {name: ("literals", tuple(word.encode() for word in index.index_words(parts)))
                 for name, index in self._fields.items()}
        building = {key: compiler.submit(LiteralSet, list(key[1]))
                    for key in set(words.values()) if key[1] and not parts.reuse(key)}
        compiler.shutdown(wait=False)  # the submitted builds still run
        for name, index in self._fields.items():
            index.compile_regexes(entry_of, name, parts)

        def install() -> None:
            for key, literal_set in building.items():
                parts.made[key] = literal_set.result()
            for name, key in words.items():
                if key[1]:
                    self._fields[name].literal_set = parts.made[key]

        return install

    def finish(self) -> SetMatcher:
        """Wait for the literal sets building on their thread and install them. The loader calls
        it last, so its other work (templates, examples) overlaps the compile; a scan before
        that finishes first."""
        if self._pending is not None:
            self._pending()
            self._pending = None
        return self

    def start_scanners(self) -> None:
        """Compile each field's RegexScanner in the background and install it when done (the RE2
        set serves meanwhile). Called for a ruleset about to serve, not for one a CLI or a test
        only checks: a scanner takes seconds of CPU."""
        for index in self._fields.values():
            if index.scan_members:
                patterns = tuple(index.regexes[member][0] for member in index.scan_members)
                index.scanner_build = scanner_for(patterns)
                index.scanner_build.add_done_callback(index.install_scanner)

    def scanner_state(self) -> str:
        """ready (every field that has regexes for one has its scanner), failed, or compiling."""
        pending = [index.scanner_build for index in self._fields.values()
                   if index.scan_members and index.scanner is None]
        failed = any(build is not None and build.done() and build.exception() is not None for build in pending)
        return "failed" if failed else "compiling" if pending else "ready"

    def _add_block(self, block: MatchBlock, where: tuple[int, int],
                   entry_of: dict[int, tuple[int, int]]) -> dict[str, int]:
        spec_fields: dict[str, int] = {}
        for name, condition in block.conditions().items():
            spec = len(entry_of)
            entry_of[spec] = where
            spec_fields[name] = spec
            if isinstance(condition, TextCondition):
                self._fields.setdefault(name, _FieldIndex()).add(spec, condition)
            else:  # status: codes and ranges
                for item in condition:
                    for code in _status_codes(item):
                        self._status.setdefault(code, []).append(spec)
        return spec_fields

    @staticmethod
    def _pick_trigger(spec_fields: dict[str, int]) -> int:
        """Index a block under its most selective condition: text before status."""
        for name, spec in spec_fields.items():
            if name != "status":
                return spec
        return spec_fields["status"]

    def satisfied(self, fields: Fields, status: int | None, found: set[int] | None = None,
                  trace: dict[int, str] | None = None) -> set[int]:
        """The ids of every condition the fields satisfy, added to `found` when given."""
        if self._pending is not None:
            self.finish()
        found = set() if found is None else found
        for name, values in fields.items():
            index = self._fields.get(name)
            if index is not None and values:
                index.scan(values, found, trace)
        if status is not None:
            for spec in self._status.get(status, ()):
                found.add(spec)
                if trace is not None:
                    trace.setdefault(spec, f"status {status}")
        return found

    def first(self, table: int, found: set[int]) -> Hit | None:
        triggers = self._triggers[table]
        excludes = self._excludes[table]
        candidates = sorted({b for spec in found & self._trigger_specs[table] for b in triggers[spec]})
        for position in candidates:
            block = self._blocks[position]
            if block.specs <= found and not (excludes[block.entry] & found):
                return Hit(block.entry, block.index, position)
        return None

    def captures(self, hit: Hit, fields: Fields) -> dict[str, str]:
        """What the named groups of the hit block's regexes captured from the fields."""
        block = self._blocks[hit.position]
        captured: dict[str, str] = {}
        for name, spec in block.fields.items():
            index = self._fields.get(name)
            if index is not None and spec in index.captures:
                captured.update(index.capture(spec, fields.get(name, [])))
        return captured

    def explain(self, table: int, fields: Fields, status: int | None) -> list[dict[str, Any]]:
        """Every entry of a table with at least one satisfied condition, in evaluation order, and why."""
        trace: dict[int, str] = {}
        found = self.satisfied(fields, status, trace=trace)
        report: list[dict[str, Any]] = []
        for block in self._blocks:
            hits = {name: trace[spec] for name, spec in block.fields.items() if spec in found}
            if block.table != table or not hits:
                continue
            missing = [name for name, spec in block.fields.items() if spec not in found]
            vetoed = bool(self._excludes[table][block.entry] & found)
            report.append(
                {
                    "entry": block.entry,
                    "block": block.index,
                    "matched": not missing and not vetoed,
                    "conditions": hits,
                    "missing": missing,
                    "excluded_by_not": vetoed,
                }
            )
        return report
