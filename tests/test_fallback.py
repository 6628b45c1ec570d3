"""The learned fallback: what no rule matches, decided by a model trained at rule-load time.

tests/data/fallback has one rule (tool_calling, with four tests) and examples of three
vocabularies the rule does not know (a plan's seat allowance, a user's stop press, and
ordinary programming errors that must stay unknown).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from service.errors import RulesInvalid
from service.models import ErrorReport
from service.normalize import normalize
from service.rules.engine import Ruleset
from service.rules.fallback import Fallback, fit_sklearn, fitted_from, text_of, tokens_of
from service.rules.loader import load_ruleset
from service.rules.training import training_set
from service.triage import triage
from tests.servers import Process

DATA = Path(__file__).resolve().parent / "data" / "fallback"
SEATS = {"message": "sorry, this workspace used up the seat allowance of its tier"}


@pytest.fixture(scope="module")
def trained() -> Ruleset:
    return load_ruleset(DATA, fallback_min_confidence=0.5)


def _classify(ruleset: Ruleset, report: dict[str, object], explain: bool = False) -> dict[str, object]:
    classification, _, _ = triage(ErrorReport.model_validate(report), ruleset, "t", explain=explain)
    return classification.model_dump(by_alias=True)


def test_the_fallback_decides_what_no_rule_matches(trained: Ruleset) -> None:
    got = _classify(trained, SEATS)
    assert (got["class"], got["reason"], got["rule"], got["decided_by"]) == (
        "account_level", "plan_limit", None, "fallback")
    assert 0.5 <= got["confidence"] < 1.0
    stopped = _classify(trained, {"message": "generation stopped: the user pressed stop"})
    assert (stopped["class"], stopped["decided_by"]) == ("aborted", "fallback")
    assert stopped["retryable"] is False and stopped["recovery"]["action"] == "none"  # the class's own defaults


@pytest.mark.parametrize("report", [SEATS, {"message": "KeyError: 'x'", "status": 500, "tool": "t"},
                                    {"message": "", "type": "ZorblError"}, {"message": "the user pressed stop"},
                                    {"message": "Rate  limit\trate LIMIT reached\n for org-1 org-1 (İstanbul)"}])
def test_predict_reads_the_fitted_model_exactly_as_sklearn_does(report: dict[str, object]) -> None:
    """Also the second time, when each word's n-gram columns come from the memo."""
    examples = training_set(load_ruleset(DATA))
    fitted = fit_sklearn(examples)
    fallback = Fallback(fitted_from(fitted, examples), 0.5)
    error = normalize(ErrorReport.model_validate(report))
    fast, again = fallback.probabilities(error, None), fallback.probabilities(error, None)
    reference = fitted.model.predict_proba(fitted.rows([text_of(error)], [tokens_of(error, None)]))[0]
    assert abs(fast - reference).max() < 1e-5 and abs(fast.sum() - 1) < 1e-6
    assert (again == fast).all()


def test_ordinary_errors_stay_unknown(trained: Ruleset) -> None:
    got = _classify(trained, {"message": "KeyError: 'settings' in app.py line 40"})
    assert (got["class"], got["decided_by"], got["confidence"], got["rule"]) == ("unknown", "none", 0.0, None)


def test_below_the_minimum_confidence_the_answer_is_unknown() -> None:
    strict = load_ruleset(DATA, fallback_min_confidence=1.0)
    got = _classify(strict, SEATS, explain=True)
    assert (got["class"], got["decided_by"], got["confidence"]) == ("unknown", "none", 0.0)
    assert got["explain"]["fallback"]["used"] is False and got["explain"]["fallback"]["min_confidence"] == 1.0


def test_explain_shows_what_the_fallback_leaned_on(trained: Ruleset) -> None:
    fallback = _classify(trained, SEATS, explain=True)["explain"]["fallback"]
    assert fallback["used"] is True and fallback["class"] == "account_level"
    features = [f["feature"].strip("'") for f in fallback["strongest_features"]]
    assert features and all(f.strip() in SEATS["message"] or "_" in f for f in features)
    nearest = fallback["nearest_examples"][0]
    assert nearest["from"].startswith("examples/00-examples.yaml#") and nearest["label"] == "account_level/plan_limit"
    assert "seat allowance" in nearest["message"]


def test_a_rule_match_never_consults_the_fallback(trained: Ruleset) -> None:
    got = _classify(trained, {"message": "the zorbl tool teapot is not registered"}, explain=True)
    assert (got["decided_by"], got["confidence"], got["rule"]) == ("rule", 1.0, "hallucinated-tool")
    assert got["explain"]["fallback"] is None


def test_rule_test_cases_teach_the_fallback(trained: Ruleset) -> None:
    """No example is labelled tool_calling: only the rule's four tests say what it looks like."""
    got = _classify(trained, {"message": "blargh is not registered with this agent's toolbox"})
    assert (got["class"], got["reason"], got["decided_by"]) == ("tool_calling", "unknown_tool", "fallback")


