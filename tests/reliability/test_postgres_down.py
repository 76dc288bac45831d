"""PostgreSQL stopped under load: answers are 503 with Retry-After, never a stack trace, and
the ledger holds no half-written transaction.

A private PostgreSQL cluster (durable commits) serves a gunicorn of the portal with
production settings. Finance finalizes and pays 24 invoices through the API while the
cluster is stopped with `pg_ctl stop -m immediate` (a crash: no checkpoint, open
connections cut) for OUTAGE_S seconds, then started again. Requests during the outage
must answer 503; after it, the server recovers without a restart; every acknowledged
action is in the database; retrying the unacknowledged ones completes the run; and the
ledger then balances, with exactly one issue and one payment transaction per invoice and
gapless numbers.
"""

import http.client
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from tests.conftest import SOAK
from tests.servers import PrivatePostgres, free_port, production_env, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
OUTAGE_S = 20 if SOAK else 3
INVOICES = 24


SETUP = """
import json
import django
django.setup()
from tests.reliability.test_postgres_down import world
print(json.dumps(world()))
"""


def world() -> dict:
    """Run inside the server's database (a subprocess): 24 tenants with March usage and a
    draft invoice each, and a finance token. Returns the draft ids and the raw token."""
    from billing.services.invoices.draft import invoice_draft
    from portal.models import Role, Tenant
    from portal.services import user_ensure
    from tests.billing.factories import MARCH, make_contract, make_priced_model
    from tests.reliability.world import bearer, usage_ingest_march

    make_priced_model()
    drafts = []
    for i in range(INVOICES):
        tenant = Tenant.objects.create(slug=f"t{i:02}", name=f"T{i:02}")
        make_contract(tenant)
        usage_ingest_march(tenant.slug, 2)
    from metering.services.usage.rollup import usage_fold

    usage_fold()
    for tenant in Tenant.objects.order_by("slug"):
        invoice, _ = invoice_draft(tenant=tenant, month_start=MARCH)
        drafts.append(invoice.pk)
    finance = user_ensure(username="finance", role=Role.FINANCE, tenant=None)
    return {"drafts": drafts, "token": bearer(finance, ["read", "write", "admin"])}


@pytest.fixture
def server(tmp_path):
    postgres = PrivatePostgres()
    env = {
        **production_env(database_url=postgres.url, var_dir=tmp_path),
        # static files collected with their manifest, uncompressed
        "STATIC_STORAGE": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage",
    }
    processes = []
    try:
        python = sys.executable
        for command in ("migrate", "collectstatic"):
            subprocess.run([python, "manage.py", command, "--noinput", "-v0"], cwd=ROOT,
                           env=env, check=True)  # fmt: skip
        setup = subprocess.run([python, "-c", SETUP], cwd=ROOT, env=env, check=True,
                               capture_output=True, text=True)  # fmt: skip
        data = json.loads(setup.stdout.strip().splitlines()[-1])
        port = free_port()
        log = tmp_path / "gunicorn.log"
        gunicorn = Path(sys.executable).with_name("gunicorn")
        processes.append(
            subprocess.Popen(
                [
                    str(gunicorn),
                    "portal.wsgi",
                    "--workers",
                    "2",
                    "--worker-class",
                    "gthread",
                    "--threads",
                    "2",
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--error-logfile",
                    str(log),
                ],
                cwd=ROOT,
                env=env,
                stdout=log.open("a"),  # Django's error log, to read when a test fails
                stderr=subprocess.STDOUT,
            )
        )
        wait_for_port(port, processes[-1], log)
        yield postgres, port, data
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=20)
        postgres.close()


