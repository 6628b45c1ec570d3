"""/v1/errors requests/s with Redis off and on, in the same run, and the time from a report to
its delivered email both ways.

Starts a redis-server (Debian package, append-only with `appendfsync always`, as the README
advises), an SMTP sink (aiosmtpd, in this process) and two errtriage servers (one uvicorn worker
each, the shipped rules, email to the sink): one without ERRTRIAGE_REDIS_URL, one with it. wrk
(http_bench.py's machinery) drives them in interleaved rounds; the bench body routes to an email
channel, so every request runs the notifier's stages (with Redis: the outbox, the Lua throttle
verdict, the stream). First, on a quiet machine, it posts reports for distinct users one at a
time and times each from the POST to the email's arrival.

    python bench/redis_bench.py [--seconds 5] [--rounds 3] [--connections 32] [--emails 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from aiosmtpd.controller import Controller

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.http_bench import BODY, CPUS, DISTINCT, SAME, SERVER_CPUS, WRK_CPUS, wait_ready, wrk  # noqa: E402
from tests.servers import RedisServer, free_port  # noqa: E402

# A third body: a distinct user in every request, so no report is throttled and every one is
# written to the stream (and mailed): the worst case for Redis, where "same"/"distinct" are a burst.
NEW_GROUP = SAME + """counter = 0
request = function()
  counter = counter + 1
  return wrk.format(nil, nil, nil, (wrk.body:gsub("dev@example", "dev" .. counter .. "@example")))
end
"""
KINDS = ("same", "distinct", "new-group")


class Sink:
    """aiosmtpd handler: when each X-Errtriage-Id arrived."""

    def __init__(self) -> None:
        self.arrivals: dict[str, float] = {}
        self.changed = threading.Condition()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        now = time.perf_counter()
        for line in envelope.content.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
            if line.lower().startswith(b"x-errtriage-id:"):
                with self.changed:
                    self.arrivals[line.split(b":", 1)[1].strip().decode()] = now
                    self.changed.notify_all()
        return "250 OK"

    def wait_for(self, id_: str, timeout: float = 30) -> float:
        with self.changed:
            if not self.changed.wait_for(lambda: id_ in self.arrivals, timeout):
                raise RuntimeError(f"email {id_} did not arrive")
            return self.arrivals[id_]


def start(port: int, smtp_port: int, redis_url: str | None, prefix: list[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ERRTRIAGE_PORT": str(port), "ERRTRIAGE_LOG_LEVEL": "warning",
           "ERRTRIAGE_RELOAD_RULES": "false", "ERRTRIAGE_SMTP_HOST": "127.0.0.1",
           "ERRTRIAGE_SMTP_PORT": str(smtp_port), "ERRTRIAGE_SMTP_TLS": "none"}
    env.pop("ERRTRIAGE_REDIS_URL", None)
    if redis_url:
        env["ERRTRIAGE_REDIS_URL"] = redis_url
    return subprocess.Popen([*prefix, sys.executable, "-m", "service", "serve"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def latencies(port: int, sink: Sink, count: int, tag: str) -> list[float]:
    """Report to delivered email, one report at a time (distinct users: none is throttled)."""
    out = []
    for n in range(count):
        body = {**BODY, "context": {"user_email": f"{tag}-{n}-{time.time_ns()}@example.com"}}
        started = time.perf_counter()
        answer = httpx.post(f"http://127.0.0.1:{port}/v1/errors", json=body, timeout=10).json()
        assert answer["notification"]["status"] == "queued", answer
        out.append(sink.wait_for(answer["id"]) - started)
    return out


def settle(port: int, timeout: float = 600) -> None:
    """Wait until the server has sent its backlog of emails (a new-group run leaves thousands), so
    the next run does not pay for this one's deliveries."""
    names = ("errtriage_notification_queue_depth", "errtriage_notify_stream_length", "errtriage_notify_outbox_depth")
    deadline, quiet = time.monotonic() + timeout, 0
    while quiet < 2:
        if time.monotonic() > deadline:
            raise RuntimeError(f"port {port} still has notifications to send")
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        busy = any(line.startswith(names) and float(line.rsplit(" ", 1)[1]) for line in text.splitlines())
        quiet = 0 if busy else quiet + 1
        time.sleep(1.1)  # the stream gauges are refreshed every second


