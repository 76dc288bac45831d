"""Local servers for tests: a free loopback port, waiting for a started server to listen,
and a Prometheus endpoint to scrape."""

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


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
