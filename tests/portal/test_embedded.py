"""The embedded default as `make demo` and `make serve` run it (architecture.md "Runtime"):
`manage.py serve` starts Django's server and one Celery worker with beat on kombu's
filesystem broker, both on one SQLite file, with nothing else installed. An event of the
last whole hour reaches the KPIs and the usage page within seconds through the worker (the
request writes no figure), a scrape target is scraped by the beat within a minute, and a
stop leaves no process behind."""

import contextlib
import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest

from portal.pipeline import STAGES
from tests.conftest import DEFAULT_NOW, clock_env
from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
VLLM_TEXT = ROOT.parent / "shared" / "samples" / "vllm_v0_metrics_aibrix_docs_excerpt.prom"

SETUP = """
from portal.models import Role, Tenant
from portal.services import token_create, user_ensure
from tests.metering.factories import make_deployment
make_deployment(pool="p1", gpus=8)
Tenant.objects.create(slug="tenant-a", name="Tenant A")
user = user_ensure(username="op", role=Role.OPERATOR, tenant=None, password="op-password-1")
_, raw = token_create(user=user, name="t", scopes=["ingest", "read", "admin"])
print(raw)
"""


def _env(var_dir: Path, now) -> dict[str, str]:
    """The embedded default's environment: nothing set but its folder and the test clock."""
    unset = {"DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "REDIS_URL"}
    env = {k: v for k, v in os.environ.items() if k not in unset}
    return {**env, "VAR_DIR": str(var_dir), **clock_env(now)}


def _manage(env, *args) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


class Portal:
    """A running `manage.py serve`, spoken to over HTTP with a bearer token."""

    def __init__(self, base: str, token: str):
        self.base, self.token = base, token

    def call(self, method: str, path: str, body=None) -> tuple[int, dict | str]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                text = response.read().decode()
                status = response.status
        except urllib.error.HTTPError as error:
            text, status = error.read().decode(), error.code
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """An embedded portal on a free port at the default test clock, shared by the module's
    tests in file order (its last test stops it with SIGINT, as Ctrl-C does; so does the
    fixture's end, whatever survives): one `migrate` of a fresh database, not one a test."""
    tmp_path = tmp_path_factory.mktemp("embedded")
    env = _env(tmp_path, DEFAULT_NOW)
    _manage(env, "migrate", "--noinput")
    token = _manage(env, "shell", "-c", SETUP).strip().splitlines()[-1]
    port = free_port()
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 (closed below)
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    portal = Portal(f"http://127.0.0.1:{port}", token)
    deadline = time.monotonic() + 60
    while True:
        try:
            if portal.call("GET", "/api/v1/pools")[0] == 200:
                break
        except OSError:
            pass
        assert serve.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "the portal did not start"
        time.sleep(0.3)
    portal.serve, portal.log_path = serve, tmp_path / "serve.log"
    try:
        yield portal
    finally:
        _stop(serve)
        log.close()


def _stop(serve: subprocess.Popen) -> None:
    """Stop `serve` as Ctrl-C does; whatever survives it (a failed test's) is killed."""
    processes = _descendants(serve.pid) | {serve.pid}
    if serve.poll() is None:
        serve.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            serve.wait(timeout=40)
    for pid in _alive(processes | _descendants(serve.pid)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    serve.poll()


def _descendants(pid: int) -> set[int]:
    """Every process below `pid` (Linux /proc), grandchildren included."""
    found, frontier = set(), [pid]
    while frontier:
        parent = frontier.pop()
        for path in Path("/proc").glob(f"{parent}/task/*/children"):
            for child in map(int, path.read_text().split()):
                if child not in found:
                    found.add(child)
                    frontier.append(child)
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except FileNotFoundError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def _poll(check, *, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result, deadline - time.monotonic()
        time.sleep(0.2)
    return None, 0


@pytest.mark.integration
def test_an_event_reaches_the_kpis_and_the_usage_page_within_seconds_through_the_worker(
    embedded, now
):
    from portal.periods import hour_floor

    hour = hour_floor(now) - timedelta(hours=1)  # the last whole hour
    event = {"id": "e1", "time": (hour + timedelta(minutes=10)).isoformat(), "tenant": "tenant-a",
             "model": "llama-70b", "input_tokens": 10, "output_tokens": 12_345}  # fmt: skip
    posted_at = time.monotonic()
    status, body = embedded.call("POST", "/api/v1/usage/events", [event])
    assert (status, body) == (200, {"accepted": 1, "duplicates": 0})

    def kpis():
        body = embedded.call("GET", "/api/v1/kpis?period=this_month")[1]
        return body if body.get("output_tokens") == 12_345 else None

    measured, _ = _poll(kpis, seconds=10)
    assert measured, f"not in /api/v1/kpis within 10 s: {embedded.log_path.read_text()[-3000:]}"
    elapsed = time.monotonic() - posted_at
    assert measured["to"] == hour_floor(now).isoformat().replace("+00:00", "Z")
    print(f"event to /api/v1/kpis in {elapsed:.1f} s")
    usage = embedded.call("GET", "/api/v1/usage?period=this_month&granularity=hour")[1]
    assert [(r["period_start"], r["output_tokens"]) for r in usage["results"]] == [
        (hour.isoformat().replace("+00:00", "Z"), 12_345)
    ]
    # The usage page, signed in, shows the same figure.
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    browser.open(embedded.base + "/login/", timeout=20).read()
    csrf = next(c.value for c in jar if c.name == "csrftoken")
    form = urllib.parse.urlencode(
        {"username": "op", "password": "op-password-1", "csrfmiddlewaretoken": csrf}
    ).encode()
    signed_in = urllib.request.Request(embedded.base + "/login/", data=form,
                                       headers={"Referer": embedded.base + "/login/"})  # fmt: skip
    browser.open(signed_in, timeout=20).read()
    page = browser.open(embedded.base + "/usage/?period=this_month", timeout=20)
    assert "12,345" in page.read().decode()

    # The worker did the work: each stage ran there, asked for by the one before.
    def ran():
        log = embedded.log_path.read_text()
        done = [re.search(rf"Task {re.escape(name)}\[[^]]+\] succeeded", log) for name in STAGES]
        return done if all(done) else None

    done, _ = _poll(ran, seconds=30)
    assert done, embedded.log_path.read_text()[-3000:]
    assert done[0].start() < done[1].start() < done[2].start()


@pytest.mark.integration
def test_the_beat_scrapes_a_new_target_within_a_minute_and_ctrl_c_leaves_no_process(
    embedded, metrics_server
):
    metrics_server.page = VLLM_TEXT.read_text()
    url = f"http://127.0.0.1:{metrics_server.server_port}/metrics"
    status, target = embedded.call(
        "POST", "/api/v1/scrape-targets", {"url": url, "kind": "vllm", "pool": "p1"}
    )
    assert status == 201, target

    def scraped():
        body = embedded.call("GET", f"/api/v1/scrape-targets/{target['id']}")[1]
        return body if body["last_status"] != "never" else None

    seen, _ = _poll(scraped, seconds=60)
    assert seen, f"not scraped within a minute: {embedded.log_path.read_text()[-3000:]}"
    assert metrics_server.hits >= 1 and seen["last_scraped_at"]

    processes = _descendants(embedded.serve.pid) | {embedded.serve.pid}
    assert len(processes) >= 4  # serve, the web server, the worker and its pool child
    embedded.serve.send_signal(signal.SIGINT)  # what Ctrl-C sends
    assert embedded.serve.wait(timeout=40) == 0
    left, _ = _poll(lambda: not _alive(processes), seconds=10)
    assert left, f"processes left: {_alive(processes)}"


def test_the_served_processes_link_to_the_address_served_unless_portal_url_is_set():
    """`make demo PORT=8001`: the links of its webhooks and emails name port 8001."""
    from portal.management.commands.serve import served_env

    served = served_env({"PATH": "/bin"}, host="127.0.0.1", port=8001)
    chosen = served_env({"PORTAL_URL": "https://portal.example.com"}, host="127.0.0.1", port=8001)

    assert served == {"PATH": "/bin", "PORTAL_URL": "http://127.0.0.1:8001"}
    assert chosen["PORTAL_URL"] == "https://portal.example.com"


def test_two_instances_with_two_databases_and_one_var_dir_keep_their_queues_apart(tmp_path, now):
    """The embedded broker's folder follows the SQLite file, whatever VAR_DIR says: each
    instance's message lands beside its own database and nowhere else."""
    send = (
        "import django; django.setup()\n"
        "from django.conf import settings\n"
        "from portal.celery import app\n"
        "app.send_task('portal.ping')\n"
        "print(settings.BROKER_DIR)\n"
    )
    shared_var = tmp_path / "var"
    folders = {}
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        env = {
            **_env(shared_var, now),
            "DATABASE_URL": f"sqlite:///{tmp_path / name / 'portal.sqlite3'}",
            "DJANGO_SETTINGS_MODULE": "portal.settings",
        }
        done = subprocess.run(
            [sys.executable, "-c", send], cwd=ROOT, env=env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        folders[name] = Path(done.stdout.strip().splitlines()[-1])

    assert folders == {
        "a": tmp_path / "a" / "portal.sqlite3-broker",
        "b": tmp_path / "b" / "portal.sqlite3-broker",
    }
    for folder in folders.values():
        [message] = (folder / "queue").iterdir()
        assert message.name.endswith(".notify.msg")  # portal.* tasks go to `notify`
    assert not (shared_var / "broker").exists()
