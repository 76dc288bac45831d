"""Shared fixtures: the test clock, tenants, a user per role, API clients with bearer tokens."""

import os
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient

from portal.clock import clock_set, parse_instant
from portal.models import Role, Tenant
from portal.services import token_create, user_ensure
from tests.hang import hang_note, hang_watch
from tests.servers import serve_metrics

PASSWORD = "correct-horse-battery-staple"

# make test runs the suite on two pytest-xdist workers (gw0, gw1), each with its own test
# database (pytest-django), and Redis databases of its own for the Celery broker of the
# workers its tests start and for the cache, so neither sees the other's tasks or lockouts.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if XDIST_WORKER and os.environ.get("TEST_BROKER_URL"):
    _base, _, _ = os.environ["TEST_BROKER_URL"].rpartition("/")
    os.environ["TEST_BROKER_URL"] = f"{_base}/{2 + int(XDIST_WORKER.removeprefix('gw'))}"

# Property tests draw the same examples on every run ("repeatable"): a suite that passes
# only on the days its random draws are kind is broken. HYPOTHESIS_PROFILE=explore draws anew.
hypothesis_settings.register_profile("repeatable", derandomize=True, database=None)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

# `make soak` (RELIABILITY_SOAK=1) runs the heavy variants: more seeds, more cases, every clock
# for the browser tests; `make test` runs their CI-sized versions.
SOAK = os.environ.get("RELIABILITY_SOAK") == "1"

# The test clock. Every test runs at one instant: PORTAL_NOW when set (to run the whole suite
# at another time, e.g. PORTAL_NOW=2027-01-31T23:30:00Z make test), else mid-month. Tests whose
# answer depends on the calendar run at each of CLOCKS (`@on_every_clock`).
DEFAULT_NOW = (
    parse_instant(os.environ["PORTAL_NOW"])
    if os.environ.get("PORTAL_NOW")
    else datetime(2026, 12, 16, 10, 0, tzinfo=UTC)
)
CLOCKS = {
    "month-start": datetime(2026, 12, 1, 8, 37, tzinfo=UTC),
    "mid-month": datetime(2026, 12, 16, 10, 0, tzinfo=UTC),
    "month-end": datetime(2026, 12, 31, 23, 30, tzinfo=UTC),
    "new-year": datetime(2027, 1, 1, 0, 30, tzinfo=UTC),
}
on_every_clock = pytest.mark.parametrize(
    "now", list(CLOCKS.values()), ids=list(CLOCKS), indirect=True
)


def clocks_in_ci(*names: str) -> list:
    """Every clock of CLOCKS as a `now` parameter, those not named skipped unless soaking:
    the browser tests that read a demo build it once per clock (about a minute), so
    `make test` reads them at the clocks named and `make soak` at every one."""
    soak_only = pytest.mark.skip(reason="soak only (make soak)")
    return [
        pytest.param(moment, id=name, marks=() if SOAK or name in names else soak_only)
        for name, moment in CLOCKS.items()
    ]


def _worker_cache(cache: dict) -> dict:
    if not XDIST_WORKER or not str(cache.get("LOCATION", "")).startswith("redis://"):
        return cache
    base, _, _ = cache["LOCATION"].rpartition("/")
    return {**cache, "LOCATION": f"{base}/{10 + int(XDIST_WORKER.removeprefix('gw'))}"}


@pytest.fixture(scope="session", autouse=True)
def _test_settings():
    """Eager Celery (unit tests only: architecture.md "Runtime"). Argon2id spends 0.1–0.3 s
    on each hash by design, and most tests create four users:
    the suite hashes with MD5 first (Django's advice for test suites) and still verifies
    the Argon2id hashes production writes (tests/portal/test_security.py holds that). Each
    xdist worker has a Redis database of its own for the cache (quotas, sign-in lockouts;
    some tests clear it)."""
    from celery import current_app
    from django.conf import settings
    from django.test import override_settings

    fast = ["django.contrib.auth.hashers.MD5PasswordHasher", *settings.PASSWORD_HASHERS]
    caches = {name: _worker_cache(cache) for name, cache in settings.CACHES.items()}
    # Unit tests run the pipeline's stages eagerly, in the process that asks for them once
    # its transaction commits; tests of the runtime start real workers (`celery_worker`).
    current_app.conf.task_always_eager = True
    current_app.conf.task_eager_propagates = True
    with override_settings(PASSWORD_HASHERS=fast, CACHES=caches):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A test still running 30 s before pytest-timeout stops it says where (tests/hang.py)."""
    with hang_watch(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    hang_note(item.nodeid, outcome.get_result())


@pytest.fixture(autouse=True)
def _cache_cleared():
    """Each test starts with an empty cache, as its database starts without the last
    test's rows: what was kept under a row's id (a figure, a lockout) is not another
    test's."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _celery_join_allowed():
    """An eager task marks the process as inside a task while it runs (a flag of
    celery._state, global, not per thread): two threads running eager tasks at once (the
    concurrent ingestion tests) can leave it set, and a later test's `result.get()` is then
    refused as if called from a task. Each test starts with it clear."""
    from celery._state import _set_task_join_will_block

    _set_task_join_will_block(False)


