"""SLA credits: posted once per tenant-month at month close, billed on the next invoice."""

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing.models import Invoice, LedgerTransaction, SlaCredit
from billing.selectors.ledger import account_balances
from billing.services.close import close_run
from billing.services.invoices.draft import invoice_draft
from metering.models import Deployment
from metering.services.sla.incidents import incident_create
from metering.services.usage.rollup import usage_fold
from tests.billing.factories import (
    APRIL,
    MARCH,
    MARCH_USAGE,
    M,
    line_amounts,
    make_contract,
    make_march_usage,
    make_priced_model,
    post_usage,
    usage_event,
)

pytestmark = pytest.mark.both_backends
# March has 31 days: 2,678,400 s; below 99.9% uptime means more than 2,678.4 s down.


@pytest.fixture
def march(admin_api, tenant_a):
    """Tenant A's March usage at list prices; the operator's API client."""
    make_priced_model()
    make_march_usage(admin_api, tenant_a, "s1")  # 8.80 + 8.80 = 17.60 of usage lines
    return admin_api


def _outage(seconds: int):
    start = datetime(2026, 3, 10, 12, tzinfo=UTC)
    incident_create(
        title="Llama pool down",
        severity="sev1",
        impact="major_outage",
        started_at=start,
        resolved_at=start + timedelta(seconds=seconds),
        deployments=[Deployment.objects.get()],
        by=None,
    )


def test_credit_is_posted_once_and_billed_next_month(march):
    _outage(3000)  # 1 - 3000/2678400 = 0.99888 < 0.999: 10%

    close_run(month_start=MARCH)
    close_run(month_start=MARCH)

    [credit] = SlaCredit.objects.all()
    assert (credit.credit_pct, credit.base_amount, credit.amount) == (
        Decimal("10"),
        Decimal("17.60"),
        Decimal("1.76"),
    )
    assert LedgerTransaction.objects.filter(kind="sla_credit").count() == 1
    balances = account_balances()
    assert balances[("contra:sla-credits", "USD")] == Decimal("1.76")
    assert balances[("liability:sla-credits:tenant-a", "USD")] == Decimal("-1.76")

    post_usage(march, [usage_event("s2", "2026-04-02T00:00:00Z", 10 * M)])
    [april] = close_run(month_start=APRIL).issued

    assert line_amounts(april) == [
        ("usage", Decimal("8.80")),
        ("sla_credit", Decimal("-1.76")),
    ]
    assert april.lines.get(kind="sla_credit").for_month == MARCH
    assert april.total == Decimal("7.04")
    assert account_balances()[("liability:sla-credits:tenant-a", "USD")] == 0
    credit.refresh_from_db()
    assert credit.invoice == april


def test_uptime_at_the_target_earns_no_credit(march):
    _outage(2678)  # 1 - 2678/2678400 = 0.99900015 ≥ 0.999

    close_run(month_start=MARCH)

    [credit] = SlaCredit.objects.all()
    assert (credit.credit_pct, credit.amount, credit.transaction) == (Decimal(0), Decimal(0), None)
    assert not LedgerTransaction.objects.filter(kind="sla_credit").exists()


def test_contract_credit_tiers_apply(march, tenant_a):
    make_contract(
        tenant_a,
        effective_from=datetime(2026, 2, 1, tzinfo=UTC),
        credit_tiers=[["0.9999", "5"], ["0.999", "50"]],
    )
    _outage(3000)  # below both thresholds: the highest matching percent wins

    close_run(month_start=MARCH)

    assert SlaCredit.objects.get().amount == Decimal("8.80")  # 50% of 17.60


def test_sla_api_reports_uptime_and_credit(march, users, make_user, tenant_b):
    from rest_framework.test import APIClient

    _outage(3000)
    client = APIClient()
    client.force_login(users["tenant"])
    url = "/api/v1/sla?from=2026-03-01&to=2026-04-01"

    estimate = client.get(url).json()["results"]
    close_run(month_start=MARCH)
    posted = client.get(url).json()["results"]

    assert [row["tenant"] for row in posted] == ["tenant-a"]  # a member sees their own
    row = posted[0]
    assert row["month"] == "2026-03"
    assert row["uptime"] == pytest.approx(1 - 3000 / 2_678_400, abs=1e-12)
    assert (row["target"], row["credit_pct"], row["credit_amount"]) == (0.999, "10.0000", "1.76")
    assert (estimate[0]["is_posted"], row["is_posted"]) == (False, True)
    assert estimate[0]["credit_amount"] == "1.76"
    assert client.get(url + "&tenant=tenant-b").status_code == 404


