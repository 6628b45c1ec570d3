"""The fallback is fitted in a child process, so the serving process never waits on scikit-learn.

Fitting takes seconds of CPU, and scikit-learn's sparse and array steps hold the GIL in
long calls: on a thread of the serving process they stalled its event loop for hundreds of
milliseconds. The child (a new `python -m` process: a fork of a threaded server is unsafe, and
multiprocessing's spawn would run the parent's unguarded __main__ again) reads the same rules
directory, checks that it holds the version being served, builds the training set and fits,
at a lower scheduling priority; it sends back a `Fitted` (plain arrays and lists, ~4 ms to
unpickle) and exits. The serving process then builds the `Fallback` from it in Python loops,
which yield the GIL every few milliseconds. A newer load, or shutdown, terminates a child
whose answer nobody will use.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.errors import RulesInvalid
from service.rules.loader import load_ruleset
from service.rules.training import training_set

if TYPE_CHECKING:  # the model's module loads numpy: imported where a fallback is fitted or built, not at start
    from service.rules.fallback import Fallback, Fitted

_NICE = 10  # the child yields the CPU to the serving process on a busy machine
_PARENT_POLL_SECONDS = 0.5


class StaleRules(Exception):
    """The rules directory no longer holds the version being served: a newer load trains its own."""


class TrainingFailed(Exception):
    """The child raised, or died (killed, out of memory, terminated by `stop`)."""


class Trainer:
    """Fits in one child process at a time; `stop` terminates the one under way."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None

    def train(self, version: str, root: Path, min_confidence: float) -> Fallback | None:
        """The fallback for the rules `version` loaded from `root`; None when there is too little
        to learn from. Raises StaleRules or TrainingFailed. Blocks the calling thread, not the GIL."""
        from service.rules.fallback import Fallback  # loads numpy and sklearn's analyzers while the child fits

        reader, writer = os.pipe()
        try:
            with self._lock:  # a plain `python -m` child: nothing of the parent's __main__ runs in it
                self._child = child = subprocess.Popen(
                    [sys.executable, "-m", __name__, str(root), version, str(os.getpid()), str(writer)],
                    stdin=subprocess.DEVNULL, pass_fds=(writer,))
        finally:
            os.close(writer)  # the child holds the only writer: its exit ends the read
        with os.fdopen(reader, "rb") as answer:
            data = answer.read()
        child.wait()
        if not data:
            raise TrainingFailed(f"the training process ended without an answer (exit code {child.returncode})")
        kind, value = pickle.loads(data)  # a Fitted: plain lists and arrays, ~4 ms
        if kind == "stale":
            raise StaleRules(value)
        if kind == "error":
            raise TrainingFailed(value)
        return Fallback(value, min_confidence) if value is not None else None

    def stop(self) -> None:
        with self._lock:
            if self._child is not None and self._child.poll() is None:
                self._child.terminate()


def _answer(root: str, version: str) -> tuple[str, Any]:
    """In the child: ("fitted", Fitted | None), ("stale", why) or ("error", what)."""
    try:
        return "fitted", _fit(root, version)
    except StaleRules as exc:
        return "stale", str(exc)
    except Exception as exc:  # noqa: BLE001 - relayed to the parent, which logs it; the rules alone keep serving
        return "error", f"{type(exc).__name__}: {exc}"


def _fit(root: str, version: str) -> Fitted | None:
    """The same rules, their training set, fitted."""
    from service.rules.fallback import enough_to_learn, fit

    try:
        ruleset = load_ruleset(Path(root))
    except RulesInvalid as exc:
        raise StaleRules(f"the rules under {root} changed and no longer load") from exc
    if ruleset.version != version:
        raise StaleRules(f"the rules under {root} changed ({version} -> {ruleset.version})")
    examples = training_set(ruleset)
    return fit(examples) if enough_to_learn(examples) else None


def _exit_with(parent: int) -> None:
    """A child whose server died (killed, no shutdown to stop it) stops too, instead of
    spending seconds of CPU on an answer nobody will read."""
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL_SECONDS)
    os._exit(1)


if __name__ == "__main__":  # the child: python -m service.rules.training_process ROOT VERSION PARENT FD
    os.nice(_NICE)
    threading.Thread(target=_exit_with, args=(int(sys.argv[3]),), daemon=True).start()
    with os.fdopen(int(sys.argv[4]), "wb") as out:
        out.write(pickle.dumps(_answer(sys.argv[1], sys.argv[2]), protocol=pickle.HIGHEST_PROTOCOL))