def test_without_a_threshold_there_is_no_fallback() -> None:
    rules_only = load_ruleset(DATA)
    assert rules_only.fallback is None and len(rules_only.labelled) == 36
    assert _classify(rules_only, SEATS)["decided_by"] == "none"


def test_an_example_with_an_undeclared_label_is_refused_with_file_and_line(tmp_path: Path) -> None:
    root = tmp_path / "rules"
    shutil.copytree(DATA, root)
    (root / "examples" / "10-bad.yaml").write_text(
        "examples:\n  - source: here\n    report: {message: x}\n"
        "    expect: {class: account_level, reason: plan_limit}\n"
        "  - source: there\n    report: {message: y}\n    expect: {class: ai_credits, reason: quota_exceeded}\n")
    with pytest.raises(RulesInvalid) as caught:
        load_ruleset(root)
    (error,) = caught.value.errors
    assert (error.file, error.line) == ("examples/10-bad.yaml", 5)
    assert "ai_credits/quota_exceeded" in error.message


def _wait_for_fallback(url: str, version: str | None = None) -> dict[str, object]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        body = httpx.get(f"{url}/v1/rules").json()
        if body["fallback"]["state"] == "ready" and body["version"] != version:
            return body
        time.sleep(0.1)
    raise AssertionError(f"the fallback did not train: {body['fallback']}")


def test_a_fallback_verdict_notifies_only_where_a_route_allows_it(spawn: Callable[..., Process],
                                                                   tmp_path: Path) -> None:
    root = tmp_path / "rules"
    shutil.copytree(DATA, root)
    proc = spawn("--rules", str(root), "--no-reload-rules", ERRTRIAGE_ADMIN_TOKEN="t0ken")
    first = _wait_for_fallback(proc.url)
    answer = httpx.post(f"{proc.url}/v1/errors", json=SEATS).json()
    assert (answer["decided_by"], answer["class"]) == ("fallback", "account_level")
    assert answer["notification"]["status"] == "none"
    routes = root / "routes" / "00-routes.yaml"
    routes.write_text(routes.read_text() + "    allow_fallback: true\n")
    reload = httpx.post(f"{proc.url}/v1/rules/reload", headers={"Authorization": "Bearer t0ken"})
    assert reload.status_code == 200, reload.text
    _wait_for_fallback(proc.url, str(first["version"]))
    answer = httpx.post(f"{proc.url}/v1/errors", json=SEATS).json()
    assert answer["decided_by"] == "fallback"
    assert answer["notification"] == {"status": "queued", "route": "plan", "channels": ["audit"]}


def test_a_child_process_fits_the_same_model_as_this_one(trained: Ruleset) -> None:
    from service.rules.training_process import Trainer

    ruleset = load_ruleset(DATA)
    fallback = Trainer().train(ruleset.version, DATA, 0.5)
    assert fallback is not None and fallback.labels == trained.fallback.labels  # type: ignore[union-attr]
    error = normalize(ErrorReport.model_validate(SEATS))
    assert abs(fallback.probabilities(error, None) - trained.fallback.probabilities(error, None)).max() < 1e-9  # type: ignore[union-attr]


def test_a_child_refuses_to_fit_rules_that_changed_since_the_load(tmp_path: Path) -> None:
    from service.rules.training_process import StaleRules, Trainer

    root = tmp_path / "rules"
    shutil.copytree(DATA, root)
    ruleset = load_ruleset(root)
    examples = root / "examples" / "00-examples.yaml"
    examples.write_text(examples.read_text() + "\n# edited\n")
    with pytest.raises(StaleRules, match="changed"):
        Trainer().train(ruleset.version, root, 0.5)


def test_stop_ends_a_training_under_way() -> None:
    import threading

    from service.rules.training_process import Trainer, TrainingFailed

    trainer = Trainer()
    raised: list[BaseException] = []

    def run() -> None:
        try:
            trainer.train(load_ruleset(DATA).version, DATA, 0.5)
        except TrainingFailed as exc:
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 30
    while trainer._child is None and time.monotonic() < deadline:  # the child is spawned
        time.sleep(0.01)
    trainer.stop()
    thread.join(30)
    assert len(raised) == 1 and "without an answer" in str(raised[0])


def test_the_training_child_ends_when_its_server_dies(tmp_path: Path) -> None:
    """A server killed without a shutdown must not leave its training child running."""
    import os
    import signal
    import subprocess
    import sys

    script = (f"import sys, time; sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})\n"
              "from service.rules.loader import load_ruleset\n"
              "from service.rules.training_process import Trainer\n"
              "import threading\n"
              f"root = __import__('pathlib').Path({str(DATA)!r})\n"
              "trainer = Trainer()\n"
              "args = (load_ruleset(root).version, root, 0.5)\n"
              "threading.Thread(target=trainer.train, args=args, daemon=True).start()\n"
              "while trainer._child is None: time.sleep(0.01)\n"
              "print(trainer._child.pid, flush=True)\n"
              "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(child, signal.SIGKILL)
    raise AssertionError("the training child outlived its server by 10 s")