def test_sla_reads_show_the_base_as_last_rated_and_the_close_posts_it_exact(march, users):
    """A page or API read of the SLA never runs the rating: it shows the credit base as
    billing's rate job last stored it. The month's close rates what changed first, so the
    credit it posts is exact."""
    from unittest.mock import patch

    from rest_framework.test import APIClient

    from billing.selectors.rating.inputs import month_rate

    _outage(3000)  # 10%
    late = march.post(
        "/api/v1/usage/events",
        [{"id": "s2", "tenant": "tenant-a", "model": "llama-70b", "cached_tokens": 0,
          **MARCH_USAGE}]
    )  # fmt: skip
    assert late.status_code == 200
    usage_fold()  # folded; the rate job has not run since
    client = APIClient()
    client.force_login(users["finance"])
    url = "/api/v1/sla?from=2026-03-01&to=2026-04-01"
    refused = AssertionError("a read ran the rating")
    with patch("billing.services.rating.month_rate", side_effect=refused):
        estimate = client.get(url).json()["results"]
        page = client.get("/billing/sla/?month=2026-03")
    with patch("billing.services.rating.month_rate", wraps=month_rate) as rating:
        close_run(month_start=MARCH)

    assert estimate[0]["credit_amount"] == "1.76"  # 10% of the 17.60 last rated
    assert page.status_code == 200 and "1.76 USD" in page.content.decode()
    assert rating.called
    [credit] = SlaCredit.objects.all()
    assert (credit.base_amount, credit.amount) == (Decimal("35.20"), Decimal("3.52"))
    assert client.get(url).json()["results"][0]["credit_amount"] == "3.52"  # posted


def test_sla_page_shows_missed_target_and_the_incident(march, client, users):
    _outage(3000)
    close_run(month_start=MARCH)
    client.force_login(users["finance"])
    body = client.get("/billing/sla/?month=2026-03").content.decode()
    assert "99.888%" in body
    assert "missed" in body
    assert "1.76 USD" in body


def test_sla_page_opens_on_the_last_month_with_usage(march, client, users):
    """Today is 2026-12-16 and the only usage is in March: the page opens on March, not on
    an empty December; it is in the navigation of finance."""
    _outage(3000)
    client.force_login(users["finance"])

    body = client.get("/billing/sla/").content.decode()

    assert "99.888%" in body and "missed" in body
    assert 'href="/billing/sla/"' in body  # the navigation links it


@pytest.mark.parametrize("now", [datetime(2026, 3, 20, 10, tzinfo=UTC)], indirect=True)
def test_an_incident_has_one_impact_label_on_every_page(now, march, client, users):
    """Opened as degraded, worsened to a partial outage, resolved: every list names it by its
    worst impact, Partial outage (the tenant pages said Degraded, the status page Partial)."""
    from metering.services.sla.incidents import incident_update_add

    start = datetime(2026, 3, 10, 12, tzinfo=UTC)
    incident = incident_create(title="Llama slow", severity="sev2", impact="degraded",
                               started_at=start, deployments=[Deployment.objects.get()],
                               by=None)  # fmt: skip
    incident_update_add(incident=incident, status="identified", impact="partial_outage",
                        time=start + timedelta(minutes=30), by=None)  # fmt: skip
    incident_update_add(incident=incident, status="resolved", time=start + timedelta(hours=1),
                        by=None)  # fmt: skip
    member = users["tenant"]
    pages = {}
    for user, path in (
        (member, "/"),
        (member, "/billing/sla/"),
        (users["operator"], "/incidents/"),
    ):
        client.force_login(user)
        pages[path] = client.get(path).content.decode()
    client.logout()
    pages["/status/"] = client.get("/status/").content.decode()

    for path, page in pages.items():
        assert "Llama slow" in page, path
        at = page.rindex("Llama slow")
        listed = page[at - 300 : at + 600]  # the incident's row, card or history entry
        assert "Partial outage" in listed, path
        assert "Degraded performance" not in listed, path


