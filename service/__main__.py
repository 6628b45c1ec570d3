"""The errtriage command line: serve, check, classify, schema, test, diff, suggest."""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import orjson

from service.checks import CaseResult, check_ruleset, expected_of, run_case, summarize
from service.errors import RulesInvalid, SettingsInvalid
from service.rules.engine import Ruleset
from service.rules.loader import load_ruleset
from service.settings import DEFAULT_RULES_DIR, load_settings


def _load(root: Path, fallback: bool = False) -> Ruleset:
    """The rules of `root`; with `fallback`, the learned fallback as ERRTRIAGE_FALLBACK* set it.
    `check` tests the rules alone: a rule's test case says what the rules must answer."""
    from service.notify.config import build_notify

    threshold = load_settings().fallback_threshold if fallback else None
    return load_ruleset(root, build_notify, fallback_min_confidence=threshold)


def _fail(message: str, code: int = 1) -> int:
    print(message, file=sys.stderr)
    return code


def cmd_serve(args: argparse.Namespace) -> int:
    from service.api.server import serve

    overrides = {"host": args.host, "port": args.port, "rules_dir": args.rules, "workers": args.workers,
                 "reload_rules": args.reload_rules, "log_format": args.log_format}
    try:
        settings = load_settings(**overrides)
    except SettingsInvalid as exc:
        return _fail(f"errtriage: {exc}", 2)
    for name, value in overrides.items():  # worker processes rebuild settings from the environment
        if value is not None:
            os.environ[f"ERRTRIAGE_{name.upper()}"] = str(value)
    return serve(settings)


def cmd_check(args: argparse.Namespace) -> int:
    root = Path(args.rules_dir)
    try:
        ruleset = _load(root)
    except RulesInvalid as exc:
        for error in exc.errors:
            print(f"{root}/{error}", file=sys.stderr)
        return _fail(f"{len(exc.errors)} error(s); the rules did not load")
    results, idle = check_ruleset(ruleset)
    failures = [r for r in results if not r.ok]
    for result in failures:
        print(f"{result.file}: {result.owner}: {_describe(result)}", file=sys.stderr)
    for where in idle:
        print(f"{where}: no test case exercises this rule", file=sys.stderr)
    print(f"{len(ruleset.rules)} rules, {len(ruleset.providers)} providers, {len(results)} cases: "
          f"{len(results) - len(failures)} passed, {len(failures)} failed, {len(idle)} rules unexercised")
    return 1 if failures or idle else 0


def _describe(result: CaseResult) -> str:
    if result.error:
        return result.error
    return ", ".join(f"{key}: expected {want!r}, got {got!r}" for key, (want, got) in result.mismatches.items())


def cmd_classify(args: argparse.Namespace) -> int:
    from service.models import ErrorReport
    from service.triage import triage

    try:
        ruleset = _load(Path(args.rules), fallback=True)
    except RulesInvalid as exc:
        return _fail(f"errtriage: the rules did not load: {exc}")
    except SettingsInvalid as exc:
        return _fail(f"errtriage: {exc}", 2)
    try:
        report = ErrorReport.model_validate(orjson.loads(sys.stdin.buffer.read()))
    except (orjson.JSONDecodeError, ValueError) as exc:
        return _fail(f"errtriage: not a valid report: {exc}", 2)
    classification, _, _ = triage(report, ruleset, uuid.uuid4().hex, explain=args.explain)
    print(classification.model_dump_json(indent=2))
    return 0


def cmd_schema(_: argparse.Namespace) -> int:
    from service.schema.rulefile import RuleFile

    schema = RuleFile.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "errtriage rule file"
    print(json.dumps(schema, indent=2))
    return 0


def _payloads(folder: Path) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """JSON files: a report, or {"report": ..., "expect": {...}}."""
    cases = []
    for path in sorted(folder.rglob("*.json")):
        data = orjson.loads(path.read_bytes())
        if isinstance(data, dict) and "report" in data:
            cases.append((path.relative_to(folder).as_posix(), data["report"], expected_of(data.get("expect"), {})))
        else:
            cases.append((path.relative_to(folder).as_posix(), data, {}))
    return cases


def cmd_test(args: argparse.Namespace) -> int:
    try:
        ruleset = _load(Path(args.rules))
        payloads = _payloads(Path(args.payloads))
    except (RulesInvalid, orjson.JSONDecodeError, OSError) as exc:
        return _fail(f"errtriage: {exc}")
    results = [run_case(ruleset, report, expected, name, None) for name, report, expected in payloads]
    print(f"{'payload':40} {'class':14} {'reason':24} {'provider':13} {'rule':30} result")
    for r in results:
        verdict = "ok" if r.ok else f"MISMATCH {_describe(r)}"
        print(f"{r.owner[:40]:40} {str(r.got.get('class'))[:14]:14} {str(r.got.get('reason'))[:24]:24} "
              f"{str(r.got.get('provider'))[:13]:13} {str(r.got.get('rule'))[:30]:30} {verdict}")
    failed = sum(not r.ok for r in results)
    print(f"{len(results)} payloads: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


def cmd_diff(args: argparse.Namespace) -> int:
    from service.models import ErrorReport
    from service.triage import triage

    if len(args.rules) != 2:
        return _fail("errtriage diff needs --rules OLD --rules NEW", 2)
    try:
        old, new = _load(Path(args.rules[0])), _load(Path(args.rules[1]))
        payloads = _payloads(Path(args.payloads))
    except (RulesInvalid, orjson.JSONDecodeError, OSError) as exc:
        return _fail(f"errtriage: {exc}")
    changed = 0
    for name, report, _ in payloads:
        parsed = ErrorReport.model_validate(report)
        before = _with_route(old, parsed, triage(parsed, old, "diff")[0])
        after = _with_route(new, parsed, triage(parsed, new, "diff")[0])
        delta = {k: (before[k], after[k]) for k in ("class", "reason", "provider", "route") if before[k] != after[k]}
        if delta:
            changed += 1
            print(f"{name}: " + ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in delta.items()))
    print(f"{len(payloads)} payloads, {changed} changed")
    return 0


