"""Steady under load: resident memory over a long run, and a burst of identical errors.

1. Sends a burst of identical errors for one user (default 10,000) to /v1/errors and reads
   /metrics: the route's throttle must let exactly one notification through.
2. Warms up, reads the server's RSS, drives /v1/errors with wrk for N requests (default
   200,000), each message distinct (a counter in it, so caches keyed by text fill and must
   stay bounded), and reads RSS again.

    python bench/soak_bench.py [--requests 200000] [--burst 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.servers import free_port  # noqa: E402

REPORT = {"message": "Error code: 429 - {'error': {'message': 'You exceeded your current quota, please check your "
                     "plan and billing details.', 'type': 'insufficient_quota', 'param': None, "
                     "'code': 'insufficient_quota'}}",
          "context": {"user_email": "dev@example.com", "user_id": "u-1"}}


DISTINCT = """counter = 0
request = function()
  counter = counter + 1
  return wrk.format(nil, nil, nil, (wrk.body:gsub("billing details", "billing details " .. counter)))
end
"""


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def notifications(url: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics").text):
        for sample in family.samples:
            if sample.name == "errtriage_notifications_total" and sample.labels["class"] == "ai_credits":
                totals[sample.labels["outcome"]] = totals.get(sample.labels["outcome"], 0) + sample.value
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--burst", type=int, default=10_000)
    opts = parser.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "ERRTRIAGE_PORT": str(port), "ERRTRIAGE_LOG_LEVEL": "warning",
           "ERRTRIAGE_RELOAD_RULES": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "service", "serve"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        with httpx.Client(base_url=url) as client:
            for _ in range(opts.burst):
                client.post("/v1/errors", json=REPORT)
        time.sleep(1)  # let the queue drain
        outcome = notifications(url)
        print(f"burst of {opts.burst} identical errors: sent={outcome.get('sent', 0):.0f} "
              f"throttled={outcome.get('throttled', 0):.0f} dropped={outcome.get('dropped', 0):.0f}")
        if not shutil.which("wrk"):
            sys.exit("wrk is not installed: apt-get install wrk")
        script = Path(tempfile.mkdtemp()) / "post.lua"
        script.write_text('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                          f"wrk.body = {json.dumps(json.dumps(REPORT))}\n{DISTINCT}")
        subprocess.run(["wrk", "-t1", "-c32", "-d5s", "-s", str(script), f"{url}/v1/errors"],
                       capture_output=True, check=True)  # warm-up
        before = rss_kib(proc.pid)
        sent = 0
        started = time.monotonic()
        while sent < opts.requests:
            out = subprocess.run(["wrk", "-t1", "-c32", "-d10s", "-s", str(script), f"{url}/v1/errors"],
                                 capture_output=True, text=True, check=True).stdout
            sent += int(next(line for line in out.splitlines() if "requests in" in line).split()[0])
        after = rss_kib(proc.pid)
        print(f"{sent} requests in {time.monotonic() - started:.0f}s: RSS {before / 1024:.1f} MiB -> "
              f"{after / 1024:.1f} MiB (growth {(after - before) / 1024:.1f} MiB)")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
