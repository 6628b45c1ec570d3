"""The unknowns inbox: fingerprints, the bounded store (memory and Redis), drafted rules that
`errtriage check` accepts, GET /v1/unknowns on a real server and `errtriage suggest`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import redis

from service.models import ErrorReport
from service.normalize import normalize
from service.rules.engine import Ruleset
from service.unknowns.draft import draft_rule, example_of, literal_of
from service.unknowns.fingerprint import mask, shape_of
from service.unknowns.inbox import COUNTS_KEY, GROUP_PREFIX, MemoryInbox, RedisInbox, Sighting
from tests.servers import Process

TOKEN = "s3cret-admin"
SHAPE = "ledger-sync: upstream replica lag of {ms} ms exceeded the 2000 ms budget on shard s-{shard} (req {req})"


def lag(ms: int, shard: int, req: str = "req_8KXz21ab") -> dict[str, object]:
    return {"message": SHAPE.format(ms=ms, shard=shard, req=req), "status": 503, "source": "billing"}


def key_of(report: dict[str, object]) -> str:
    return shape_of(normalize(ErrorReport.model_validate(report))).key


def test_mask_hides_what_varies_and_keeps_the_words() -> None:
    text = ("Tool 'web_serch' failed for alice@corp.com at https://api.acme.io/v1/users/42?x=1: trace "
            "3f2b1c9a-1111-2222-3333-444455556666, sha a94a8fe5ccb19ba6, took 1.5 s on run-2026-11-30")
    assert mask(text) == ("Tool '<q>' failed for <email> at https://api.acme.io/<path>: trace <id>, sha <hash>, "
                          "took <n> s on <id>")


def test_one_shape_is_one_group_and_type_status_tool_source_split_it() -> None:
    assert key_of(lag(5321, 17)) == key_of(lag(9, 3, "req_Zq81mm2x")) == key_of(lag(40, 1))
    assert key_of(lag(5321, 17)) != key_of({**lag(5321, 17), "status": 500})
    assert key_of(lag(5321, 17)) != key_of({**lag(5321, 17), "source": "ledger"})
    assert key_of(lag(5321, 17)) != key_of({**lag(5321, 17), "tool": "sync"})
    assert key_of({"message": "boom 1", "type": "KeyError"}) != key_of({"message": "boom 2", "type": "ValueError"})


def test_literal_is_the_longest_distinctive_run_never_a_secret() -> None:
    assert literal_of(SHAPE.format(ms=1, shard=2, req="r")) == "ledger-sync: upstream replica lag of"
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    found = literal_of(f"authentication to the ledger backend failed with key {secret} now")
    assert found is not None and "sk-proj" not in found and "abcdefghij" not in found
    assert literal_of("Error 42: 'x'") is None  # nothing distinctive: the draft takes a pattern instead


def test_space_saving_keeps_memory_flat_and_the_frequent_group() -> None:
    inbox = MemoryInbox(capacity=50)
    frequent = Sighting("frequent", 1.0, {"message": "m"}, None)
    for i in range(5000):
        inbox.add_one(Sighting(f"distinct-{i}", float(i), {"message": f"m{i}"}, None))
        if i % 10 == 0:
            inbox.add_one(frequent)
    total, groups = asyncio.run(inbox.top(5))
    assert len(inbox) == 50
    assert total == 5500
    assert groups[0].fingerprint == "frequent" and groups[0].count >= 500


def test_redis_inbox_is_the_same_algorithm_and_bounded(redis_url: str) -> None:
    async def run() -> tuple[int, list[str], int, int]:
        from service.notify.redis_queue import connect

        inbox = RedisInbox(connect(redis_url), capacity=20)
        frequent = Sighting("frequent", 1.0, {"message": "m"}, {"class": "tool_error", "reason": "internal",
                                                                  "provider": None, "confidence": 0.6})
        batch = []
        for i in range(600):
            batch.append(Sighting(f"distinct-{i}", float(i), {"message": f"m{i}"}, None))
            if i % 6 == 0:
                batch.append(frequent)
        await inbox.add(batch)
        total, groups = await inbox.top(3)
        await inbox.close()
        with redis.Redis.from_url(redis_url) as client:
            return (total, [g.fingerprint for g in groups], client.zcard(COUNTS_KEY),
                    len(client.keys(GROUP_PREFIX + "*")))

    total, top, kept, hashes = asyncio.run(run())
    assert total == 700
    assert top[0] == "frequent"
    assert kept == 20 and hashes == 20  # evicted groups' hashes are deleted with them


def _check(rules: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service", "check", str(rules)], capture_output=True, text=True,
                          timeout=300)


def test_drafted_rule_passes_check_and_classifies_the_next_one(shipped: Ruleset, rules_copy: Path) -> None:
    report = ErrorReport.model_validate({
        **lag(5321, 17), "context": {"user_email": "alice@corp.com"},
        "message": SHAPE.format(ms=5321, shard=17, req="r1") + " api_key=abcd1234secret"})
    example = example_of(report)
    assert "alice@corp.com" not in json.dumps(example) and "abcd1234secret" not in json.dumps(example)
    draft = draft_rule(example, shipped, key_of(example), 3)
    assert "ledger-sync: upstream replica lag of" in draft and "priority: -40" in draft
    (rules_copy / "classes" / "85-drafts.yaml").write_text(draft)
    result = _check(rules_copy)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "0 failed, 0 rules unexercised" in result.stdout
    from service.notify.config import build_notify
    from service.rules.loader import load_ruleset
    from service.triage import triage

    ruleset = load_ruleset(rules_copy, build_notify)
    nxt, _, _ = triage(ErrorReport.model_validate(lag(77, 4, "req_Q0w9e8r7")), ruleset, "t")
    assert nxt.decided_by == "rule" and nxt.rule is not None and nxt.rule.startswith("draft-ledger-sync")


def test_a_message_with_no_literal_run_gets_a_pattern_that_check_accepts(shipped: Ruleset, rules_copy: Path) -> None:
    example = {"message": "E42: 'x' 0x1f", "type": "FrobError"}
    draft = draft_rule(example, shipped, key_of(example))
    assert "contains" not in draft
    (rules_copy / "classes" / "85-drafts.yaml").write_text(draft)
    result = _check(rules_copy)
    assert result.returncode == 0, result.stderr + result.stdout


def _post_all(base: str, reports: list[dict[str, object]]) -> list[dict[str, object]]:
    return [httpx.post(f"{base}/v1/errors", json=r, timeout=10).json() for r in reports]


def test_unknowns_endpoint_groups_what_no_rule_decided(spawn: Callable[..., Process]) -> None:
    server = spawn(ERRTRIAGE_ADMIN_TOKEN=TOKEN, ERRTRIAGE_NOTIFY_ENABLED="false")
    assert httpx.get(f"{server.url}/v1/unknowns").status_code == 401
    overloaded = {"message": "Error code: 529 - {'type': 'error', 'error': {'type': 'overloaded_error'}}"}
    answers = _post_all(server.url, [lag(5321, 17), lag(12, 3, "req_Ab12cd34"), overloaded, lag(7, 9)])
    assert [a["decided_by"] for a in answers] == ["none", "none", "rule", "none"]
    httpx.post(f"{server.url}/v1/classify", json=lag(1, 1), timeout=10)  # no side effects: not recorded
    inbox = httpx.get(f"{server.url}/v1/unknowns", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert inbox["total_unknown"] == 3
    [group] = inbox["groups"]
    assert group["count"] == 3 and group["fingerprint"] == key_of(lag(1, 1))
    assert group["example"]["message"] == SHAPE.format(ms=5321, shard=17, req="req_8KXz21ab")
    assert group["first_seen"] <= group["last_seen"]
    assert "- id: draft-ledger-sync" in group["draft_rule"]


def test_admin_disabled_without_a_token(spawn: Callable[..., Process]) -> None:
    server = spawn(ERRTRIAGE_NOTIFY_ENABLED="false")
    assert httpx.get(f"{server.url}/v1/unknowns").status_code == 403


def test_replicas_share_one_inbox_on_redis(spawn: Callable[..., Process], redis_url: str) -> None:
    env = {"ERRTRIAGE_ADMIN_TOKEN": TOKEN, "ERRTRIAGE_NOTIFY_ENABLED": "false", "ERRTRIAGE_REDIS_URL": redis_url}
    one, two = spawn(**env), spawn(**env)
    _post_all(one.url, [lag(1, 1), lag(2, 2)])
    _post_all(two.url, [lag(3, 3)])
    headers = {"Authorization": f"Bearer {TOKEN}"}
    httpx.get(f"{one.url}/v1/unknowns", headers=headers)  # waits for one's own writer
    inbox = httpx.get(f"{two.url}/v1/unknowns", headers=headers).json()
    assert inbox["total_unknown"] == 3
    assert [g["count"] for g in inbox["groups"]] == [3]


def test_suggest_offline(tmp_path: Path) -> None:
    reports = tmp_path / "reports.jsonl"
    lines = [lag(1, 1), lag(2, 2), {"message": "Error code: 529 - {'type': 'overloaded_error'}"}, {"message": "x 1"}]
    reports.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    out = subprocess.run([sys.executable, "-m", "service", "suggest", str(reports), "--json"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["total_unknown"] == 3
    assert [g["count"] for g in result["groups"]] == [2, 1]
    assert "draft-ledger-sync" in result["groups"][0]["draft_rule"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"message": "ok"}\nnot json\n')
    out = subprocess.run([sys.executable, "-m", "service", "suggest", str(bad)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 2 and "bad.jsonl:2" in out.stderr


def test_recorder_keeps_the_fallback_verdict_and_drops_past_its_buffer(shipped: Ruleset) -> None:
    from service.triage import triage
    from service.unknowns.recorder import Recorder

    async def run() -> tuple[dict[str, object], int]:
        recorder = Recorder(MemoryInbox(100), capacity=3)
        report = ErrorReport.model_validate(lag(1, 1))
        classification, _, _ = triage(report, shipped, "t")
        guessed = classification.model_copy(update={"decided_by": "fallback", "class_": "tool_error",
                                                    "reason": "upstream_error", "confidence": 0.7})
        for _ in range(5):  # nothing drains the buffer until the writer starts: 3 fit, 2 are dropped
            recorder.record(report, guessed)
        recorder.start()
        view = await recorder.top(10, shipped)
        await recorder.stop(1.0)
        return view, recorder.dropped

    view, dropped = asyncio.run(run())
    assert dropped == 2
    [group] = view["groups"]  # type: ignore[index]
    assert group["count"] == 3
    assert group["suggested"] == {"class": "tool_error", "reason": "upstream_error", "provider": None,
                                  "confidence": 0.7}
    assert "class: tool_error" in group["draft_rule"] and "reason: upstream_error" in group["draft_rule"]


def test_redis_down_classification_goes_on_and_the_inbox_catches_up(
        spawn: Callable[..., Process], redis_server: Callable[..., object]) -> None:
    store = redis_server()
    server = spawn(ERRTRIAGE_ADMIN_TOKEN=TOKEN, ERRTRIAGE_NOTIFY_ENABLED="false",
                   ERRTRIAGE_REDIS_URL=store.url)  # type: ignore[attr-defined]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    store.stop()  # type: ignore[attr-defined]
    answers = _post_all(server.url, [lag(1, 1), lag(2, 2)])
    assert [a["class"] for a in answers] == ["unknown", "unknown"]
    assert httpx.get(f"{server.url}/v1/unknowns", headers=headers, timeout=20).status_code == 503
    store.start()  # type: ignore[attr-defined]
    deadline = time.monotonic() + 20
    while True:
        inbox = httpx.get(f"{server.url}/v1/unknowns", headers=headers, timeout=20)
        if (inbox.status_code == 200 and inbox.json()["total_unknown"] == 2) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [g["count"] for g in inbox.json()["groups"]] == [2]
