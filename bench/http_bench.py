"""Requests/s and p99 of errtriage next to a bare FastAPI endpoint, same server settings, one run.

Starts each server as its own process (one uvicorn worker, the same HTTP protocol and
loop), then drives them in interleaved rounds with wrk (Debian package `wrk`) on loopback,
so a noisy machine slows both alike; each line is the median of the rounds. Two bodies: the
same report every time, a distinct message per request (a counter in the text), which no
cache of errtriage's can answer, and the labelled corpus's real reports in turn (`corpus`:
thousands of shapes, as a service sees them; the first two reuse the regex engines' cached
states). Each is compared with the bare endpoint fed the same way.

    python bench/http_bench.py [--seconds 5] [--rounds 5] [--connections 32,128] [--workers 1]
                               [--kinds same,distinct,corpus] [--settle 10]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.accuracy import HELD_OUT, TUNE, load_cases  # noqa: E402
from tests.servers import free_port  # noqa: E402

BODY = {"message": "Error code: 429 - {'error': {'message': 'Rate limit reached for gpt-4o in organization org-x on "
                   "tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.', "
                   "'type': 'tokens', 'param': None, 'code': 'rate_limit_exceeded'}}",
        "source": "agent-runner", "context": {"user_email": "dev@example.com", "user_id": "u-1"}}
BARE = "bare FastAPI + pydantic"
RAW = "raw ASGI app"
CPUS = os.cpu_count() or 1
WRK_CPUS = str(CPUS - 1)  # the last core drives the load; the others serve
SERVER_CPUS = f"0-{CPUS - 2}" if CPUS > 2 else "0"
SERVERS = {
    RAW: ["-m", "uvicorn", "bench.bare_app:raw_app"],
    BARE: ["-m", "uvicorn", "bench.bare_app:app"],
    "errtriage": ["-m", "service", "serve"],
}
# wrk scripts: the same body each time, or the message with a request counter in it. Building each
# request costs wrk CPU the server then lacks (two cores), so each kind is compared with the bare
# endpoint under the same script.
SAME = 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = {body}\n'
DISTINCT = SAME + """counter = 0
request = function()
  counter = counter + 1
  return wrk.format(nil, nil, nil, (wrk.body:gsub("org%-x", "org-" .. counter)))
end
"""
CORPUS = """bodies = {{{bodies}}}
i = 0
request = function()
  i = i % #bodies + 1
  return wrk.format(nil, nil, nil, bodies[i])
end
"""
KINDS = ("same", "distinct", "corpus")


def corpus_bodies() -> list[str]:
    """Every labelled report of the corpus (both parts) as a JSON body, in file order."""
    parts = ((TUNE, "examples"), (HELD_OUT, "cases"))
    return [json.dumps(case.report) for folder, section in parts for case in load_cases(folder, section)]


def lua_long_string(text: str) -> str:
    """`text` as a Lua long-bracket string, which takes every byte as it is (no escapes)."""
    level = next(n for n in range(100) if f"]{'=' * n}]" not in text)
    return f"[{'=' * level}[{text}]{'=' * level}]"


def start(name: str, port: int, workers: int, prefix: list[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ERRTRIAGE_PORT": str(port), "ERRTRIAGE_LOG_LEVEL": "warning",
           "ERRTRIAGE_WORKERS": str(workers), "ERRTRIAGE_RELOAD_RULES": "false"}
    args = [sys.executable, *SERVERS[name]]
    if name in (BARE, RAW):
        args += ["--port", str(port), "--log-level", "warning", "--no-access-log", "--workers", str(workers),
                 "--http", "service.api.server:HTTP_PROTOCOL"]
    return subprocess.Popen([*prefix, *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_ready(port: int) -> None:
    """Until it answers, and errtriage's fallback is trained: training takes a core for seconds."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.post(f"http://127.0.0.1:{port}/v1/classify", json=BODY, timeout=1).status_code == 200:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1)
                if ready.status_code == 404 or ready.json().get("fallback") != "training":
                    return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"nothing answers on port {port}, or its fallback never finished training")


