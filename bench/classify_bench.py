"""µs per classification as the rule count grows, next to a naive loop over Python `re`.

Every message is fresh (thousands of distinct ~1 KB texts that match no rule, so every
rule must be ruled out): regex engines cache what they have seen, and a repeated
message would flatter them. Also prints cold-load time and resident memory.

    python bench/classify_bench.py [--messages 3000] [--counts 10,100,1000,10000]
"""

from __future__ import annotations

import argparse
import random
import re
import resource
import shutil
import string
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service.models import ErrorReport
from service.normalize import normalize
from service.rules.engine import classify
from service.rules.loader import load_ruleset

SHIPPED = Path(__file__).resolve().parent.parent / "rules"


def word(rng: random.Random, low: int = 4, high: int = 10) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(low, high)))


def synthetic_rules(count: int, rng: random.Random) -> tuple[str, list[str]]:
    """`count` rules, 70% literal phrases, 30% regexes; returns (yaml, the regex sources for the baseline)."""
    lines = ["rules:"]
    patterns = []
    for i in range(count):
        if rng.random() < 0.7:
            phrase = f"{word(rng)} {word(rng)} {word(rng)}"
            lines.append(f"  - {{id: syn-{i}, class: unknown, reason: unclassified, priority: -1, "
                         f"match: {{message: {{contains: ['{phrase}']}}}}, tests: [{{message: '{phrase}'}}]}}")
            patterns.append(re.escape(phrase))
        else:
            pattern = rf"\b{word(rng)}[-_ ]?(?:error|fail\w*)\s+(?:code\s+)?\d{{3,5}}\b"
            lines.append(f"  - {{id: syn-{i}, class: unknown, reason: unclassified, priority: -1, "
                         f"match: {{message: {{regex: ['{pattern}']}}}}}}")
            patterns.append(pattern)
    return ("\n".join(lines) if patterns else "rules: []") + "\n", patterns


SYNTHETIC_FILE = Path("classes") / "99-synthetic.yaml"


@contextmanager
def shipped_plus(count: int, rng: random.Random) -> Iterator[tuple[Path, list[str]]]:
    """The shipped tables copied to a temporary rules folder with `count` synthetic rules in
    one more file: that folder and the synthetic regex sources, removed on exit."""
    root = Path(tempfile.mkdtemp())
    try:
        rules = root / "rules"
        shutil.copytree(SHIPPED, rules)
        yaml_text, patterns = synthetic_rules(count, rng)
        (rules / SYNTHETIC_FILE).write_text(yaml_text)
        yield rules, patterns
    finally:
        shutil.rmtree(root)


def messages(count: int, rng: random.Random) -> list[str]:
    """Distinct ~1 KB messages made of fresh words; none matches a rule."""
    return [" ".join(word(rng, 3, 9) for _ in range(150))[:1024] for _ in range(count)]


def per_message_us(fn: Callable[[str], object], texts: list[str]) -> float:
    started = time.perf_counter()
    for text in texts:
        fn(text)
    return (time.perf_counter() - started) / len(texts) * 1e6


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__)
    args.add_argument("--messages", type=int, default=3000)
    args.add_argument("--counts", default="10,100,1000,10000")
    args.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the best round is kept")
    opts = args.parse_args()
    rng = random.Random(7)
    texts = messages(opts.messages, rng)
    loaded = []
    for count in [0, *(int(c) for c in opts.counts.split(","))]:
        with shipped_plus(count, rng) as (rules, patterns):
            started = time.perf_counter()
            ruleset = load_ruleset(rules)
            load_s = time.perf_counter() - started
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        compiled = [re.compile(p, re.IGNORECASE) for p in patterns]
        naive = per_message_us(lambda t: next((c for c in compiled if c.search(t)), None), texts[:300]) if count else 0  # noqa: B023
        loaded.append((count, load_s, rss, ruleset, naive))
    best = {count: float("inf") for count, *_ in loaded}
    for _ in range(opts.rounds):  # interleaved, so a noisy moment hurts every size alike
        for count, _, _, ruleset, _ in loaded:
            us = per_message_us(lambda t: classify(normalize(ErrorReport(message=t)), ruleset), texts)  # noqa: B023
            best[count] = min(best[count], us)
    print(f"{'extra rules':>11} {'load s':>7} {'RSS MiB':>8} {'errtriage µs':>13} "
          f"{'python re loop µs':>18} {'ratio':>7}")
    for count, load_s, rss, _, naive in loaded:
        print(f"{count:>11} {load_s:>7.2f} {rss:>8.0f} {best[count]:>13.1f} {naive:>18.1f} "
              f"{best[count] / best[0]:>6.2f}x")
    print(f"\n{opts.messages} distinct ~1 KB messages matching no rule (normalize + classify, best of {opts.rounds} "
          "interleaved rounds); 'ratio' is against the shipped tables alone (0 extra rules); RSS is the process "
          "peak after loading that size.")


if __name__ == "__main__":
    main()
