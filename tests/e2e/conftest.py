"""Browser tests: Debian's Chromium driven by Playwright against the live server."""

import io
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import demo_moment

# Playwright's sync API runs an event loop in this thread; Django's ORM calls made by the
# test itself (fixtures) are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/ensure-system-packages.sh")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()


def login(page, username: str, password: str) -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    with page.expect_navigation():  # the page signed in to, loaded
        page.get_by_role("button", name="Sign in").click()


def role_pages(page, role) -> list[str]:
    """The status page, the role's navigation and the detail pages its lists link to (two
    invoices, two incidents): every page a person of that role opens."""
    from portal.shell import nav_for

    paths = [item["url"] for item in nav_for(role) if item["url"] != "/api/docs/"]
    details = []
    for listing, pattern in (("/billing/invoices/", r"^/billing/invoices/\d+/$"),
                             ("/incidents/", r"^/incidents/\d+/$")):  # fmt: skip
        if listing in paths:
            page.goto(listing)
            hrefs = page.eval_on_selector_all(
                "a[href]", "els => els.map(e => e.getAttribute('href'))"
            )
            details += [h for h in hrefs if re.match(pattern, h)][:2]
    return ["/status/", *paths, *details]


def chart_points(page, selector: str) -> int:
    """Positive points (bars, markers) drawn by every trace of the Plotly chart `selector`."""
    return page.evaluate(
        f"() => document.querySelector('{selector}').data.reduce((n, t) => n + t.y.filter(v => v > 0).length, 0)"
    )


