"""Requests/s and p99 of errtriage next to a bare FastAPI endpoint, same server settings, one run.

Starts each server as its own process (one uvicorn worker, the same HTTP protocol and
loop), then drives it with wrk (Debian package `wrk`) on loopback.

    python bench/http_bench.py [--seconds 10] [--connections 32,128] [--workers 1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.servers import free_port  # noqa: E402

BODY = {"message": "Error code: 429 - {'error': {'message': 'Rate limit reached for gpt-4o in organization org-x on "
                   "tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.', "
                   "'type': 'tokens', 'param': None, 'code': 'rate_limit_exceeded'}}",
        "source": "agent-runner", "context": {"user_email": "dev@example.com", "user_id": "u-1"}}

SERVERS = {
    "bare FastAPI + pydantic": ["-m", "uvicorn", "bench.bare_app:app"],
    "errtriage": ["-m", "service", "serve"],
}


def start(name: str, port: int, workers: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ERRTRIAGE_PORT": str(port), "ERRTRIAGE_LOG_LEVEL": "warning",
           "ERRTRIAGE_WORKERS": str(workers), "ERRTRIAGE_RELOAD_RULES": "false"}
    args = [sys.executable, *SERVERS[name]]
    if name.startswith("bare"):
        args += ["--port", str(port), "--log-level", "warning", "--no-access-log", "--workers", str(workers),
                 "--http", "service.api.server:HTTP_PROTOCOL"]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.post(f"http://127.0.0.1:{port}/v1/classify", json=BODY, timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{name} did not start")


def wrk(url: str, connections: int, seconds: int, script: Path) -> tuple[float, float]:
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), url],
                         capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    p99_ms = float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit]
    return rps, p99_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", default="32,128")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--paths", default="/v1/classify,/v1/errors")
    opts = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed: apt-get install wrk")
    script = Path(tempfile.mkdtemp()) / "post.lua"
    script.write_text('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                      f"wrk.body = {json.dumps(json.dumps(BODY))}\n")
    results: dict[tuple[str, str, int], tuple[float, float]] = {}
    for name in SERVERS:
        port = free_port()
        proc = start(name, port, opts.workers)
        try:
            paths = ["/v1/classify"] if name.startswith("bare") else opts.paths.split(",")
            for path in paths:
                for conns in (int(c) for c in opts.connections.split(",")):
                    wrk(f"http://127.0.0.1:{port}{path}", conns, 2, script)  # warm-up
                    results[(name, path, conns)] = wrk(f"http://127.0.0.1:{port}{path}", conns, opts.seconds, script)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"{'server':26} {'path':14} {'conns':>5} {'req/s':>9} {'p99 ms':>8} {'vs bare':>8}")
    for (name, path, conns), (rps, p99) in results.items():
        bare = results[("bare FastAPI + pydantic", "/v1/classify", conns)][0]
        print(f"{name:26} {path:14} {conns:>5} {rps:>9.0f} {p99:>8.2f} {rps / bare:>7.2f}x")
    print(f"\n{opts.workers} uvicorn worker(s) each, wrk -t1 on loopback, {opts.seconds}s per run, "
          f"{os.cpu_count()} CPUs.")


if __name__ == "__main__":
    main()