@pytest.fixture(autouse=True)
def _postgres_only(request):
    """Tests marked postgres_only skip on another database (the concurrency, partitions and
    database-enforced rules they check are PostgreSQL's)."""
    if request.node.get_closest_marker("postgres_only"):
        from django.db import connection

        if connection.vendor != "postgresql":
            pytest.skip("PostgreSQL only")


@pytest.fixture(autouse=True)
def now(request) -> datetime:
    """The instant domain code takes as now during the test (portal.clock); it stands still.
    Processes a test starts get it as PORTAL_NOW (`clock_env`)."""
    moment = getattr(request, "param", DEFAULT_NOW)
    clock_set(moment)
    yield moment
    clock_set(None)


@pytest.fixture
def metrics_server():
    """A Prometheus endpoint on 127.0.0.1 (tests/servers.py serve_metrics): set `page`."""
    with serve_metrics() as server:
        yield server


def clock_env(moment: datetime) -> dict[str, str]:
    """The environment that gives a server, worker or demo process the test clock."""
    return {"PORTAL_NOW": moment.isoformat()}


@pytest.fixture
def tenant_a(db):
    return Tenant.objects.create(slug="tenant-a", name="Tenant A")


@pytest.fixture
def tenant_b(db):
    return Tenant.objects.create(slug="tenant-b", name="Tenant B")


def user_make(role: str, *, tenant: Tenant | None = None, username: str | None = None):
    name = username or (f"{role}-{tenant.slug}" if tenant else f"{role}-user")
    return user_ensure(username=name, role=Role(role), tenant=tenant, password=PASSWORD)


def users_make(tenant_a: Tenant) -> dict:
    """One user per role; the tenant member belongs to tenant A."""
    return {
        "operator": user_make("operator"),
        "finance": user_make("finance"),
        "investor": user_make("investor"),
        "tenant": user_make("tenant", tenant=tenant_a),
    }


def token_client_make(user, scopes=("read",)) -> APIClient:
    """An APIClient sending `Authorization: Bearer …` of a new token of `user`."""
    _, raw = token_create(user=user, name="test", scopes=scopes)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@contextmanager
def world_of_module(django_db_blocker):
    """For a module-scoped fixture that builds a world once per module: inside, at the
    default test clock, a transaction that ends rolled back with the module; each test runs
    in a savepoint inside it (its `db`), as Django's TestCase.setUpTestData does (so not for
    a test that needs it committed: transactional_db)."""
    from django.db import transaction

    with django_db_blocker.unblock():
        clock_set(DEFAULT_NOW)
        try:
            with transaction.atomic():
                yield
                transaction.set_rollback(True)
        finally:
            clock_set(None)


@pytest.fixture
def make_user(db):
    return user_make


@pytest.fixture
def users(db, tenant_a):
    """One user per role; the tenant member belongs to tenant A."""
    return users_make(tenant_a)


@pytest.fixture
def token_client(db):
    """`token_client(user, scopes)` → an APIClient sending `Authorization: Bearer …`."""
    return token_client_make


@pytest.fixture
def session_client(client):
    """`session_client(user)` → Django's test client logged in as `user`."""

    def make(user):
        client.force_login(user)
        return client

    return make