def screenshot(page, name: str) -> Path:
    """Full-page PNG under var/screenshots/, to look at."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


# The demo (portal.demo.demo_run) takes 30–60 s to build. On PostgreSQL each xdist worker
# builds it once per clock instant, in the first test that asks for it, and copies every table
# of the Django apps into a schema of its own (e2e_demo_<instant>, in the worker's own test
# database, out of reach of the flush that ends each transactional test). Every later test at
# that instant gets a fresh copy: TRUNCATE, INSERT … SELECT, the sequences set back. Tests that
# write (incidents, flywheel levers, scrape targets) never see each other's writes. The demo
# writes no file and no cache entry; its data depends only on the clock (its RNG is seeded).
#
# A test followed by one reading the demo at the same instant (xdist runs a group's tests one
# after another) skips the flush that ends it; triggers on every table have noted in
# DIRTY_TABLE the tables any statement wrote since the copy was made, and the next test copies
# back those alone (DELETE, INSERT … SELECT): a few tables instead of all of them, and the
# tables a variant's making wrote when it goes from the demo to its variant or back (the
# demo with every alert kind firing, demo_alerting, is kept in a snapshot of its own). Any
# other test after it gets the flush as usual.
DIRTY_TABLE = "e2e_demo_dirty"


class _Held:
    """The demo the database holds unflushed (its instant and variant, demo_state; None:
    flushed), and whether the test ending now leaves it for the next."""

    state: tuple[datetime, str] | None = None
    keep = False


def demo_state(item) -> tuple[datetime, str] | None:
    """The demo a test reads: its clock instant and variant ("alerting": demo_alerting's,
    the demo with one alert of each kind firing; "": the demo), None if none."""
    moment = demo_moment(item)
    if moment is None:
        return None
    return moment, "alerting" if "demo_alerting" in item.fixturenames else ""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    state, following = demo_state(item), demo_state(nextitem)
    same_instant = state is not None and following is not None and state[0] == following[0]
    _Held.keep = same_instant and state == _Held.state
    yield
    _Held.keep = False
    if _Held.state is not None and not same_instant:
        # Held by a test whose own flush did not run (it stopped before its database was set
        # up): the next test must not find the demo.
        from django.core.management import call_command
        from pytest_django.plugin import blocking_manager_key

        with item.config.stash[blocking_manager_key].unblock():
            call_command("flush", interactive=False, verbosity=0)
        _Held.state = None


@pytest.fixture(scope="session", autouse=True)
def _demo_kept_for_the_next_test():
    """The flush that ends a transactional test is skipped when the next test restores the
    demo from what it left (_Held.keep)."""
    from django.test import TransactionTestCase

    flush = TransactionTestCase._fixture_teardown

    def teardown(self):
        if not _Held.keep:
            _Held.state = None
            flush(self)

    TransactionTestCase._fixture_teardown = teardown
    yield
    TransactionTestCase._fixture_teardown = flush


@dataclass(frozen=True)
class DemoSnapshot:
    schema: str
    tables: tuple[tuple[str, str], ...]  # table, quoted list of its stored columns
    partitions: tuple[tuple[str, str, str], ...]  # partition, parent, bound
    sequences: tuple[tuple[str, int | None], ...]  # sequence, last value (None: never used)
    # A variant's: the tables its making wrote after the demo's restore (where they differ).
    differs: frozenset[str] = frozenset()


def _demo_schema(moment: datetime, variant: str) -> str:
    return f"e2e_demo_{moment.astimezone(UTC):%Y%m%dt%H%M%S%f}{variant}"


def _demo_snapshot_take(schema: str, *, variant: bool) -> DemoSnapshot:
    from django.db import connection, transaction

    tables = sorted(connection.introspection.django_table_names(only_existing=True))
    quote = connection.ops.quote_name
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"CREATE SCHEMA {quote(schema)}")
        stored = []
        for table in tables:
            cursor.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
                " AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
                [f"public.{quote(table)}"],
            )
            columns = ", ".join(quote(name) for (name,) in cursor.fetchall())
            # A partitioned table reads the rows of all its partitions.
            cursor.execute(
                f"CREATE TABLE {quote(schema)}.{quote(table)} AS"  # noqa: S608 (names from the catalog)
                f" SELECT {columns} FROM public.{quote(table)}"
            )
            stored.append((table, columns))
        cursor.execute(
            "SELECT child.relname, parent.relname, pg_get_expr(child.relpartbound, child.oid)"
            " FROM pg_inherits i JOIN pg_class child ON child.oid = i.inhrelid"
            " JOIN pg_class parent ON parent.oid = i.inhparent"
            " WHERE parent.relnamespace = 'public'::regnamespace AND parent.relname = ANY(%s)"
            " ORDER BY child.relname",
            [tables],
        )
        partitions = tuple(cursor.fetchall())
        cursor.execute(
            "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public'"
            " ORDER BY sequencename"
        )
        sequences = tuple(cursor.fetchall())
        _dirty_triggers(cursor, tables=tables, partitions=partitions)
        cursor.execute(f"SELECT name FROM public.{DIRTY_TABLE}")  # noqa: S608
        differs = frozenset(name for (name,) in cursor.fetchall()) if variant else frozenset()
        cursor.execute(f"TRUNCATE public.{DIRTY_TABLE}")  # the database is the snapshot
    return DemoSnapshot(schema, tuple(stored), partitions, sequences, differs)


def _dirty_triggers(cursor, *, tables: list[str], partitions) -> None:
    """A statement trigger on every table and partition that names its table in DIRTY_TABLE
    when a statement writes it (the partition's parent for a partition)."""
    from django.db import connection

    quote = connection.ops.quote_name
    cursor.execute(
        f"CREATE UNLOGGED TABLE IF NOT EXISTS public.{DIRTY_TABLE} (name text PRIMARY KEY)"
    )
    cursor.execute(
        f"CREATE OR REPLACE FUNCTION public.{DIRTY_TABLE}_mark() RETURNS trigger"  # noqa: S608
        " LANGUAGE plpgsql AS $$ BEGIN"
        f" INSERT INTO public.{DIRTY_TABLE} VALUES (TG_ARGV[0]) ON CONFLICT DO NOTHING;"
        " RETURN NULL; END $$"
    )
    for table, parent in [(t, t) for t in tables] + [(c, p) for c, p, _ in partitions]:
        cursor.execute(
            f"CREATE OR REPLACE TRIGGER {DIRTY_TABLE} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE"
            f" ON public.{quote(table)} FOR EACH STATEMENT"
            f" EXECUTE FUNCTION public.{DIRTY_TABLE}_mark('{parent}')"
        )


def _parents_of_new_partitions(cursor, snapshot: DemoSnapshot) -> set[str]:
    """The tables given a partition since the snapshot (it has no trigger: written or not,
    its parent is copied back)."""
    cursor.execute(
        "SELECT child.relname, parent.relname FROM pg_inherits i"
        " JOIN pg_class child ON child.oid = i.inhrelid"
        " JOIN pg_class parent ON parent.oid = i.inhparent"
        " WHERE parent.relnamespace = 'public'::regnamespace"
    )
    known = {partition for partition, _, _ in snapshot.partitions}
    return {parent for partition, parent in cursor.fetchall() if partition not in known}


def _demo_snapshot_restore(snapshot: DemoSnapshot, *, held: frozenset[str] | None) -> None:
    """The demo's tables as the snapshot holds them: every table, or when the database holds
    a demo of the same instant unflushed (`held`: the tables it differs in beside those
    written since), only those and the ones written since (DIRTY_TABLE)."""
    from django.contrib.contenttypes.models import ContentType
    from django.db import DatabaseError, connection, transaction

    quote = connection.ops.quote_name
    schema = quote(snapshot.schema)
    with transaction.atomic(), connection.cursor() as cursor:
        for partition, parent, bound in snapshot.partitions:  # kept by the flush; made sure of
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS public.{quote(partition)}"
                f" PARTITION OF public.{quote(parent)} {bound}"
            )
        try:  # a superuser copies without firing triggers (the rows were checked when made)
            with transaction.atomic():
                cursor.execute("SET LOCAL session_replication_role = replica")
        except DatabaseError:
            held = None  # then the foreign keys (deferred) and guards are checked at commit
        tables = snapshot.tables
        if held is not None:
            cursor.execute(f"SELECT name FROM public.{DIRTY_TABLE}")  # noqa: S608
            dirty = (
                {name for (name,) in cursor.fetchall()}
                | _parents_of_new_partitions(cursor, snapshot)
                | held
            )
            tables = tuple((table, columns) for table, columns in tables if table in dirty)
            for table, _ in tables:  # the rows of partitions made since go too
                cursor.execute(f"DELETE FROM public.{quote(table)}")  # noqa: S608
        elif tables:
            names = ", ".join(f"public.{quote(table)}" for table, _ in tables)
            cursor.execute(f"TRUNCATE {names}")
        for table, columns in tables:
            cursor.execute(
                f"INSERT INTO public.{quote(table)} ({columns})"  # noqa: S608 (names from the catalog)
                f" SELECT {columns} FROM {schema}.{quote(table)}"
            )
        for sequence, last in snapshot.sequences:
            cursor.execute(
                "SELECT setval(%s, %s, %s)",
                [f"public.{quote(sequence)}", last or 1, last is not None],
            )
        cursor.execute(f"TRUNCATE public.{DIRTY_TABLE}")
    ContentType.objects.clear_cache()  # the restored content types may have other ids


