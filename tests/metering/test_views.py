"""The metering pages as a user reads them: reconciliation flags, scrape target health,
the paginated usage table and its complete CSV."""

import csv
import io
import json
import re
from datetime import UTC, date, datetime, timedelta
from html import unescape
from html.parser import HTMLParser

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from metering.models import DailyUsage, EngineHourly, HourlyUsage, ScrapeTarget
from portal import clock
from portal.models import Project
from tests.metering.factories import make_deployment, make_hourly_usage

pytestmark = pytest.mark.both_backends

PERIOD = "?from=2026-03-01&to=2026-03-02"
HOUR_10 = datetime(2026, 3, 1, 10, tzinfo=UTC)
HOUR_11 = datetime(2026, 3, 1, 11, tzinfo=UTC)
USAGE_TABLE = "Usage by day, model and project"


class _Tables(HTMLParser):
    """Cell texts of every row in the <tbody> of each table, by the table's aria-label."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._in_body = False
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = dict(attrs).get("aria-label", "")
            self.tables[self._table] = []
        elif tag == "tbody" and self._table is not None:
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._in_body:
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1].append(_squash("".join(self._cell)))
            self._cell = None
        elif tag == "tbody":
            self._in_body = False
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _tables(response) -> dict[str, list[list[str]]]:
    parser = _Tables()
    parser.feed(response.content.decode())
    return parser.tables


def _text(response) -> str:
    return _squash(re.sub(r"<[^>]+>", " ", response.content.decode()))


def _metered(tenant, deployment, hour, output_tokens) -> HourlyUsage:
    return make_hourly_usage(tenant, deployment, hour, requests=10, output_tokens=output_tokens)


def _engine(deployment, hour, generation_tokens) -> EngineHourly:
    return EngineHourly.objects.create(
        deployment=deployment, hour=hour, intervals=120, generation_tokens=generation_tokens
    )


@pytest.fixture
def deployment(db):
    return make_deployment()


def test_metering_page_flags_the_hour_beyond_tolerance_only(
    session_client, users, tenant_a, deployment
):
    # Given 10:00: engine 1,050,000 vs metered 1,000,000 (50,000 > max(1% = 10,500, 10,000));
    # 11:00: engine 1,005,000 vs metered 1,000,000 (5,000 within tolerance).
    _metered(tenant_a, deployment, HOUR_10, 1_000_000)
    _engine(deployment, HOUR_10, 1_050_000)
    _metered(tenant_a, deployment, HOUR_11, 1_000_000)
    _engine(deployment, HOUR_11, 1_005_000)

    response = session_client(users["operator"]).get("/metering/" + PERIOD)

    assert response.status_code == 200
    tables = _tables(response)
    assert tables["Reconciliation by deployment"] == [
        ["llama-70b@h100-a", "h100-a", "2", "1 flagged", "2.1 M", "—", "2.0 M", "2.7%"]
    ]
    assert tables["Flagged deployment-hours"] == [
        [
            "2026-03-01 10:00",
            "llama-70b@h100-a",
            "1,050,000",
            "1,000,000",
            "50,000",
            "4.8%",
            "engine higher events missing or late?",
            "120",
        ]
    ]
    assert "Flagged hours (1, newest first)" in _text(response)


def test_metering_page_shows_no_flag_within_tolerance(session_client, users, tenant_a, deployment):
    # 10,000 tokens apart is exactly the tolerance: not flagged.
    _metered(tenant_a, deployment, HOUR_11, 500_000)
    _engine(deployment, HOUR_11, 510_000)

    response = session_client(users["operator"]).get("/metering/" + PERIOD)

    tables = _tables(response)
    assert tables["Reconciliation by deployment"] == [
        [
            "llama-70b@h100-a",
            "h100-a",
            "1",
            "none: all within tolerance",
            "510.0 k",
            "—",  # no OTLP metrics exported
            "500.0 k",
            "2.0%",
        ]
    ]
    assert "Flagged deployment-hours" not in tables
    assert (
        "No flagged hours: all 1 deployment-hours with engine telemetry in this period are "
        "within tolerance." in _text(response)
    )


def test_metering_page_empty_states_say_what_is_missing_and_how_to_fix_it(session_client, users):
    response = session_client(users["operator"]).get("/metering/" + PERIOD)

    text = _text(response)
    assert (
        "No engine token counters in this period, so there is nothing to reconcile (GPU capacity"
        " telemetry, the busy GPUs above, is another source): add a vLLM or "
        "SGLang scrape target with POST /api/v1/scrape-targets , or push the engine's /metrics "
        "text to POST /api/v1/telemetry/prometheus ." in text
    )
    assert "No scrape targets: add one with POST /api/v1/scrape-targets" in text
    assert "Scrape targets" not in _tables(response)


def test_metering_page_lists_a_failing_scrape_target_first_as_failing(
    session_client, users, deployment
):
    now = clock.now()
    ScrapeTarget.objects.create(
        url="http://vllm-0.h100-a:8000/metrics",
        kind="vllm",
        pool=deployment.pool,
        deployment=deployment,
        last_scraped_at=now - timedelta(seconds=20),
        last_status=ScrapeTarget.Status.OK,
    )
    failed_at = now - timedelta(seconds=10)
    ScrapeTarget.objects.create(
        url="http://dcgm.h100-a:9400/metrics",
        kind="dcgm",
        pool=deployment.pool,
        last_scraped_at=failed_at,
        last_status=ScrapeTarget.Status.FAILED,
        last_error="URLError: <urlopen error [Errno 111] Connection refused>",
        consecutive_failures=3,
    )

    response = session_client(users["operator"]).get("/metering/" + PERIOD)

    assert _tables(response)["Scrape targets"] == [
        [
            "Failing",
            "http://dcgm.h100-a:9400/metrics",
            "dcgm-exporter",
            "h100-a",
            "none in the last 3 scrapes",
            "URLError: <urlopen error [Errno 111] Connection refused> "
            f"at {failed_at:%Y-%m-%d %H:%M:%S}",
        ],
        [
            "OK",
            "http://vllm-0.h100-a:8000/metrics",
            "vLLM",
            "h100-a llama-70b@h100-a",
            f"{now - timedelta(seconds=20):%Y-%m-%d %H:%M:%S}",
            "—",
        ],
    ]


def test_metering_page_queries_do_not_grow_with_targets_or_flags(
    session_client, users, tenant_a, deployment
):
    client = session_client(users["operator"])
    client.get("/")  # the session's start written (then at most once a minute)

    def queries_with(count: int) -> int:
        """Queries of the page once `count` flagged hours and scrape targets exist."""
        for i in range(ScrapeTarget.objects.count(), count):
            hour = HOUR_10 - timedelta(hours=i)
            _metered(tenant_a, deployment, hour, 1_000_000)
            _engine(deployment, hour, 2_000_000)
            ScrapeTarget.objects.create(
                url=f"http://vllm-{i}:8000/metrics", kind="vllm", pool=deployment.pool
            )
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/metering/" + PERIOD).status_code == 200
        return len(captured)

    assert queries_with(1) == queries_with(4)


def test_metering_page_is_for_operators_only(session_client, users):
    response = session_client(users["finance"]).get("/metering/")

    assert response.status_code == 403


@pytest.fixture
def sixty_usage_rows(tenant_a):
    """30 days x 2 models of daily usage in March 2026: 60 table rows."""
    deployments = [make_deployment(), make_deployment(model="qwen", pool="h200-a")]
    for offset in range(30):
        for index, deployment in enumerate(deployments):
            DailyUsage.objects.create(
                tenant=tenant_a,
                deployment=deployment,
                day=date(2026, 3, 1) + timedelta(days=offset),
                requests=100 + offset,
                output_tokens=1_000 * (offset + 1) + index,
            )


def test_usage_table_has_a_second_page_and_the_csv_every_row(
    session_client, users, sixty_usage_rows
):
    client = session_client(users["tenant"])
    query = "?from=2026-03-01&to=2026-03-31"

    first = client.get("/usage/" + query)
    second = client.get("/usage/" + query + "&page=2")
    download = client.get("/usage/" + query + "&page=2&format=csv")

    first_rows = _tables(first)[USAGE_TABLE]
    second_rows = _tables(second)[USAGE_TABLE]
    # The table newest day first (the period's last day on page 1), by model within a day;
    # the CSV by day and model.
    assert len(first_rows) == 50
    assert [row[:4] for row in first_rows[:2]] == [
        ["2026-03-30", "llama-70b", "(none)", "129"],
        ["2026-03-30", "qwen", "(none)", "129"],
    ]
    assert [row[:4] for row in second_rows] == [
        [f"2026-03-0{day}", model, "(none)", str(100 + day - 1)]
        for day in range(5, 0, -1)
        for model in ("llama-70b", "qwen")
    ]
    assert (
        'aria-sort="descending"><a class="sort" href="?from=2026-03-01&amp;to=2026-03-31&amp;ordering=day">Day (UTC)'
        in first.content.decode()
    )
    assert "Page 2 of 2" in _text(second)
    assert "Rows 51–60 of 60" in _text(second)
    assert "Download CSV (60 rows)" in _text(second)
    assert b"page=2&amp;format=csv" not in second.content
    lines = list(csv.reader(io.StringIO(download.content.decode())))
    assert lines[0][:5] == ["day", "model", "project", "service_tier", "requests"]
    assert len(lines) == 61
    assert lines[1][:6] == ["2026-03-01", "llama-70b", "(none)", "standard", "100", "0"]
    assert lines[60][:5] == ["2026-03-30", "qwen", "(none)", "standard", "129"]
    # The file names its period: from the 1st, to the 31st excluded.
    assert 'filename="usage-20260301-20260331.csv"' in download["Content-Disposition"]


@pytest.fixture
def usage_of_projects(tenant_a, tenant_b, deployment):
    """March 1st, 2026: tenant A's search (two hours), eval and (none); tenant B's own
    search, a project of the same slug."""
    search = Project.objects.create(tenant=tenant_a, slug="search", name="Search")
    evaluation = Project.objects.create(tenant=tenant_a, slug="eval", name="Evaluation")
    foreign = Project.objects.create(tenant=tenant_b, slug="search", name="B's search")
    for tenant, project_id, hour, requests, output_tokens in (
        (tenant_a, search.pk, HOUR_10, 10, 1_000),
        (tenant_a, search.pk, HOUR_11, 5, 500),
        (tenant_a, evaluation.pk, HOUR_10, 3, 250),
        (tenant_a, 0, HOUR_11, 2, 40),
        (tenant_b, foreign.pk, HOUR_10, 7, 7_000),
    ):
        make_hourly_usage(
            tenant, deployment, hour, project_id=project_id, requests=requests,
            output_tokens=output_tokens,
        )  # fmt: skip


def _picker(response) -> list[str]:
    select = re.search(r'<select id="project".*?</select>', response.content.decode(), re.S)
    return re.findall(r'<option value="([^"]*)"', select.group(0)) if select else []


def _csv(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_usage_page_groups_and_filters_by_project_of_the_tenant_shown(
    session_client, users, usage_of_projects
):
    member = session_client(users["tenant"])

    page = member.get("/usage/" + PERIOD)

    # A row per day, model and project (and tier: all standard here, which the model cell
    # does not name); (none) first; tenant B's search is not A's.
    assert [row[:4] for row in _tables(page)[USAGE_TABLE]] == [
        ["2026-03-01", "llama-70b", "(none)", "2"],
        ["2026-03-01", "llama-70b", "eval", "3"],
        ["2026-03-01", "llama-70b", "search", "15"],
    ]
    assert _picker(page) == ["", "eval", "search", "(none)"]
    lines = _csv(member.get("/usage/" + PERIOD + "&format=csv"))
    assert [line[:3] + line[4:5] + line[9:10] for line in lines] == [
        ["day", "model", "project", "requests", "output_tokens"],
        ["2026-03-01", "llama-70b", "(none)", "2", "40"],
        ["2026-03-01", "llama-70b", "eval", "3", "250"],
        ["2026-03-01", "llama-70b", "search", "15", "1500"],
    ]
    for project, expected in (("search", ["search", "15", "1500"]),
                              ("(none)", ["(none)", "2", "40"])):  # fmt: skip
        lines = _csv(member.get(f"/usage/{PERIOD}&project={project}&format=csv"))
        assert [line[2:3] + line[4:5] + line[9:10] for line in lines[1:]] == [expected], project
        assert "selected>" in member.get(f"/usage/{PERIOD}&project={project}").content.decode()
    assert _csv(member.get(f"/usage/{PERIOD}&project=nothing&format=csv"))[1:] == []

    operator = session_client(users["operator"])
    every = operator.get("/usage/" + PERIOD)
    assert _picker(every) == []  # slugs are per tenant: pick a tenant first
    # Over every tenant the slug's rows add up: A's search 15 + B's 7 requests.
    assert [row[2:4] for row in _tables(every)[USAGE_TABLE]] == [
        ["(none)", "2"], ["eval", "3"], ["search", "22"],
    ]  # fmt: skip
    of_b = operator.get(f"/usage/{PERIOD}&tenant=tenant-b&project=search&format=csv")
    assert [line[2:3] + line[4:5] + line[9:10] for line in _csv(of_b)[1:]] == [
        ["search", "7", "7000"]
    ]
    assert _picker(operator.get(f"/usage/{PERIOD}&tenant=tenant-b")) == ["", "search", "(none)"]


# ---------------------------------------------------------------- public status page


def test_status_page_shows_only_incidents_public_to_everyone(client, tenant_a, users):
    from metering.services.sla.incidents import incident_create

    llama = make_deployment(model="llama-70b", pool="h100-a")
    llama.pool.in_service_from = datetime(2025, 1, 1, tzinfo=UTC)  # served all 90 days
    llama.pool.save()
    now = clock.now()
    incident_create(
        title="Acme batch jobs stalled",
        severity="sev2",
        impact="major_outage",
        deployments=[llama],
        tenants=[tenant_a],
        started_at=now - timedelta(hours=2),
        resolved_at=now - timedelta(hours=1),
        by=None,
        now=now,
    )
    incident_create(
        title="Llama 503s for everyone",
        severity="sev1",
        impact="partial_outage",
        deployments=[llama],
        started_at=now - timedelta(minutes=30),
        by=None,
        now=now,
    )

    html = client.get("/status/").content.decode()

    assert "Llama 503s for everyone" in html
    assert "Acme batch jobs stalled" not in html
    assert "affected some customers" not in html
    assert "Partial outage" in html and "Major outage" not in html
    # 90 days up to 10:00 today: 7,725,600 s; the public 30 min of partial outage: 540 s
    assert '<span class="uptime-figure">99.99% uptime</span>' in html
    assert "counts the incidents that affected every customer" in html

    # A member of the tenant the first incident named sees it too, and counts it: another
    # 3,600 s down at full weight, 4,140 s in all: 99.946%, shown 99.94% (never rounded up).
    client.force_login(users["tenant"])
    own = client.get("/status/").content.decode()
    assert "Acme batch jobs stalled" in own and "Llama 503s for everyone" in own
    assert '<span class="uptime-figure">99.94% uptime</span>' in own
    assert f"Status for {tenant_a.name}" in own


def test_metering_page_says_each_pools_service_life(session_client, users, deployment):
    """A pool with an in-service date and a retirement, and one never seen: the page says
    which time counts as capacity (kpis.md section 0)."""
    from metering.models import Pool

    pool = deployment.pool
    pool.in_service_from = datetime(2026, 2, 1, tzinfo=UTC)
    pool.retired_at = datetime(2026, 6, 1, tzinfo=UTC)
    pool.save()
    Pool.objects.create(slug="l40s", name="L40S hall", gpu_type="L40S", gpu_count=4)

    text = _text(session_client(users["operator"]).get("/metering/" + PERIOD))

    assert "In service from 2026-02-01 00:00 UTC until 2026-06-01 00:00 UTC (retired)" in text
    assert "Not in service yet: no capacity sample or usage" in text


def _capacity_busy(response, pool: str) -> list[int]:
    """The busy line of a pool's capacity chart on the metering page."""
    figure = re.search(rf'id="capacity-{pool}" class="chart" data-figure="([^"]*)"', response.text)
    (busy,) = [t for t in json.loads(unescape(figure[1]))["data"] if t["name"].endswith("busy")]
    return busy["y"]


