"""Goal 13's parts: webhook receivers on loopback (one may never answer) and a Celery worker
on the notify queue."""

from __future__ import annotations

import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.bench import config


class Receiver:
    """Answers 204 to every POST at once, or (`hang`) holds each until closed."""

    def __init__(self, *, hang: bool = False) -> None:
        released = self.released = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if hang:
                    released.wait()
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


class Worker:
    """`celery worker` on the notify queue (prefork, one child), as production runs it."""

    def __init__(self, *, env: dict, log: Path) -> None:
        command = [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=prefork"]
        command += ["--concurrency=1", "--queues=notify", "--without-gossip", "--without-mingle"]
        with open(log, "w") as out:
            self.process = subprocess.Popen(
                [*command, "-l", "INFO"], cwd=config.ROOT, env=env, stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