@pytest.fixture(scope="session")
def _demo_snapshots(django_db_setup, django_db_blocker):
    """The demo snapshots of this worker's test database, by demo state (demo_state)."""
    snapshots: dict[datetime, DemoSnapshot] = {}
    yield snapshots
    from django.db import connection

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        for snapshot in snapshots.values():
            cursor.execute(f"DROP SCHEMA {connection.ops.quote_name(snapshot.schema)} CASCADE")


@pytest.fixture
def demo(transactional_db, now, _demo_snapshots):
    """The demo factory at the test clock, fresh for this test."""
    _demo_held((now, ""), _demo_snapshots, build=_demo_build)


def _demo_held(state: tuple[datetime, str], snapshots: dict, *, build) -> None:
    """The demo `state` (demo_state) in the database: built by `build` and kept in a snapshot
    the first time, restored from it since (only the tables written since when the database
    holds that state unflushed)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        build()
        return
    snapshot = snapshots.get(state)
    if snapshot is None:
        build()
        snapshots[state] = _demo_snapshot_take(_demo_schema(*state), variant=bool(state[1]))
    else:
        _demo_snapshot_restore(snapshot, held=_differs(_Held.state, state, snapshots))
    _Held.state = state


def _differs(held, state, snapshots) -> frozenset[str] | None:
    """The tables the demo `held` unflushed differs in from `state`'s beside those written
    since: none for the same, what the variant's making wrote for the demo and its variant
    at one instant, None (every table) otherwise."""
    if held is None or held[0] != state[0]:
        return None
    return frozenset() if held == state else snapshots[held if held[1] else state].differs


def _demo_build() -> None:
    """Load the demo as `make demo` does: its writes ask for the pipeline's stages, which no
    worker runs while it loads (an in-memory broker here), and its last step runs every
    stage in order; then the runs it asked for are taken as done, as the worker would."""
    from portal.demo import demo_run
    from portal.models import StageRequest
    from tests.conftest import broker_mode

    with broker_mode("memory://"):
        demo_run(stdout=io.StringIO())
    StageRequest.objects.update(pending=False)


# What, beside the demo's own rules and alerts, makes one alert of each kind fire at the
# test clock (the demo's burn alerts of the last day resolved by now): a burning
# qwen3-235b-a22b@h200-a (a major outage since 04:00, 500,000 failed requests of Acme's
# 7 minutes ago), its engines counting twice their tokens (and 10 M more) in each hour
# since 08:00, a gateway quiet for 20 minutes while they generate, a scrape target refused
# four times, and rules of the kinds the demo holds none of.
BURNING = "qwen3-235b-a22b@h200-a"
EVERY_KIND_RULES = (
    ("operator", {"kind": "kpi_below_band", "params": {"kpi": "tef", "threshold": "0.95"}}),
    ("operator", {"kind": "gpu_waste", "scope": {"pool": "b200-a"},
                  "params": {"threshold_pct": "1"}}),
    # Massive Dynamic uses about a third of its 16 H100 (demo-factory.md, reservations).
    ("finance", {"kind": "reservation_underused", "tenant": "massive",
                 "params": {"percent": 90, "days": 1}}),
    # Initech buys beyond its 64 reserved B200s in each of the last 2 whole hours (OVERAGE).
    ("finance", {"kind": "reservation_overage", "tenant": "initech",
                 "params": {"percent": 10, "hours": 2}}),
)  # fmt: skip
# Output tokens Initech sends in each of the last 2 whole hours beyond what the demo sent:
# more than its reservation holds alone (64 GPUs × R_ref 3,550 × 3,600 s = 817.92 M tok), so
# at any clock at least (1,000 − 817.92) / 817.92 = 22 % of it is bought on demand.
OVERAGE = 1_000_000_000


@pytest.fixture
def demo_alerting(transactional_db, now, _demo_snapshots):
    """The demo with one alert of each registered kind firing at the test clock (made once
    an instant, kept in a snapshot of its own as the demo is)."""

    def build() -> None:
        _demo_held((now, ""), _demo_snapshots, build=_demo_build)
        every_kind_firing(now)

    _demo_held((now, "alerting"), _demo_snapshots, build=build)


def every_kind_firing(now: datetime) -> None:
    """Make what EVERY_KIND_RULES says happen at `now` and evaluate the alerts then."""
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.db.models import F
    from django.db.models.functions import Coalesce

    from billing.models import Reservation
    from billing.services.rating import rated_usage_update
    from metering.models import Deployment, EngineHourly, ScrapeTarget
    from metering.services.sla.incidents import incident_create
    from metering.services.telemetry.scrape import scrape_target
    from metering.services.usage.ingest import Batch, Sender, batch_ingest
    from metering.services.usage.rollup import usage_fold
    from portal import clock
    from portal.alert_kinds import KINDS
    from portal.alerts import alerts_evaluate, rule_create
    from portal.models import Alert, Tenant

    deployment = Deployment.objects.select_related("model", "pool").get(slug=BURNING)
    hour = now.replace(minute=0, second=0, microsecond=0)
    incident_create(
        title="Qwen3-235B-A22B failing on h200-a", severity="sev1", impact="major_outage",
        started_at=hour - timedelta(hours=6), deployments=[deployment],
        message="Requests to Qwen3-235B-A22B return 503.", by=None, now=now,
    )  # fmt: skip
    for source, minutes, status, requests in (("gw-burn", 7, "error", 500_000),
                                              ("gw-quiet", 20, "ok", 1)):  # fmt: skip
        at = now - timedelta(minutes=minutes)
        clock.clock_set(at)
        item = {
            "id": f"{source}-1", "time": at.isoformat(), "tenant": "acme", "source": source,
            "model": deployment.model.slug, "pool": deployment.pool.slug, "status": status,
            "requests": requests, "input_tokens": 10 * requests, "cached_tokens": 0,
            "output_tokens": requests,
        }  # fmt: skip
        batch_ingest(sender=Sender(path="/api/v1/usage/events"), batch=Batch(items=[item]))
    reservation = Reservation.objects.select_related("deployment__model", "deployment__pool")
    reserved = reservation.get(tenant__slug="initech").deployment
    for back in (2, 1):
        at = hour - back * timedelta(hours=1) + timedelta(minutes=30)
        item = {
            "id": f"initech-peak-{back}", "time": at.isoformat(), "tenant": "initech",
            "source": "gw-peak", "model": reserved.model.slug, "pool": reserved.pool.slug,
            "requests": 100_000, "input_tokens": 0, "cached_tokens": 0, "output_tokens": OVERAGE,
        }  # fmt: skip
        batch_ingest(sender=Sender(path="/api/v1/usage/events"), batch=Batch(items=[item]))
    clock.clock_set(now)
    usage_fold()
    rated_usage_update()
    # Twice the generated tokens (and 10 M more) of each of the last 2 whole hours, beyond
    # what was metered, and the engines generating still, observed 30 s ago (after the quiet
    # gateway's last batch).
    for back, observed in ((2, None), (1, None), (0, now - timedelta(seconds=30))):
        engine, _ = EngineHourly.objects.get_or_create(
            deployment=deployment,
            hour=hour - back * timedelta(hours=1),
            defaults={"intervals": 120, "generation_tokens": 0},
        )
        EngineHourly.objects.filter(pk=engine.pk).update(
            generation_tokens=Coalesce(F("generation_tokens"), 0) * 2 + 10_000_000,
            last_observed_at=observed or F("last_observed_at"),
        )
    target = ScrapeTarget.objects.create(
        url="http://qwen3-h200-a-0:8000/metrics", kind="vllm", pool=deployment.pool,
        deployment=deployment,
    )  # fmt: skip
    for back in (3, 2, 1, 0):
        scrape_target(target=target, now=now - back * timedelta(seconds=30), fetch=_refused)
    for username, rule in EVERY_KIND_RULES:
        if "tenant" in rule:
            rule = {**rule, "tenant": Tenant.objects.get(slug=rule["tenant"])}
        rule_create(by=User.objects.get(username=username), **rule)
    alerts_evaluate(now=now)
    firing = set(Alert.objects.filter(state="firing").values_list("rule__kind", flat=True))
    assert firing == set(KINDS), sorted(set(KINDS) ^ firing)


def _refused(url: str, timeout: float) -> str:
    raise ConnectionRefusedError("connection refused")
