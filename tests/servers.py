"""Local servers for tests: a free loopback port, waiting for a started server to listen,
a Prometheus endpoint to scrape, a real Prometheus scraping one, and a PostgreSQL cluster
of a test's own (with a streaming standby when asked)."""

import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


def free_port() -> int:
    """A loopback port nothing listens on (the system's pick, released again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, log: Path, seconds: float = 60) -> None:
    """Return once 127.0.0.1:`port` accepts a connection; fail with `log` if `process` exits
    or `seconds` pass first."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            alive = process.poll() is None
            assert alive and time.monotonic() < deadline, (
                f"nothing listens on port {port} ({'still starting' if alive else 'exited'}):\n"
                f"{log.read_text()}"
            )
            time.sleep(0.1)


@contextmanager
def serve_metrics() -> Iterator[ThreadingHTTPServer]:
    """A real HTTP server on 127.0.0.1 serving `server.page` at /metrics; `server.hits`
    counts the requests it answered."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            server.hits += 1
            body = server.page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.page = ""
    server.hits = 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _pg_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    if not found:
        pytest.skip("needs PostgreSQL binaries (make test installs them)")
    return found[-1]


class PrivatePostgres:
    """A cluster of the test's own, to crash and start without touching the suite's; given
    `primary`, a hot standby of it (pg_basebackup, streaming its WAL)."""

    def __init__(self, *, primary: "PrivatePostgres | None" = None, options: str = "") -> None:
        """`primary`: anything with the `port` of a cluster on 127.0.0.1 to stand by for;
        `options`: more server settings (`-c name=value …`)."""
        self.bin = _pg_bin()
        self.options = options
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="reliability-pg-"))
        self.data = self.dir / "pg"
        self.as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_pg:
            shutil.chown(self.dir, "postgres")
        if primary is None:
            self._run("initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "--no-sync")
        else:
            self._run("pg_basebackup", "-h", "127.0.0.1", "-p", primary.port, "-U", "postgres",
                      "-D", self.data, "-R", "-X", "stream", "-c", "fast", "--no-sync")  # fmt: skip
        self.start()
        if primary is None:
            self._run("createdb", "-h", "127.0.0.1", "-p", self.port, "-U", "postgres", "portal")
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/portal"

    def _run(self, tool: str, *args) -> None:
        command = [*self.as_pg, str(self.bin / tool), *map(str, args)]
        subprocess.run(command, check=True, capture_output=True, cwd="/")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 {self.options}"
        self._run("pg_ctl", "-D", self.data, "-l", self.data / "server.log", "-w", "start",
                  "-o", options)  # fmt: skip

    def crash(self) -> None:
        self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            self.crash()
        shutil.rmtree(self.dir, ignore_errors=True)


def production_env(*, database_url: str, var_dir: Path) -> dict:
    """The environment of a portal process in production settings (DEBUG off, no broker:
    jobs stay out of the request) on `database_url`, on the real clock."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DEBUG": "0",
        "SECURE_SSL_REDIRECT": "0",
        "SECRET_KEY": "reliability-" + "x" * 50,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CELERY_BROKER_URL": "",
        "VAR_DIR": str(var_dir),
    }
    env.pop("PORTAL_NOW", None)  # production settings run on the real clock
    return env


class Prometheus:
    """Debian's `prometheus` (2.42) of a test's own on a free loopback port, scraping
    `target` (host:port) at /metrics every `interval` seconds with a bearer token, its data
    in `directory`; `query` is its HTTP API. Stop it with `close`."""

    def __init__(self, *, target: str, token: str, directory: Path, interval: int = 2) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("prometheus is missing: run scripts/ensure-system-packages.sh")
        self.port = free_port()
        self.log = directory / "prometheus.log"
        config = directory / "prometheus.yml"  # JSON is YAML
        scrape = {
            "job_name": "portal",
            "scrape_interval": f"{interval}s",
            "scrape_timeout": f"{interval}s",
            "metrics_path": "/metrics",
            "authorization": {"type": "Bearer", "credentials": token},
            "static_configs": [{"targets": [target]}],
        }
        config.write_text(json.dumps({"scrape_configs": [scrape]}))
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={directory / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        wait_for_port(self.port, self.process, self.log)
        deadline = time.monotonic() + 60
        while not self._is_ready():  # it listens before its storage is open
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.2)

    def _is_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=5):
                return True
        except OSError:  # HTTPError (503 while starting) is an OSError
            return False

    def _get(self, path: str, **params) -> dict:
        url = f"http://127.0.0.1:{self.port}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                body = json.load(response)
        except urllib.error.HTTPError as error:  # a bad query: its error in the failure
            body = json.load(error)
        assert body["status"] == "success", (params, body)
        return body["data"]

    def query(self, expr: str, *, at: float | None = None) -> list[dict]:
        """An instant query's series (`metric` labels, `value` [time, "text"]), at `at`
        (Unix time) or now."""
        params = {"query": expr} if at is None else {"query": expr, "time": at}
        return self._get("/api/v1/query", **params)["result"]

    def value(self, expr: str, *, at: float | None = None) -> float:
        """The value of an instant query that answers one series."""
        [series] = self.query(expr, at=at)
        return float(series["value"][1])

    def now(self) -> float:
        """Prometheus's own time (the wall clock its samples are stamped with)."""
        return float(self._get("/api/v1/query", query="time()")["result"][1])  # a scalar

    def wait_for(self, expr: str, holds: Callable[[list[dict]], bool], *, seconds=90) -> None:
        """Return once `holds` is true of the query's series; fail after `seconds`."""
        deadline = time.monotonic() + seconds
        while not holds(result := self.query(expr)):
            assert time.monotonic() < deadline, (
                f"{expr} stayed {result}:\n{self.log.read_text()[-3000:]}"
            )
            time.sleep(0.5)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