def cmd_suggest(args: argparse.Namespace) -> int:
    """The unknowns inbox, offline: the reports of a file no rule decides, grouped, each with a drafted rule."""
    import asyncio

    from service.models import ErrorReport
    from service.triage import triage
    from service.unknowns.inbox import MemoryInbox
    from service.unknowns.recorder import group_view, sighting

    try:
        ruleset = _load(Path(args.rules), fallback=True)
        lines = Path(args.reports).read_bytes().splitlines()
    except (RulesInvalid, OSError) as exc:
        return _fail(f"errtriage: {exc}")
    except SettingsInvalid as exc:
        return _fail(f"errtriage: {exc}", 2)
    inbox = MemoryInbox(args.max_groups)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            report = ErrorReport.model_validate(orjson.loads(line))
        except (orjson.JSONDecodeError, ValueError) as exc:
            return _fail(f"errtriage: {args.reports}:{number}: not a valid report: {str(exc).splitlines()[0]}", 2)
        classification, _, _ = triage(report, ruleset, "suggest")
        if classification.decided_by != "rule":
            suggested = {"class": classification.class_, "reason": classification.reason,
                         "provider": classification.provider, "confidence": classification.confidence}
            inbox.add_one(sighting(report, classification.decided_by, suggested, 0.0))
    total, groups = asyncio.run(inbox.top(args.limit))
    views = [group_view(group, ruleset) for group in groups]
    if args.json:
        for view in views:
            view.pop("first_seen"), view.pop("last_seen")
        print(json.dumps({"total_unknown": total, "groups": views}, indent=2))
        return 0
    print(f"{len(lines)} reports, {total} not decided by a rule, {len(inbox)} groups")
    for view in views:
        suggested = view["suggested"]
        said = (f"fallback: {suggested['class']}/{suggested['reason']} ({suggested['confidence']})" if suggested
                else "unknown")
        print(f"\n## {view['count']} x {view['fingerprint']} ({said})\n{view['draft_rule']}", end="")
    return 0


def _with_route(ruleset: Ruleset, report: Any, classification: Any) -> dict[str, Any]:
    summary = summarize(classification)
    route = ruleset.notify.route_for(classification, report) if ruleset.notify is not None else None
    summary["route"] = route.id if route is not None else None
    return summary


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="errtriage", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--rules", help="rules directory (default: the shipped rules/)")
    serve.add_argument("--workers", type=int)
    serve.add_argument("--reload-rules", action=argparse.BooleanOptionalAction, default=None)
    serve.add_argument("--log-format", choices=("json", "text"))
    serve.set_defaults(func=cmd_serve)
    check = sub.add_parser("check", help="validate rule files and run their test cases")
    check.add_argument("rules_dir", nargs="?", default=str(DEFAULT_RULES_DIR))
    check.set_defaults(func=cmd_check)
    classify = sub.add_parser("classify", help="classify one report read from stdin, no server")
    classify.add_argument("--rules", default=str(DEFAULT_RULES_DIR))
    classify.add_argument("--explain", action="store_true")
    classify.set_defaults(func=cmd_classify)
    schema = sub.add_parser("schema", help="print the JSON Schema of rule files")
    schema.set_defaults(func=cmd_schema)
    test = sub.add_parser("test", help="run a folder of sample payloads through a rules directory")
    test.add_argument("payloads")
    test.add_argument("--rules", default=str(DEFAULT_RULES_DIR))
    test.set_defaults(func=cmd_test)
    diff = sub.add_parser("diff", help="show payloads whose class, provider or route differ between two rule sets")
    diff.add_argument("payloads")
    diff.add_argument("--rules", action="append", default=[])
    diff.set_defaults(func=cmd_diff)
    suggest = sub.add_parser("suggest",
                             help="group the reports of a JSONL file no rule decides and draft a rule for each")
    suggest.add_argument("reports", help="one JSON report a line")
    suggest.add_argument("--rules", default=str(DEFAULT_RULES_DIR))
    suggest.add_argument("--limit", type=int, default=50, help="groups shown, most frequent first")
    suggest.add_argument("--max-groups", type=int, default=1000, help="groups kept (space-saving top-K)")
    suggest.add_argument("--json", action="store_true", help="the same JSON as GET /v1/unknowns")
    suggest.set_defaults(func=cmd_suggest)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
