"""A bounded Locust run on loopback (`make soak` only): sustained ingestion through
gunicorn, p95 latency and error rate reported, rows stored equal to events acknowledged.

gunicorn (2 workers x 4 threads) serves the test database on 127.0.0.1; Locust runs
LOAD_USERS users posting 100-event batches back to back for LOAD_SECONDS, then stops.
"""

import csv
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.db import connection

from metering.models import EventKey
from tests.conftest import SOAK
from tests.reliability.world import bearer, world_build

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

LOAD_SECONDS = int(os.environ.get("LOAD_SECONDS", "60"))
LOAD_USERS = int(os.environ.get("LOAD_USERS", "16"))
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not SOAK, reason="soak only (make soak)")
def test_sustained_ingestion_under_locust_stores_every_acknowledged_event(tmp_path):
    world = world_build()
    token = bearer(world.users["operator"], ["ingest"])
    db = connection.settings_dict
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "API_QUOTA_INGEST": "1000000/min",
        "LOG_LEVEL": "WARNING",
    }
    with open(tmp_path / "gunicorn.log", "w") as server_log:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--bind",
             f"127.0.0.1:{port}", "--workers", "2", "--threads", "4", "--timeout", "60"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=server_log,
        )  # fmt: skip
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/status/", timeout=2)
                break
            except OSError:
                time.sleep(0.1)
        ack_file = tmp_path / "acknowledged.json"
        subprocess.run(
            [sys.executable, "-m", "locust", "-f", str(HERE / "locustfile.py"), "--headless",
             "--host", f"http://127.0.0.1:{port}", "-u", str(LOAD_USERS), "-r",
             str(LOAD_USERS), "--run-time", f"{LOAD_SECONDS}s", "--stop-timeout", "10",
             "--only-summary", "--csv", str(tmp_path / "load"), "--exit-code-on-error", "0"],
            cwd=ROOT, env={**env, "LOCUST_TOKEN": token, "LOCUST_ACK_FILE": str(ack_file)},
            check=True, timeout=LOAD_SECONDS + 120,
        )  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=30)
    acknowledged = json.loads(ack_file.read_text())
    with open(tmp_path / "load_stats.csv") as stats_file:
        stats = next(r for r in csv.DictReader(stats_file) if r["Name"] == "Aggregated")
    requests, failures = acknowledged["requests"], acknowledged["failures"]
    rate = requests / LOAD_SECONDS
    report = (
        f"{requests} requests in {LOAD_SECONDS} s ({rate:.1f}/s, {rate * 100:.0f} events/s), "
        f"p50 {stats['50%']} ms, p95 {stats['95%']} ms, p99 {stats['99%']} ms, "
        f"error rate {failures / max(requests, 1):.2%}, "
        f"{acknowledged['events']} events acknowledged"
    )
    print(report)  # the soak's figures
    (ROOT / "var").mkdir(exist_ok=True)
    (ROOT / "var" / "soak-load.txt").write_text(report + "\n")
    assert requests > 0
    assert acknowledged["server_errors"] == 0, report
    stored = EventKey.objects.filter(event_id__startswith="load-").count()
    assert stored == acknowledged["events"], report