def wrk(url: str, connections: int, seconds: int, script: Path, prefix: list[str]) -> tuple[float, float]:
    command = [*prefix, "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), url]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"{url} answered errors:\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    return rps, float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit]


def _ratios(measured: list[tuple[float, float]], baseline: list[tuple[float, float]]) -> list[float]:
    """Each round's rate over the baseline's in the same round, so a slow minute cancels out."""
    return [rate / base for (rate, _), (base, _) in zip(measured, baseline, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--connections", default="32,128")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--paths", default="/v1/classify,/v1/errors")
    parser.add_argument("--kinds", default=",".join(KINDS), help="bodies: same, distinct, corpus")
    parser.add_argument("--settle", type=float, default=10, help="seconds to wait once every server answers")
    opts = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed: apt-get install wrk")
    scripts = Path(tempfile.mkdtemp())
    body = json.dumps(json.dumps(BODY))
    for kind, template in (("same", SAME), ("distinct", DISTINCT)):
        (scripts / f"{kind}.lua").write_text(template.format(body=body))
    lua_strings = ", ".join(map(lua_long_string, corpus_bodies()))
    (scripts / "corpus.lua").write_text(SAME.format(body='""') + CORPUS.format(bodies=lua_strings))
    # Servers and wrk on cores of their own when every worker can have one, so they do not trade
    # places run to run (on two cores, unpinned, the bare endpoint's rate swung 2,600-4,300).
    pin = bool(shutil.which("taskset")) and opts.workers < CPUS
    server_prefix, wrk_prefix = (["taskset", "-c", SERVER_CPUS], ["taskset", "-c", WRK_CPUS]) if pin else ([], [])
    ports = {name: free_port() for name in SERVERS}
    procs = [start(name, port, opts.workers, server_prefix) for name, port in ports.items()]
    runs = [(name, path, kind) for kind in opts.kinds.split(",")
            for name, path in [(RAW, "/v1/classify"), (BARE, "/v1/classify"),
                               *(("errtriage", path) for path in opts.paths.split(","))]]
    results: dict[tuple[str, str, str, int], list[tuple[float, float]]] = {}
    try:
        for port in ports.values():
            wait_ready(port)
        time.sleep(opts.settle)  # errtriage's regex scanner compiles in the background after start (~6 s)
        for round_ in range(opts.rounds + 1):  # round 0 warms up
            for conns in (int(c) for c in opts.connections.split(",")):
                for name, path, kind in runs:
                    url = f"http://127.0.0.1:{ports[name]}{path}"
                    seconds = 2 if round_ == 0 else opts.seconds
                    measured = wrk(url, conns, seconds, scripts / f"{kind}.lua", wrk_prefix)
                    if round_:
                        results.setdefault((name, path, kind, conns), []).append(measured)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"{'server':24} {'path':13} {'body':9} {'conns':>5} {'req/s':>7} {'p99 ms':>7} {'vs bare':>8} {'range':>12} "
          f"{'vs raw':>7}")
    for (name, path, kind, conns), measured in results.items():
        rps = statistics.median(r for r, _ in measured)
        p99 = statistics.median(p for _, p in measured)
        # Each round's ratio to the bare run next to it, so a slow minute of the machine cancels out.
        ratios = _ratios(measured, results[(BARE, "/v1/classify", kind, conns)])
        to_raw = statistics.median(_ratios(measured, results[(RAW, "/v1/classify", kind, conns)]))
        spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
        print(f"{name:24} {path:13} {kind:9} {conns:>5} {rps:>7.0f} {p99:>7.2f} {statistics.median(ratios):>7.2f}x "
              f"{spread:>12} {to_raw:>6.2f}x")
    where = f"servers on CPU {SERVER_CPUS}, wrk on CPU {WRK_CPUS}" if pin else "unpinned"
    print(f"\nMedians of {opts.rounds} interleaved rounds of {opts.seconds}s ('vs bare': the median of each round's "
          f"ratio to the bare run beside it, 'range' its lowest and highest; 'vs raw' the same against the raw "
          f"ASGI app); {opts.workers} uvicorn worker(s) "
          f"per server, wrk -t1 on loopback, {CPUS} CPUs ({where}).")


if __name__ == "__main__":
    main()