def counters(port: int) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    wanted = ("errtriage_notify_outbox_depth", "errtriage_redis_errors_total", "errtriage_notifications_total")
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(wanted) and not line.startswith("#"):
            name = line.split("{")[0].split(" ")[0]
            if "outcome=" in line:
                name += "{" + line.split('outcome="')[1].split('"')[0] + "}"
            totals[name] = totals.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--emails", type=int, default=20)
    opts = parser.parse_args()
    for tool in ("wrk", "redis-server"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed: apt-get install {tool}")
    scratch = Path(tempfile.mkdtemp(prefix="errtriage-redis-bench-"))
    body = json.dumps(json.dumps(BODY))
    for kind, template in (("same", SAME), ("distinct", DISTINCT), ("new-group", NEW_GROUP)):
        (scratch / f"{kind}.lua").write_text(template.format(body=body))
    pin = bool(shutil.which("taskset")) and CPUS > 1
    server_prefix, wrk_prefix = (["taskset", "-c", SERVER_CPUS], ["taskset", "-c", WRK_CPUS]) if pin else ([], [])
    store = RedisServer(scratch / "redis")
    store.start()
    if pin:  # Redis shares the servers' core: its cost counts against errtriage, as on a busy node
        subprocess.run(["taskset", "-pc", SERVER_CPUS, str(store.proc.pid)], check=True,  # type: ignore[union-attr]
                       capture_output=True)
    sink = Sink()
    smtp = Controller(sink, hostname="127.0.0.1", port=free_port())
    smtp.start()
    ports = {"off": free_port(), "on": free_port()}
    procs = [start(ports["off"], smtp.port, None, server_prefix),
             start(ports["on"], smtp.port, store.url, server_prefix)]
    results: dict[tuple[str, str], list[float]] = {}
    delays: dict[str, list[float]] = {}
    try:
        for port in ports.values():
            wait_ready(port)
        for mode, port in ports.items():  # first, on a quiet machine: no backlog of mails from the load
            delays[mode] = latencies(port, sink, opts.emails, mode)
        for round_ in range(opts.rounds + 1):  # round 0 warms up
            for kind in KINDS:
                for mode, port in ports.items():
                    rps, _ = wrk(f"http://127.0.0.1:{port}/v1/errors", opts.connections,
                                 2 if round_ == 0 else opts.seconds, scratch / f"{kind}.lua", wrk_prefix)
                    if round_:
                        results.setdefault((mode, kind), []).append(rps)
                    settle(port)
        seen = {mode: counters(port) for mode, port in ports.items()}
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        smtp.stop()
        store.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{'body':9} {'Redis off req/s':>16} {'Redis on req/s':>15} {'on/off':>7} {'range':>10}")
    for kind in KINDS:
        off, on = results[("off", kind)], results[("on", kind)]
        ratios = [b / a for a, b in zip(off, on, strict=True)]
        print(f"{kind:9} {statistics.median(off):>16.0f} {statistics.median(on):>15.0f} "
              f"{statistics.median(ratios):>6.2f}x {min(ratios):.2f}-{max(ratios):.2f}")
    print(f"\nreport -> delivered email, {opts.emails} reports one at a time (ms):")
    for mode, values in delays.items():
        ms = sorted(v * 1000 for v in values)
        print(f"  Redis {mode:3}: median {statistics.median(ms):6.1f}   p95 {ms[int(len(ms) * 0.95) - 1]:6.1f}   "
              f"max {ms[-1]:6.1f}")
    for mode, totals in seen.items():
        print(f"  counters, Redis {mode}: " + ", ".join(f"{k}={v:.0f}" for k, v in sorted(totals.items()) if v))
    where = f"servers and redis-server on CPU {SERVER_CPUS}, wrk on CPU {WRK_CPUS}" if pin else "unpinned"
    print(f"\nMedians of {opts.rounds} interleaved rounds of {opts.seconds}s, wrk -t1 -c{opts.connections} on "
          f"loopback, one uvicorn worker per server, {CPUS} CPUs ({where}); 'on/off' is the median of each "
          f"round's ratio.")


if __name__ == "__main__":
    main()