def test_a_tenants_months_without_usage_read_no_data_not_met(march, client, users):
    """Today is 2026-12-16 and tenant A used the factory only in March: its last six months
    have no usage, so none of them reads as a met SLA."""
    client.force_login(users["finance"])

    body = client.get("/billing/sla/?tenant=tenant-a").content.decode()

    assert body.count("no usage: no data") == 6
    assert ">met<" not in body


def test_sla_compares_attainment_with_the_slo_target_and_uptime_with_its_own(
    march, users, tenant_a
):
    """Without a contract target, the deployment's (0.99, the default); with one, the
    contract's. Each comparison is labelled on the page: uptime against the uptime target,
    SLO attainment against the SLO target."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(users["finance"])
    url = "/api/v1/sla?from=2026-03-01&to=2026-04-01"

    before = client.get(url).json()["results"][0]
    make_contract(tenant_a, effective_from=datetime(2026, 2, 1, tzinfo=UTC),
                  slo_target=Decimal("0.995"))  # fmt: skip
    after = client.get(url).json()["results"][0]
    page = client.get("/billing/sla/?month=2026-03").content.decode()

    assert (before["slo_target"], after["slo_target"]) == (0.99, 0.995)
    assert before["target"] == after["target"] == 0.999  # the uptime target
    assert "Uptime target" in page and "SLO target" in page and "99.50%" in page
    assert after["slo_attainment"] == 1.0 and "SLO met" in page  # no latency: compliant
    assert "uptime met" in page


def test_a_draft_asked_for_again_is_the_same_draft_with_its_sla_credit(march, tenant_a):
    """The draft holds the March credit; asking again must find it current (not void it and
    draft again without the credit it held)."""
    _outage(3000)  # 10% of 17.60: 1.76
    close_run(month_start=MARCH)
    post_usage(march, [usage_event("s2", "2026-04-02T00:00:00Z", 10 * M)])

    first, created = invoice_draft(tenant=tenant_a, month_start=APRIL)
    again, created_again = invoice_draft(tenant=tenant_a, month_start=APRIL)

    assert (created, created_again, again) == (True, False, first)
    assert line_amounts(again) == [("usage", Decimal("8.80")), ("sla_credit", Decimal("-1.76"))]
    assert not Invoice.objects.filter(status="void").exists()
    assert SlaCredit.objects.get().invoice == first


def test_the_sla_history_offers_no_month_before_the_factory_was_in_service(march, client, users):
    """Today is 2026-12-16 and the factory's one pool is in service from 10 November: the
    tenant's history, the month picker and the tenant's home stop at November (months before it have no
    figures, kpis.md section 0), where they showed six months, four of them empty."""
    from metering.models import Pool

    Pool.objects.update(in_service_from=datetime(2026, 11, 10, tzinfo=UTC))
    client.force_login(users["finance"])

    history = client.get("/billing/sla/?tenant=tenant-a").content.decode()
    picker = client.get("/billing/sla/?month=2026-12").content.decode()

    assert history.count("no usage: no data") == 2  # December and November
    assert "2026-11" in history and "2026-10" not in history
    assert 'value="2026-11"' in picker and 'value="2026-10"' not in picker
    client.force_login(users["tenant"])
    home = client.get("/").content.decode()
    sla = home[home.index("<h2>SLA") : home.index("<h2>Invoices")]
    assert "2026-11" in sla and "2026-10" not in sla  # the home's three months: two here


@pytest.mark.parametrize("now", [datetime(2026, 3, 20, 10, tzinfo=UTC)], indirect=True)
def test_the_sla_chart_marks_the_month_in_progress_as_partial(now, march, client, users):
    """On 20 March 10:00 the tenant's history ends in a March of 19 days and 10 hours: its
    bar hatched and named "Mar 2026 (19 d)" as the investor view names a partial month (the
    axis said "Mar 2026" like a whole month's), and the page says what the hatching means."""
    import html
    import json
    import re

    client.force_login(users["finance"])
    body = client.get("/billing/sla/?tenant=tenant-a").content.decode()

    figure = json.loads(html.unescape(re.search(r'data-figure="([^"]*)"', body)[1]))
    [bars] = [trace for trace in figure["data"] if trace["name"] == "Uptime"]
    assert bars["x"][-1] == "Mar 2026 (19 d)"
    assert bars["marker"]["pattern"]["shape"][-1] == "/"
    assert set(bars["marker"]["pattern"]["shape"][:-1]) <= {""}
    assert "Hatched bar: Mar 2026 so far, 1 Mar – 20 Mar 10:00 UTC" in body


def _tier_rows(body: str) -> list[list[str]]:
    """The cells' text of each row of the page's table by service tier."""
    table = body.split('aria-label="Attainment by service tier"', 1)[1].split("</table>")[0]
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], flags=re.S)
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row,
                                                                    flags=re.S)] for row in rows]  # fmt: skip