def test_metering_pages_capacity_chart_shows_a_sample_stored_again_with_other_figures(
    session_client, users, deployment
):
    """The capacity chart is kept in the cache under the samples it draws: a sample posted
    again with other figures (the same count, the same times) is drawn at the next view,
    also once the change log is pruned past that change."""
    from metering.models import UsageChange
    from metering.services.factory import CapacityIn, capacity_upsert
    from portal.pipeline import LOG_CONSUMERS, log_consume, log_prune, log_read

    pool, client = deployment.pool, session_client(users["operator"])

    def store(*busy: int) -> None:
        capacity_upsert(samples=[
            CapacityIn(pool=pool, time=HOUR_10 + timedelta(minutes=15 * i), gpus_installed=8,
                       gpus_healthy=8, gpus_busy=b)
            for i, b in enumerate(busy)
        ])  # fmt: skip

    def pruned() -> None:  # rating and measurement read the log; its owner prunes it
        for consumer in LOG_CONSUMERS["metering.usage"]:
            log_consume(log_read(UsageChange, consumer=consumer, log="metering.usage"))
        log_prune(UsageChange, log="metering.usage")
        assert not UsageChange.objects.exists()

    def busy() -> list[int]:
        return _capacity_busy(client.get("/metering/" + PERIOD), pool.slug)

    store(2, 3, 4)
    pruned()
    assert busy() == [2, 3, 4]
    store(2, 7, 4)
    assert busy() == [2, 7, 4]
    store(1, 7, 4)
    pruned()
    assert busy() == [1, 7, 4]
    store(1, 7, 5)
    pruned()
    assert busy() == [1, 7, 5]