def _request(port: int, method: str, path: str, token: str) -> tuple[int, dict, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def _ledger_facts(url: str) -> dict:
    with psycopg.connect(url) as conn:
        unbalanced = conn.execute(
            "SELECT transaction_id, currency, SUM(amount) FROM billing_posting"
            " GROUP BY transaction_id, currency HAVING SUM(amount) <> 0"
        ).fetchall()
        thin = conn.execute(
            "SELECT t.id FROM billing_ledgertransaction t LEFT JOIN billing_posting p"
            " ON p.transaction_id = t.id GROUP BY t.id HAVING COUNT(p.id) < 2"
        ).fetchall()
        kinds = conn.execute(
            "SELECT kind, COUNT(*) FROM billing_ledgertransaction GROUP BY kind"
        ).fetchall()
        invoices = conn.execute(
            "SELECT status, number FROM billing_invoice ORDER BY number"
        ).fetchall()
    return {"unbalanced": unbalanced, "thin": thin, "kinds": dict(kinds), "invoices": invoices}


@pytest.mark.integration
@pytest.mark.postgres_only
def test_postgres_crash_answers_503_and_leaves_no_half_written_ledger(server):
    postgres, port, data = server
    token, drafts = data["token"], data["drafts"]
    # Each invoice: finalize, then pay; the outage starts during a random action.
    todo = [(pk, action) for pk in drafts for action in ("finalize", "pay")]
    rng = random.Random(os.environ.get("RELIABILITY_SEED"))
    crash_after, crash_delay = rng.randint(8, 16), rng.uniform(0, 0.3)
    statuses: dict[int, int] = {}
    done, outage_answers = set(), []
    crashed_at: list[float] = []  # set once the cluster is down

    def crash() -> None:
        time.sleep(crash_delay)  # lands inside a request more often than not
        postgres.crash()
        crashed_at.append(time.monotonic())

    # The crash comes from a thread, at a random moment; the restart comes from this loop,
    # between two requests, once the outage has lasted OUTAGE_S and been probed: so a request
    # sent while the cluster is down is answered while it is still down, however slow the
    # machine (a restart by the clock could land between a request and its probe).
    crasher = None
    index = 0
    deadline = time.monotonic() + 120 + OUTAGE_S
    while len(done) < len(todo):
        assert time.monotonic() < deadline, f"not done: {len(done)}/{len(todo)}, {statuses}"
        if index == crash_after and crasher is None:
            crasher = threading.Thread(target=crash)
            crasher.start()
        is_down = bool(crashed_at) and not crasher.is_alive()
        if is_down and outage_answers and time.monotonic() - crashed_at[0] >= OUTAGE_S:
            postgres.start()
            crashed_at.clear()
            is_down = False
        pk, action = todo[index % len(todo)]
        index += 1
        if (pk, action) in done or (action == "pay" and (pk, "finalize") not in done):
            continue
        status, headers, body = _request(port, "POST", f"/api/v1/invoices/{pk}/{action}", token)
        statuses[status] = statuses.get(status, 0) + 1
        assert b"Traceback" not in body and b'File "/' not in body, body[:500]
        if is_down:
            # Sent while the cluster was down. The status page reads incidents from the
            # database on every request (no cache in front of it), so it is a 503 too.
            outage_answers.append(status)
            page_status, page_headers, page = _request(port, "GET", "/status/", token)
            assert page_status == 503 and int(page_headers["Retry-After"]) > 0, page[:300]
            assert b"Traceback" not in page and b"<html" in page.lower()
        if status == 503:
            assert int(headers["Retry-After"]) > 0
            assert "database" in json.loads(body)["errors"][0]["message"].lower(), body
            time.sleep(0.1)
        elif status == 409 and action == "pay" and b"is paid" in body:
            done.add((pk, action))  # paid by a request whose answer the crash cut off
        elif status == 409 and action == "finalize" and b"is issued" in body:
            done.add((pk, action))  # issued by a request whose answer the crash cut off
        else:
            assert status == 200, (status, body[:500])
            done.add((pk, action))
    crasher.join()
    if crashed_at:  # finished before the outage was probed (cannot happen with 48 actions)
        postgres.start()

    # The outage was seen: every answer during it was a 503, never a 500.
    print(f"PostgreSQL down {OUTAGE_S} s: answers {statuses}, during the outage {outage_answers}")
    assert outage_answers and set(outage_answers) == {503}, outage_answers
    assert 500 not in statuses
    facts = _ledger_facts(postgres.url)
    assert facts["unbalanced"] == [] and facts["thin"] == []
    assert facts["invoices"] == [("paid", f"INV-{n[4:8]}-{i:06}") for i, (_, n) in
                                 enumerate(facts["invoices"], start=1)]  # fmt: skip
    assert len(facts["invoices"]) == INVOICES
    assert facts["kinds"] == {"invoice": INVOICES, "payment": INVOICES}, facts["kinds"]