def _ends_with_parent() -> None:
    """In a worker's process before it runs: SIGTERM it when the test process dies (Linux's
    PR_SET_PDEATHSIG), so a suite killed midway leaves no worker behind on a dead broker,
    writing to the log a later run's worker of the same name writes to."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


@contextmanager
def celery_worker(now: datetime, log_name: str, *, include=(), env=None, queues=None, command=None):
    """A real `celery worker` process (prefork, one child) consuming from the test Redis and
    writing to the test database at the test clock, logging to var/<log_name><xdist worker>.log;
    `include` names more task modules, `env` more environment, `queues` the queues it
    consumes (default: every one, as the embedded default's worker); `command` replaces the
    whole command line (a worker started as the README says). Yields (a Celery client app bound
    to the same broker and result backend, the process, the log's path) once it answers a ping;
    it is stopped on exit."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    from celery import Celery, current_app
    from django.conf import settings
    from django.db import connection

    broker = os.environ.get("TEST_BROKER_URL")
    if not broker:
        pytest.skip("needs TEST_BROKER_URL (make test starts a throwaway Redis)")
    if connection.vendor != "postgresql":
        pytest.skip("the worker shares the PostgreSQL test database")
    db = connection.settings_dict
    worker_env = dict(os.environ)
    worker_env.update(
        DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        CELERY_BROKER_URL=broker,
        CELERY_RESULT_BACKEND=broker,
        WORKER_NICE="0",  # the test waits on it: at the suite's priority (a test sets its own)
        **clock_env(now),
    )
    worker_env.update(env or {})
    root = Path(__file__).resolve().parents[1]
    log_path = root / "var" / f"{log_name}{XDIST_WORKER}.log"
    log_path.parent.mkdir(exist_ok=True)
    previous = current_app._get_current_object()  # the portal's app, eager as configured
    app = Celery("test-client", broker=broker, backend=broker)
    app.conf.task_serializer = "json"
    app.conf.task_routes = settings.CELERY_TASK_ROUTES  # the portal's queues
    app.conf.task_default_queue = settings.CELERY_TASK_DEFAULT_QUEUE
    app.control.purge()  # nothing left over from an earlier test
    name = f"{log_name}{XDIST_WORKER}@"
    if command is None:
        command = [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=prefork"]
        command += ["--concurrency=1", "--without-gossip", "--without-mingle"]
        command += ["--queues", ",".join(queues or settings.WORKER_QUEUES)]
        command += [f"--hostname={name}%h"]  # each its own, several at once
        command += [f"--include={module}" for module in include] + ["-l", "INFO"]
    else:
        name = ""  # its own hostname: any worker on this broker (its database is this one's)
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command,
            cwd=root,
            env=worker_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_ends_with_parent,
        )
    try:
        deadline = time.monotonic() + 60
        while not any(
            next(iter(answer)).startswith(name) for answer in app.control.ping(timeout=1.0)
        ):
            if process.poll() is not None:
                pytest.fail(f"worker exited: {log_path.read_text(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"worker did not start: {log_path.read_text(errors='replace')[-2000:]}")
        yield app, process, log_path
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        app.close()
        previous.set_current()  # else later tests' task proxies resolve on the closed client


@contextmanager
def broker_mode(broker: str):
    """The portal's Celery app sends to `broker` instead of running tasks eagerly (as in
    production), then back; an in-memory broker (one per process) is emptied first, so a test
    reads only what it sent. Its connection pool is dropped on both sides (kombu keeps pools
    per broker URL, so a pool is never closed here, only let go)."""
    from portal.celery import app

    conf = app.conf
    saved = conf.task_always_eager, conf.broker_url, conf.broker_transport_options

    def let_go():
        app._pool = None
        app.amqp._producer_pool = None

    let_go()
    conf.task_always_eager, conf.broker_url, conf.broker_transport_options = False, broker, {}
    if broker.startswith("memory://"):  # the process's one in-memory broker starts empty
        with app.connection_for_write() as connection:
            for queue in list(connection.default_channel.queues):
                connection.default_channel.queue_purge(queue)
    try:
        yield app
    finally:
        let_go()
        conf.task_always_eager, conf.broker_url, conf.broker_transport_options = saved


@pytest.fixture
def pipeline_worker(transactional_db, now):
    """A real Celery worker on the test Redis, and this process asking it for the pipeline's
    stages as production does: a write's `stage_schedule` sends the task to the broker."""
    with (
        celery_worker(now, "test-worker") as (app, _, _),
        broker_mode(os.environ["TEST_BROKER_URL"]),
    ):
        yield app


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(items):
    """Under xdist (--dist loadgroup) the fault tests run together on one worker (they start
    servers, crash them and kill processes). The tests that read the demo at one clock instant
    run together too, so the demo at that instant is built once (tests/e2e/conftest.py) rather
    than once a worker, and so do the tests of the one embedded portal (tests/portal/test_embedded.py);
    the rest spread."""
    for item in items:
        if item.path.name in ("test_faults.py", "test_postgres_down.py", "test_ledger_faults.py"):
            item.add_marker(pytest.mark.xdist_group("faults"))
        elif "embedded" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("embedded"))  # one portal, its tests in order
        elif moment := demo_moment(item):
            item.add_marker(pytest.mark.xdist_group(f"demo-{moment:%Y%m%dT%H%M}"))


def demo_moment(item) -> datetime | None:
    """The clock instant of the demo a test reads (tests/e2e/conftest.py), None if none."""
    if not {"demo", "demo_alerting"} & set(getattr(item, "fixturenames", ())):
        return None
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("now", DEFAULT_NOW) if callspec else DEFAULT_NOW


@pytest.fixture
def admin_api(users, token_client):
    """The operator's API client, allowed to ingest usage, read and administer."""
    return token_client(users["operator"], scopes=["ingest", "read", "admin"])
