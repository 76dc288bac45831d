"""Goal 9 (kpis.md section 0): an accepted event is visible in `GET /api/v1/usage`,
`GET /api/v1/kpis` and the budget read within 60 s (p95), events timed in the current hour,
in the embedded default and in production settings, under the demo's load.

Each mode serves its own copy of the demo (`manage.py demo` at the machine's clock: two
closed months and this month up to the current hour), with its pipeline running as it runs
there: `manage.py serve` (Django's server, one Celery worker with the beat, SQLite, the
filesystem broker), or gunicorn with a Celery worker and the beat on PostgreSQL and Redis. A
gateway posts a batch every FEED_EVERY seconds for Initech (a token budget set for it), each
batch two requests timed one second and three minutes before it is sent; three readers poll
this month's usage of Initech, the factory's KPIs and Initech's budget every READ_EVERY
seconds. A batch is visible in a read at the first answer, after the batch was accepted, that
holds it and every batch accepted before it (output tokens; input and output tokens for the
budget); its wait is the longest of the three reads'.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.bench import config, web

FEED_EVERY = 1.0  # seconds between the gateway's batches
READ_EVERY = 0.5  # seconds between a reader's reads
CATCH_UP = 300.0  # seconds the readers wait after the feed for the last batches
TENANT, MODEL = "initech", "llama-3.3-70b"
READS = {
    "usage": f"/api/v1/usage?period=this_month&tenant={TENANT}&page_size=1000",
    "kpis": "/api/v1/kpis?period=this_month",
    "budget": f"/api/v1/tenants/{TENANT}/budget",
}


def _manage(env: dict, *args: str, log: Path) -> str:
    """Run a management command to its end; its output."""
    with open(log, "a") as out:
        out.write(f"$ manage.py {' '.join(args)}\n")
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=config.ROOT, env=env, capture_output=True,
        text=True,
    )  # fmt: skip
    with open(log, "a") as out:
        out.write(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {args[0]} failed: see {log}")
    return done.stdout


def demo_serve(*, mode: str, env: dict, tmp: Path) -> tuple[object, list[subprocess.Popen], str]:
    """The demo loaded and served in `mode`; (the server, its other processes, a token of the
    demo's operator with the ingest, read, notify and admin scopes)."""
    log = tmp / f"fresh-{mode}.log"
    _manage(env, "migrate", "--noinput", log=log)
    _manage(env, "demo", log=log)
    token = _manage(
        env, "create_token", "--user", "operator", "--role", "operator",
        "--scopes", "admin,ingest,read,notify", log=log,
    ).strip().splitlines()[-1]  # fmt: skip
    if mode == "embedded":
        return web.Embedded(env=env, log=tmp / "serve-fresh.log"), [], token
    _manage(env, "collectstatic", "--noinput", log=log)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "-B", "--concurrency=2",
         "-Q", "ingest,billing,measure,notify", "-l", "INFO"],
        cwd=config.ROOT, env=env, stdout=open(tmp / "worker-fresh.log", "w"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    return web.Server(env=env, log=tmp / "gunicorn-fresh.log"), [worker], token


class _Client:
    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body=None) -> dict:
        payload = json.dumps(body).encode() if body is not None else None
        self.conn.request(method, path, payload, self.headers)
        response = self.conn.getresponse()
        data = response.read()
        if response.status not in (200, 201):
            raise RuntimeError(f"{method} {path}: {response.status} {data[:300]!r}")
        return json.loads(data)

    def close(self) -> None:
        self.conn.close()


def _figure(name: str, answer: dict) -> int:
    if name == "usage":
        return sum(row["output_tokens"] for row in answer["results"])
    if name == "kpis":
        return answer["output_tokens"] or 0
    return answer["spent"] or 0


def visible(
    accepted: list[float], totals: list[int], readings: list[tuple[float, int]], *, baseline: int
) -> list[float | None]:
    """Each batch's wait: from its acceptance (`accepted`, in order) to the first reading
    (time, value) taken after it that holds it and every batch before it (`totals`: the
    running total up to each batch, above the reads' `baseline`); None if none does."""
    waits: list[float | None] = []
    for at, total in zip(accepted, totals, strict=True):
        times = [t for t, value in readings if t >= at and value >= baseline + total]
        waits.append(min(times) - at if times else None)
    return waits


@dataclass
class Feed:
    """What the gateway sent: per batch, when it was accepted and the running totals."""

    accepted: list[float] = field(default_factory=list)
    output: list[int] = field(default_factory=list)  # output tokens up to the batch
    tokens: list[int] = field(default_factory=list)  # input and output tokens up to it


def measure(*, port: int, token: str, seconds: float) -> dict:
    """Feed and read for `seconds`, then until every batch is read or CATCH_UP passes; each
    batch's wait (None: never seen)."""
    client = _Client(port, token)
    client.call("POST", "/api/v1/alert-rules",
                {"kind": "budget", "tenant": TENANT, "params": {"tokens": 10**15}})  # fmt: skip
    baseline = {name: _figure(name, client.call("GET", path)) for name, path in READS.items()}
    client.close()
    readings: dict[str, list[tuple[float, int]]] = {name: [] for name in READS}
    feed, stop, fed = Feed(), threading.Event(), threading.Event()

    def read(name: str) -> None:
        reader = _Client(port, token)
        target = feed.tokens if name == "budget" else feed.output
        try:
            while not stop.is_set():
                value = _figure(name, reader.call("GET", READS[name]))
                readings[name].append((time.perf_counter(), value))
                if fed.is_set() and target and value >= baseline[name] + target[-1]:
                    return
                time.sleep(READ_EVERY)
        finally:
            reader.close()

    def send() -> None:
        gateway = _Client(port, token)
        deadline, n = time.perf_counter() + seconds, 0
        while time.perf_counter() < deadline:
            now = datetime.fromtimestamp(time.time(), tz=UTC)  # noqa: TID251 (a gateway's clock)
            events = [
                {"id": f"fresh-{n}-{i}", "time": (now - ago).isoformat(), "tenant": TENANT,
                 "model": MODEL, "input_tokens": 200 + i, "output_tokens": 50 + n % 7}
                for i, ago in enumerate((timedelta(seconds=1), timedelta(minutes=3)))
            ]  # fmt: skip
            gateway.call("POST", "/api/v1/usage/events", events)
            feed.accepted.append(time.perf_counter())
            output = sum(e["output_tokens"] for e in events)
            tokens = output + sum(e["input_tokens"] for e in events)
            feed.output.append((feed.output[-1] if feed.output else 0) + output)
            feed.tokens.append((feed.tokens[-1] if feed.tokens else 0) + tokens)
            n += 1
            time.sleep(FEED_EVERY)
        gateway.close()
        fed.set()

    readers = [threading.Thread(target=read, args=(name,)) for name in READS]
    for thread in readers:
        thread.start()
    send()
    deadline = time.perf_counter() + CATCH_UP
    for thread in readers:
        thread.join(timeout=max(0.0, deadline - time.perf_counter()))
    stop.set()
    for thread in readers:
        thread.join()
    seen = [
        visible(feed.accepted, feed.tokens if name == "budget" else feed.output,
                readings[name], baseline=baseline[name])
        for name in READS
    ]  # fmt: skip
    waits = [None if None in each else max(each) for each in zip(*seen, strict=True)]
    return {"batches": len(feed.accepted), "waits": waits, "reads": {
        name: len(values) for name, values in readings.items()}}  # fmt: skip