def test_capacity_stamps_of_every_pool_read_together_are_each_pools_own(deployment):
    """The metering page reads every pool's capacity stamp at once: for each pool the count,
    first and last time of its samples in the period and its last capacity change, or,
    once pruned, where every consumer has read the log up to; a pool without samples
    has none. Each is what the pool's stamp read alone says."""
    from metering.models import Pool, UsageChange
    from metering.selectors.usage import capacity_stamp, capacity_stamps
    from metering.services.factory import CapacityIn, capacity_upsert
    from portal.periods import Period
    from portal.pipeline import LOG_CONSUMERS, log_consume, log_prune, log_read, log_read_by_all

    a = deployment.pool
    b = make_deployment(model="qwen", pool="h200-a").pool
    empty = Pool.objects.create(slug="l40s", name="L40S hall", gpu_type="L40S", gpu_count=4)

    def store(pool, *minutes: int) -> None:
        capacity_upsert(samples=[
            CapacityIn(pool=pool, time=HOUR_10 + timedelta(minutes=m), gpus_installed=8,
                       gpus_healthy=8, gpus_busy=m % 8)
            for m in minutes
        ])  # fmt: skip

    store(b, 0, 15, 30, 45)
    store(b, 60 * 20)  # 06:00 on 2 March: after the period
    for consumer in LOG_CONSUMERS["metering.usage"]:
        log_consume(log_read(UsageChange, consumer=consumer, log="metering.usage"))
    log_prune(UsageChange, log="metering.usage")
    read_by_all = UsageChange.objects.order_by("-id").values_list("id", flat=True).first()
    assert read_by_all is None  # all pruned: b's last change is where the log was read to
    store(a, -30, 45)  # 09:30 and 10:45 on 1 March
    store(a, 45)  # 10:45 again, other figures: a later change
    last_a = UsageChange.objects.filter(pool=a).order_by("-id").values_list("id", flat=True)[0]
    pruned_to = log_read_by_all(log="metering.usage")
    period = Period(datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 2, tzinfo=UTC))

    stamps = capacity_stamps(pools=[a, b, empty], period=period)

    assert stamps == {
        a.pk: (2, HOUR_10 - timedelta(minutes=30), HOUR_10 + timedelta(minutes=45), last_a),
        b.pk: (4, HOUR_10, HOUR_10 + timedelta(minutes=45), pruned_to),
        empty.pk: (0, None, None, pruned_to),
    }
    assert pruned_to > 0 and last_a > pruned_to
    for pool in (a, b, empty):
        assert capacity_stamp(pool=pool, period=period) == stamps[pool.pk]


