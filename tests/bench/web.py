"""gunicorn on loopback and a keep-alive HTTP client (http.client, one connection a thread)."""

from __future__ import annotations

import http.client
import json
import os
import runpy
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from tests.bench import config, cpu

GUNICORN = config.ROOT / ".venv" / "bin" / "gunicorn"
# The threads a worker of the deployment (gunicorn.conf.py of this tree).
CONF_THREADS = int(runpy.run_path(str(config.ROOT / "gunicorn.conf.py"))["threads"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`gunicorn portal.wsgi` (or another `app`) of `root` with 2 workers (gthread:
    keep-alive) on a free loopback port; their threads this tree's gunicorn.conf.py's
    unless `threads` or BENCH_WEB_THREADS says (another revision's tree too: an A/B of two
    trees compares their code with the same threads)."""

    def __init__(
        self,
        *,
        env: dict,
        log: Path,
        workers: int = 2,
        threads: int | None = None,
        root: Path = config.ROOT,
        app: str = "portal.wsgi",
    ) -> None:
        threads = threads or int(os.environ.get("BENCH_WEB_THREADS", "0")) or CONF_THREADS
        self.port = free_port()
        self.log = log
        self.process = subprocess.Popen(
            [
                str(GUNICORN),
                app,
                "--workers",
                str(workers),
                "--worker-class",
                "gthread",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--keep-alive",
                "3600",
                "--timeout",
                "600",
                "--error-logfile",
                str(log),
                "--threads",
                str(threads),
            ],
            cwd=root,  # the tree it serves (another revision's for an A/B)
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited: see {log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        else:
            raise RuntimeError("gunicorn did not listen within 60 s")

    def worker_pids(self) -> list[int]:
        return cpu.children(self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, KiB, from /proc/<pid>/status."""
    figures = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            figures[key] = int(value.split()[0])
    return figures


def server_env(*, database_url: str, var_dir: Path) -> dict:
    """Production settings (DEBUG off, Celery on its broker so rollups leave the request)."""
    env = dict(os.environ)
    env.update(
        DEBUG="0",
        SECRET_KEY="bench-secret-key-not-for-production-0123456789abcdef",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SECURE_SSL_REDIRECT="0",
        DATABASE_URL=database_url,
        VAR_DIR=str(var_dir),
        CELERY_BROKER_URL=os.environ.get("TEST_BROKER_URL", "redis://127.0.0.1:6379/0"),
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def embedded_env(*, var_dir: Path) -> dict:
    """The embedded default (`make serve`): no database, broker or cache configured, so
    SQLite and the filesystem broker in `var_dir`; DEBUG on, as `make demo` runs it."""
    unset = {"DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "REDIS_URL", "DEBUG"}
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(VAR_DIR=str(var_dir), PYTHONDONTWRITEBYTECODE="1")
    return env


class Embedded:
    """`manage.py serve` (runserver, and a Celery worker with beat) on a free port."""

    def __init__(self, *, env: dict, log: Path) -> None:
        self.port = free_port()
        self.log = open(log, "w")  # noqa: SIM115 (closed by stop)
        self.process = subprocess.Popen(
            [str(config.ROOT / ".venv" / "bin" / "python"), "manage.py", "serve",
             "--port", str(self.port)],
            cwd=config.ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"manage.py serve did not start: see {log}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        """Ctrl-C: the web server and the worker stop with it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=60)
        self.log.close()


OTLP_TRACES = "/api/v1/otlp/v1/traces"


def post_batches(
    *,
    port: int,
    token: str,
    bodies: list[bytes],
    threads: int,
    expect: str,
    path: str = "/api/v1/usage/events",
) -> dict:
    """POST every body to `path` (native JSON events, or OTLP protobuf trace exports) from
    `threads` keep-alive connections. `expect` is "accepted" or "duplicates": every event of
    every body must be counted there (an OTLP answer must reject no span). Returns wall
    seconds, request latencies and the counts (none for OTLP, whose answer has no counts)."""
    pending = list(reversed(bodies))
    lock = threading.Lock()
    latencies: list[float] = []
    totals = {"accepted": 0, "duplicates": 0}
    failures: list[str] = []
    otlp = path == OTLP_TRACES
    content_type = "application/x-protobuf" if otlp else "application/json"
    headers = {"Content-Type": content_type, "Authorization": f"Bearer {token}"}

    def work() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        while True:
            with lock:
                if not pending or failures:
                    break
                body = pending.pop()
            started = time.perf_counter()
            conn.request("POST", path, body, headers)
            response = conn.getresponse()
            payload = response.read()
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)
                if response.status != 200:
                    failures.append(f"{response.status}: {payload[:300]!r}")
                    break
                if otlp:
                    if payload:  # an ExportTraceServiceResponse with a partial success
                        failures.append(f"partial success: {payload[:300]!r}")
                        break
                    continue
                answer = json.loads(payload)
                totals["accepted"] += answer["accepted"]
                totals["duplicates"] += answer["duplicates"]
        conn.close()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    seconds = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"ingestion failed: {failures[0]}")
    other = "duplicates" if expect == "accepted" else "accepted"
    if not otlp and totals[other]:
        raise RuntimeError(f"expected only {expect}, got {totals}")
    return {"seconds": seconds, "latencies": latencies, **totals}


class Getter:
    """Sequential GETs over one keep-alive connection (latency, not throughput)."""

    def __init__(self, port: int, headers: dict) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        self.headers = headers
        self.body = b""  # the last response's
        self.status = 0  # and its status

    def get(self, path: str, *, expect: tuple[int, ...] = (200,)) -> float:
        for attempt in range(2):
            started = time.perf_counter()
            try:
                self.conn.request("GET", path, headers=self.headers)
                response = self.conn.getresponse()
                body = response.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.conn.close()  # the server closed an idle keep-alive connection: retry
                if attempt:
                    raise
        elapsed = time.perf_counter() - started
        self.body, self.status = body, response.status
        if response.status not in expect:
            raise RuntimeError(f"GET {path}: {response.status} {body[:300]!r}")
        return elapsed
