"""`manage.py serve`: the embedded default on the database at hand (architecture.md
"Runtime"): Django's web server and one Celery worker with the beat, serving every queue,
on the broker of settings (in the embedded default, files beside the SQLite file). Ctrl-C (or
SIGTERM) stops both, and everything they started, before it returns."""

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

STOP_GRACE_S = 15  # a running job gets this long to finish before it is killed
PR_SET_PDEATHSIG = 1  # prctl(2)


class Command(BaseCommand):
    help = (
        "Serve the portal with Django's web server and one Celery worker with beat (every "
        "queue), until Ctrl-C: the embedded default's runtime, on an existing database."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT") or 8000))
        parser.add_argument(
            "--receiver",
            type=int,
            default=None,
            metavar="PORT",
            help="also run the webhook receiver on this port (manage.py webhook_receiver)",
        )

    def handle(self, *args, host: str, port: int, receiver: int | None, **options):
        root = Path(settings.BASE_DIR)
        python = sys.executable
        web = [python, "manage.py", "runserver", "--noreload", f"{host}:{port}"]
        worker = [python, "-m", "celery", "-A", "portal", "worker", "--beat"]
        worker += ["--queues", ",".join(settings.WORKER_QUEUES), "--concurrency", "1"]
        worker += ["--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME, "--loglevel", "INFO"]
        worker += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
        # Each in a session of its own: a stop reaches every process it started (the
        # worker's pool and beat), whatever the terminal sends.
        names = {"worker": worker, "web server": web}
        if receiver is not None:
            names["webhook receiver"] = [
                python,
                "manage.py",
                "webhook_receiver",
                "--port",
                str(receiver),
            ]
        env = served_env(os.environ, host=host, port=port)
        children = [
            subprocess.Popen(  # noqa: S603 (our own argv)
                command, cwd=root, env=env, start_new_session=True, preexec_fn=_stop_with_parent
            )
            for command in names.values()
        ]
        stopping = []

        def stop(signum, frame):
            stopping.append(signum)

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        self.stdout.write(
            f"Serving on http://{host}:{port} with a worker and beat (Ctrl-C to stop)"
        )
        try:
            while not stopping and all(child.poll() is None for child in children):
                time.sleep(0.2)
        finally:
            status = _stop(children)
        failed = [
            name
            for name, child in zip(names, children, strict=True)
            if child.returncode not in (0, None)
        ]
        if not stopping and failed:
            self.stderr.write(f"stopped: the {' and '.join(failed)} exited ({status})")
            sys.exit(1)


def served_env(environ, *, host: str, port: int) -> dict[str, str]:
    """The environment of the served processes: links in webhooks, emails and the inbox
    (settings.PORTAL_URL) point at the address served, unless PORTAL_URL is set."""
    return {"PORTAL_URL": f"http://{host}:{port}", **environ}


def _stop_with_parent() -> None:
    """In the child, before it runs: SIGTERM it if this command dies without stopping it
    (killed with SIGKILL), so nothing outlives `serve` (Linux; elsewhere a no-op)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _stop(children: list[subprocess.Popen]) -> str:
    """Stop every child: SIGTERM (the worker's warm shutdown stops its pool and beat), then
    SIGKILL to its whole process group, for whatever is left after the grace period.
    Returns the children's exit codes."""
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for child in children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
    for child in children:
        _signal_group(child, signal.SIGKILL)  # leftovers of the group, or the child itself
        child.wait()
    return ", ".join(str(child.returncode) for child in children)


def _signal_group(child: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signum)
