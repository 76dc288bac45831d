"""A streaming replica for reads (portal.replica), end to end: a private PostgreSQL cluster,
a hot standby made from it with pg_basebackup, and gunicorn (2 workers sharing Redis) with
DATABASE_URL and DATABASE_REPLICA_URL. With the standby's replay paused (a lagging replica),
a client that just wrote reads the primary and sees its write, another client reads the
replica and does not yet; once the standby has replayed it, the writer reads the replica
again."""

import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from tests.servers import PrivatePostgres, free_port, production_env, wait_for_port

ROOT = Path(__file__).resolve().parents[2]

SETUP = """
import json
import django
django.setup()
from portal.models import Role
from portal.services import user_ensure
from tests.reliability.world import bearer
operator = user_ensure(username="operator", role=Role.OPERATOR, tenant=None)
finance = user_ensure(username="finance", role=Role.FINANCE, tenant=None)
print(json.dumps({"writer": bearer(operator, ["read", "admin"]),
                  "other_writer": bearer(operator, ["read", "admin"]),
                  "reader": bearer(finance, ["read"])}))
"""


@pytest.fixture
def replicated(tmp_path):
    if not os.environ.get("REDIS_URL"):
        pytest.skip("needs Redis (make test starts one): the workers share the writes' marks")
    primary = PrivatePostgres()
    standby = None
    processes = []
    env = production_env(database_url=primary.url, var_dir=tmp_path)
    try:
        python = sys.executable
        subprocess.run([python, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env,
                       check=True)  # fmt: skip
        setup = subprocess.run([python, "-c", SETUP], cwd=ROOT, env=env, check=True,
                               capture_output=True, text=True)  # fmt: skip
        tokens = json.loads(setup.stdout.strip().splitlines()[-1])
        standby = PrivatePostgres(primary=primary)
        port, log = free_port(), tmp_path / "gunicorn.log"
        processes.append(
            subprocess.Popen(
                [str(Path(python).with_name("gunicorn")), "portal.wsgi", "--workers", "2",
                 "--bind", f"127.0.0.1:{port}", "--error-logfile", str(log)],
                cwd=ROOT, env={**env, "DATABASE_REPLICA_URL": standby.url},
                stdout=log.open("a"), stderr=subprocess.STDOUT,
            )
        )  # fmt: skip
        wait_for_port(port, processes[-1], log)
        yield primary, standby, port, tokens
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=20)
        if standby is not None:
            standby.close()
        primary.close()


def _call(port: int, method: str, path: str, token: str, body: dict | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        connection.request(method, path, body=json.dumps(body) if body else None, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def _slugs(port: int, token: str) -> set[str]:
    status, body = _call(port, "GET", "/api/v1/tenants", token)
    assert status == 200, body
    return {tenant["slug"] for tenant in body["results"]}


def _replay(standby: PrivatePostgres, *, paused: bool) -> None:
    with psycopg.connect(standby.url, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()" if paused else "SELECT pg_wal_replay_resume()")


def _caught_up(primary: PrivatePostgres, standby: PrivatePostgres, timeout: float = 60) -> None:
    with psycopg.connect(primary.url, autocommit=True) as conn:
        (lsn,) = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
    deadline = time.monotonic() + timeout
    with psycopg.connect(standby.url, autocommit=True) as conn:
        while not conn.execute(
            "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [str(lsn)]
        ).fetchone()[0]:
            assert time.monotonic() < deadline, "the standby did not replay the primary's WAL"
            time.sleep(0.05)


@pytest.mark.integration
def test_a_client_reads_its_own_writes_and_the_others_read_the_replica(replicated):
    primary, standby, port, tokens = replicated
    _caught_up(primary, standby)
    _replay(standby, paused=True)  # a lagging replica

    status, body = _call(port, "POST", "/api/v1/tenants", tokens["writer"],
                         {"slug": "new-co", "name": "New Co"})  # fmt: skip
    assert status == 201, body
    # The writer reads the primary until the replica has its write (each of the 2 workers).
    assert all("new-co" in _slugs(port, tokens["writer"]) for _ in range(4))
    # Another client reads the replica, which has not replayed it yet.
    assert "new-co" not in _slugs(port, tokens["reader"])

    _replay(standby, paused=False)
    _caught_up(primary, standby)
    assert "new-co" in _slugs(port, tokens["reader"])  # replayed: every client sees it

    # The writer reads the replica again: another client's write it cannot see yet.
    _replay(standby, paused=True)
    status, _ = _call(port, "POST", "/api/v1/tenants", tokens["other_writer"],
                      {"slug": "later-co", "name": "Later Co"})  # fmt: skip
    assert status == 201
    assert _slugs(port, tokens["writer"]) >= {"new-co"}
    assert "later-co" not in _slugs(port, tokens["writer"])
    assert "later-co" in _slugs(port, tokens["other_writer"])
    _replay(standby, paused=False)