@pytest.mark.parametrize("now", [datetime(2026, 3, 20, 10, tzinfo=UTC)], indirect=True)
def test_sla_page_shows_attainment_by_service_tier(now, march, client, users, tenant_b):
    """March so far: tenant A's standard request (march) and three priority ones of 1,000,
    3,000 and 4,000 output tokens, the last failed: 2 of 3 within SLO (66.67%), σ = 4,000 of
    8,000 standard tokens (50.00%); tenant B's flex request of 2,000 (100.00%, no latency
    SLO). Finance sees both tenants' tiers, as /api/v1/sla's by_tier; tenant A's member its
    own."""
    priority = [{**usage_event(f"p{n}", f"2026-03-10T0{n}:00:00Z", 0, out), "service_tier":
                 "priority", **({"status": "error"} if n == 3 else {})}
                for n, out in ((1, 1_000), (2, 3_000), (3, 4_000))]  # fmt: skip
    post_usage(march, priority)
    make_contract(tenant_b)
    post_usage(march, [{**usage_event("f1", "2026-03-11T00:00:00Z", 0, 2_000),
                        "service_tier": "flex"}], tenant="tenant-b")  # fmt: skip
    client.force_login(users["finance"])

    body = client.get("/billing/sla/?month=2026-03").content.decode()

    assert _tier_rows(body) == [
        ["Tenant A", "priority", "3", "2", "66.67%", "50.00%"],
        ["Tenant A", "standard", "1", "1", "100.00%", "100.00%"],
        ["Tenant B", "flex", "1", "1", "100.00%", "100.00%"],
    ]
    api = client.get("/api/v1/sla?tenant=tenant-a&from=2026-03-01T00:00:00Z").json()
    assert api["results"][0]["by_tier"]["priority"] == {
        "requests": 3, "compliant_requests": 2, "slo_attainment": 2 / 3, "sla_delivery": 0.5,
    }  # fmt: skip
    client.force_login(users["tenant"])
    assert _tier_rows(client.get("/billing/sla/").content.decode()) == [
        ["2026-03 (to date)", "priority", "3", "2", "66.67%", "50.00%"],
        ["2026-03 (to date)", "standard", "1", "1", "100.00%", "100.00%"],
    ]


def test_sla_page_shows_fifty_tenants_a_page_in_slug_order(march, client, users):
    """Every tenant in one table grew with the tenants (200: half a second); the page holds
    50 of them by slug, the pager the rest, and Tenant A's figures on its own page."""
    from portal.models import Tenant

    Tenant.objects.bulk_create(Tenant(slug=f"z-{n:02}", name=f"Z {n:02}") for n in range(60))
    _outage(3000)
    client.force_login(users["finance"])

    def listed(body: str) -> list[str]:
        return re.findall(r'<td><a href="\?tenant=([\w-]+)">', body)

    first = client.get("/billing/sla/?month=2026-03").content.decode()
    second = client.get("/billing/sla/?month=2026-03&page=2").content.decode()

    slugs = sorted(Tenant.objects.values_list("slug", flat=True))
    assert len(slugs) > 50
    assert listed(first) == slugs[:50] and listed(second) == slugs[50:]
    assert "Page 1 of 2" in first and "Page 2 of 2" in second
    assert "month=2026-03&amp;page=2" in first  # the pager keeps the month
    assert "99.888%" in first  # Tenant A's uptime on its page