def test_usage_by_pool_sums_each_pool_and_model_over_whole_and_part_days(tenant_a, tenant_b):
    """Two models on one pool and one on another; a whole day (the daily rollups) and two
    hours of the next (the hourly ones): each pool and model's sums, in that order."""
    from metering.selectors.usage import usage_by_pool
    from portal.periods import Period

    llama = make_deployment()
    mistral = make_deployment(model="mistral-large")  # a second model on h100-a
    qwen = make_deployment(model="qwen3", pool="h200-a")
    rows = [
        (tenant_a, llama, HOUR_10, 100, 7),
        (tenant_b, llama, HOUR_11, 20, 1),
        (tenant_a, mistral, HOUR_10, 3, 0),
        (tenant_a, qwen, HOUR_10, 50, 2),
        (tenant_b, llama, HOUR_10 + timedelta(hours=15), 4000, 9),  # 1:00 on 2 March
        (tenant_b, qwen, HOUR_10 + timedelta(hours=17), 600, 0),  # 3:00 on 2 March: out
    ]
    for tenant, deployment, hour, requests, errors in rows:
        make_hourly_usage(tenant, deployment, hour, requests=requests, errors=errors,
                          output_tokens=10 * requests)  # fmt: skip

    period = Period(datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 2, 2, tzinfo=UTC))
    got = [
        (r["deployment__pool__slug"], r["deployment__model__slug"], r["requests"], r["errors"],
         r["output_tokens"])
        for r in usage_by_pool(period=period)
    ]  # fmt: skip

    assert got == [
        ("h100-a", "llama-70b", 4120, 17, 41200),
        ("h100-a", "mistral-large", 3, 0, 30),
        ("h200-a", "qwen3", 50, 2, 500),
    ]
