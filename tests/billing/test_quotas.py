"""Projects' quotas (kpis.md 3e): `budget` rules scoped to a project, a month or a day, soft
or hard; their thresholds fire once a period as signed webhooks; the budget read's
`blocked` and `blocked_by` (a tenant's hard budget blocks all its projects); `unknown`,
never `ok`, while rated usage lags.

The world: now is 16 December 2026 10:00 UTC; tenant-a's project alpha used 400,000 input
and 450,000 output tokens on 3 December (850,000: 85 % of a 1,000,000-token quota), its
(none) 10 M and 10 M the same day, at 0.88 per million less 10 %."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.selectors.budget import budget_answer, budgets_read
from billing.services.rating import rated_usage_update
from metering.services.usage.rollup import usage_fold
from portal import clock
from portal.alerts import alerts_evaluate
from portal.models import AlertRule, Delivery, Event
from tests.billing.factories import M, make_contract, make_priced_model, post_usage

pytestmark = pytest.mark.both_backends

DEC_3 = "2026-12-03T00:00:00Z"


@pytest.fixture
def used(admin_api, tenant_a, now):
    make_priced_model()
    make_contract(tenant_a, discount_pct=Decimal(10))
    post_usage(
        admin_api,
        [
            {"id": "a1", "time": DEC_3, "input_tokens": 400_000, "output_tokens": 450_000,
             "project": "alpha"},
            {"id": "n1", "time": DEC_3, "input_tokens": 10 * M, "output_tokens": 10 * M},
        ],
    )  # fmt: skip


@pytest.fixture
def member(users, token_client):
    return token_client(users["tenant"], scopes=["read", "notify"])


def _rule(client, **body):
    response = client.post("/api/v1/alert-rules", {"kind": "budget", **body}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def _read(client, project=""):
    query = f"?project={project}" if project else ""
    response = client.get(f"/api/v1/tenants/tenant-a/budget{query}")
    assert response.status_code == 200, response.json()
    return response.json()


def test_a_project_token_quota_fires_80_and_100_once_each_as_webhooks(used, member, admin_api, now):
    endpoint = member.post(
        "/api/v1/webhook-endpoints",
        {"url": "https://hooks.example.com/a", "event_types": ["budget.threshold_reached"]},
        format="json",
    )
    assert endpoint.status_code == 201, endpoint.json()
    rule = _rule(
        member, scope={"project": "alpha"}, params={"tokens": 1_000_000, "thresholds": [80, 100]}
    )
    assert (rule["tenant"], rule["scope"], rule["params"]["period"], rule["params"]["enforce"]) == (
        "tenant-a",
        {"tenant": "tenant-a", "project": "alpha"},  # the scope names its tenant too
        "month",
        "soft",
    )

    read = _read(member, "alpha")["project"]["budgets"][0]
    # 850,000 of 1,000,000 (the (none)'s 20 M are not alpha's): 85 %; projected
    # 850,000 × 744 h / 370 h = 1,709,189.18… → 1,709,189.
    assert (read["state"], read["spent"], read["projected"], read["reached"]) == (
        "warning",
        850_000,
        1_709_189,
        [80],
    )
    assert alerts_evaluate(now=now)["fired"] == 1
    assert alerts_evaluate(now=now)["fired"] == 0  # once a month
    post_usage(
        admin_api,
        [{"id": "a2", "time": "2026-12-15T00:00:00Z", "input_tokens": 0,
          "output_tokens": 150_000, "project": "alpha"}],
    )  # fmt: skip
    assert alerts_evaluate(now=now)["fired"] == 1  # 1,000,000: 100 %
    assert alerts_evaluate(now=now)["fired"] == 0

    reached = Event.objects.filter(type="budget.threshold_reached").order_by("pk")
    assert [e.data["threshold"] for e in reached] == ["80", "100"]
    assert reached[0].summary == (
        "Tenant A project alpha reached 80% of its December 2026 budget: 850,000 of 1,000,000 "
        "tokens spent, 1,709,189 projected"
    )
    webhooks = Delivery.objects.filter(channel=Delivery.Channel.WEBHOOK, endpoint__isnull=False)
    assert sorted(d.event.data["threshold"] for d in webhooks) == ["100", "80"]


def test_hard_budgets_block_their_project_and_the_tenants_blocks_every_project(
    used, member, admin_api
):
    post_usage(admin_api, [{"id": "b1", "time": DEC_3, "input_tokens": 1, "output_tokens": 0,
                            "project": "beta"}])  # fmt: skip
    _rule(member, scope={"project": "alpha"}, params={"tokens": 800_000, "enforce": "hard"})
    _rule(member, scope={"project": "beta"}, params={"tokens": 800_000, "enforce": "hard"})
    alpha, beta = _read(member, "alpha"), _read(member, "beta")
    assert (alpha["blocked"], alpha["blocked_by"]) == (
        True,
        {"tenant": "tenant-a", "project": "alpha", "period": "month"},
    )
    assert (beta["blocked"], beta["blocked_by"], beta["project"]["blocked"]) == (False, None, False)
    assert beta["state"] == "none"  # the tenant has no monthly budget of its own

    # The tenant's: 20,850,001 tokens of 20,000,000, hard: every project blocked, by it.
    _rule(member, params={"tokens": 20 * M, "enforce": "hard"})
    for project in ("alpha", "beta", ""):
        read = _read(member, project)
        assert (read["state"], read["blocked"], read["blocked_by"]) == (
            "exceeded",
            True,
            {"tenant": "tenant-a", "period": "month"},
        ), project
    # A soft budget exceeded blocks nothing.
    duplicate = member.post(
        "/api/v1/alert-rules",
        {"kind": "budget", "scope": {"project": "beta"}, "params": {"tokens": 5}},
        format="json",
    )
    assert (duplicate.status_code, duplicate.json()["errors"][0]["field"]) == (409, "tenant")


def test_a_day_quota_counts_the_day_and_a_soft_one_blocks_nothing(used, member, admin_api):
    post_usage(
        admin_api,
        [{"id": "a3", "time": "2026-12-16T09:00:00Z", "input_tokens": 0,
          "output_tokens": 100_000, "project": "alpha"}],
    )  # fmt: skip
    _rule(member, scope={"project": "alpha"}, params={"tokens": 80_000, "period": "day"})
    read = _read(member, "alpha")
    [day] = read["project"]["budgets"]
    # Today's 100,000 of 80,000 (the 850,000 of 3 December are another day's); projected
    # over the day's 10 elapsed hours: 100,000 × 24 / 10 = 240,000.
    assert (day["period"], day["period_start"], day["spent"], day["projected"]) == (
        "day",
        "2026-12-16T00:00:00Z",
        100_000,
        240_000,
    )
    assert (day["state"], read["blocked"]) == ("exceeded", False)


def test_the_budget_read_with_a_project_takes_2_queries(used, member, tenant_a):
    """What a gateway asks before each request: the project with the rules, then the
    rating's mark with the fold's backlog and the cut (not the whole window of the month),
    the tenant-month's rated totals and one read of its rated usage for the tenant's token
    budget and the project's day quota both, in one statement (its own snapshot: no
    transaction opened; on SQLite three queries in the read's snapshot)."""
    _rule(member, params={"tokens": 30 * M})
    _rule(member, scope={"project": "alpha"}, params={"amount": "100.00", "period": "day"})
    with CaptureQueriesContext(connection) as queries:
        read = budget_answer(tenant=tenant_a, project="alpha")
    expected = 2 if connection.vendor == "postgresql" else 4
    assert len(queries) == expected, [query["sql"] for query in queries.captured_queries]
    # The tenant's 20,850,000 tokens; alpha's day (16 December) has none yet.
    assert (read["spent"], read["project"]["budgets"][0]["spent"]) == (20_850_000, "0.00")


def test_a_project_quota_reads_unknown_while_rating_lags(used, member, now):
    _rule(member, scope={"project": "alpha"}, params={"amount": "100.00", "enforce": "hard"})
    read = _read(member, "alpha")["project"]["budgets"][0]
    # alpha's 850,000 tokens at 0.88 per million less 10 %: 0.6732 → 0.67.
    assert (read["state"], read["spent"]) == ("ok", "0.67")

    clock.clock_set(now + timedelta(minutes=16))
    usage_fold()  # metered until 10:16, rated until 10:00
    lagging = _read(member, "alpha")
    assert lagging["project"]["budgets"][0]["state"] == "unknown"
    assert lagging["blocked"] is False
    rated_usage_update()
    assert _read(member, "alpha")["project"]["budgets"][0]["state"] == "ok"


def test_project_quotas_name_the_tenants_own_projects_only(used, member, finance, tenant_b):
    cases = [
        (member, {"scope": {"project": "nope"}}, "scope.project"),
        (member, {"scope": {"project": "alpha"}, "params": {"tokens": 5, "period": "week"}},
         "params.period"),
        (member, {"scope": {"project": "alpha"}, "params": {"tokens": 5, "enforce": "x"}},
         "params.enforce"),
        (finance, {"tenant": "tenant-b", "scope": {"project": "alpha"}}, "scope.project"),
    ]  # fmt: skip
    for client, body, field in cases:
        body = {"kind": "budget", "params": {"tokens": 5}, **body}
        response = client.post("/api/v1/alert-rules", body, format="json")
        assert (response.status_code, response.json()["errors"][0]["field"]) == (400, field), body
    refused = member.get("/api/v1/tenants/tenant-a/budget?project=nope")
    assert (refused.status_code, refused.json()["errors"][0]["field"]) == (400, "project")
    assert member.get("/api/v1/tenants/tenant-b/budget?project=alpha").status_code == 404


def _one_by_one(tenant, project: str, now) -> dict:
    """The budget read made the plain way: each rule read alone (budgets_read of one rule,
    its project looked up by slug), `blocked_by` the first hard one exceeded, the tenant's
    before its projects'."""
    rules = AlertRule.objects.filter(kind="budget", tenant=tenant, enabled=True)
    rules = [r for r in rules if (r.scope or {}).get("project", "") in ("", project)]
    rules.sort(key=lambda r: (bool((r.scope or {}).get("project")), r.one_key))
    budgets = [budgets_read([rule], now=now)[0] for rule in rules]
    blocking = [b for b in budgets if b.blocked]
    return {
        "budgets": [b.as_json() for b in budgets],
        "blocked": bool(blocking),
        "blocked_by": blocking[0].scope_json() if blocking else None,
        "own": [b.as_json() for b in budgets if project and b.project == project],
    }


def test_the_budget_read_answers_as_each_rule_read_alone_in_6_queries_over_http(
    used, member, admin_api, tenant_a, now
):
    """A tenant's hard monthly budget and day token budget, alpha's hard monthly token quota
    and soft day money quota, beta's monthly quota: every read (the tenant, alpha, beta)
    answers what each rule read alone answers, before and while rating lags; over HTTP in
    3 queries (the token with its user; the project with the rules; the rating's mark with
    the fold's and the cut, the tenant-month's totals and the rated usage; on SQLite these
    three are 3 queries: 5)."""
    post_usage(
        admin_api,
        [{"id": "a4", "time": "2026-12-16T09:00:00Z", "input_tokens": 0,
          "output_tokens": 100_000, "project": "alpha"},
         {"id": "b4", "time": "2026-12-16T08:00:00Z", "input_tokens": 7, "output_tokens": 0,
          "project": "beta"}],
    )  # fmt: skip
    _rule(member, params={"amount": "16.00", "enforce": "hard"})
    _rule(member, params={"tokens": 150_000, "period": "day"})
    _rule(member, scope={"project": "alpha"}, params={"tokens": M, "enforce": "hard"})
    _rule(member, scope={"project": "alpha"}, params={"amount": "0.05", "period": "day"})
    _rule(member, scope={"project": "beta"}, params={"tokens": 10, "thresholds": [50]})

    with CaptureQueriesContext(connection) as queries:  # the token's last use written
        alpha = _read(member, "alpha")  # by the rules' requests (at most once a minute)
    expected = 3 if connection.vendor == "postgresql" else 5
    assert len(queries) == expected, [query["sql"] for query in queries.captured_queries]
    # The tenant's month, its lines at 0.88 per million less 10 % rounded each: input
    # 10,400,007 × 0.792 / 1M = 8.2368… → 8.24, output 10,550,000 → 8.3556 → 8.36: 16.60,
    # past 16.00 and hard: every project blocked, by the tenant. Today 100,007 tokens of
    # 150,000 (66.7 %: ok); alpha's month 950,000 of 1,000,000; alpha's day 100,000 ×
    # 0.792 / 1M = 0.0792 → 0.08 of 0.05.
    assert (alpha["state"], alpha["spent"], alpha["blocked_by"]) == (
        "exceeded",
        "16.60",
        {"tenant": "tenant-a", "period": "month"},
    )
    assert [(b["project"], b["period"], b["spent"], b["state"]) for b in alpha["budgets"]] == [
        (None, "month", "16.60", "exceeded"),
        (None, "day", 100_007, "ok"),
        ("alpha", "month", 950_000, "warning"),
        ("alpha", "day", "0.08", "exceeded"),
    ]
    for lagging in (False, True):
        if lagging:
            clock.clock_set(now + timedelta(minutes=16))
            usage_fold()  # metered until 10:16, rated until 10:00: every budget unknown
        for project in ("", "alpha", "beta"):
            read, plain = _read(member, project), _one_by_one(tenant_a, project, clock.now())
            assert read["budgets"] == plain["budgets"], project
            assert (read["blocked"], read["blocked_by"]) == (plain["blocked"], plain["blocked_by"])
            whole = {
                k: v for k, v in plain["budgets"][0].items() if k not in ("project", "blocked")
            }
            assert {k: read[k] for k in whole} == whole  # the tenant's monthly budget
            if project:
                assert read["project"]["budgets"] == plain["own"]
            states = {b["state"] for b in read["budgets"]}
            assert states == {"unknown"} if lagging else "unknown" not in states
    assert (read["blocked"], read["spent"]) == (False, None)  # unknown blocks nothing


def test_the_reads_prepared_once_answer_what_the_orm_answers(
    used, member, admin_api, tenant_a, tenant_b, now
):
    """The marks, the tenant-months' totals and the rated usage sums read in one statement
    built once (prepared on PostgreSQL), and the rules with a project's id, against the
    ORM's queries: tenant-a's alpha and beta and (none) over several days and today, paid,
    tenant-b's without a contract (not sold), every tenant's or some projects' rows, and the
    marks before and while the fold lags the rating."""
    from billing.models import RatedMark
    from billing.selectors.budget import (
        _marks,
        _marks_row,
        _month_read,
        _month_read_of_orm,
        _rules,
        _rules_read,
    )
    from portal.bulk import constant_rows
    from portal.models import Project

    post_usage(
        admin_api,
        [{"id": "t1", "time": "2026-12-16T09:10:00Z", "input_tokens": 30, "output_tokens": 70,
          "project": "alpha"},
         {"id": "t2", "time": "2026-12-16T08:00:00Z", "input_tokens": 5, "output_tokens": 6,
          "project": "beta"},
         {"id": "t3", "time": "2026-12-15T23:59:59Z", "input_tokens": 1, "output_tokens": 2}],
    )  # fmt: skip
    post_usage(admin_api, [{"id": "b1", "time": "2026-12-16T07:00:00Z", "input_tokens": 9,
                            "output_tokens": 9, "project": "gamma"}], tenant="tenant-b")  # fmt: skip
    ids = dict(Project.objects.values_list("slug", "pk"))
    month, day = now.replace(day=1, hour=0), now.replace(hour=0)

    def read(reader, **args) -> tuple:
        marks, money, sums = reader(**args)
        money = {
            pk: (r.currency, r.usage_amount, r.promotions, r.promotion_rate)
            for pk, r in money.items()
        }
        return marks, money, sorted(sums)

    both = [tenant_a.pk, tenant_b.pk]
    for projects in (None, [ids["alpha"]], [ids["alpha"], ids["beta"], ids["gamma"]], []):
        for tenants, of_usage in (([tenant_a.pk], [tenant_a.pk]), (both, both), (both, [])):
            args = {"tenants": tenants, "of_usage": of_usage, "projects": projects,
                    "month": month, "day": day}  # fmt: skip
            assert read(_month_read, **args) == read(_month_read_of_orm, **args), args
    args.update(of_usage=both, projects=None)
    marks, money, sums = read(_month_read, **args)
    assert marks == _marks()
    # tenant-a's month at 0.88 per million less 10 %, its lines rounded each: input
    # 10,400,036 × 0.792 / 1M = 8.2368… → 8.24, output 10,450,078 → 8.2764… → 8.28.
    assert money[tenant_a.pk][:2] == ("USD", Decimal("16.52"))
    alpha = next(row for row in sums if row[1] == ids["alpha"])
    # 850,000 tokens on 3 December and 100 today, all paid: 850,100 × 0.792 / 1M.
    assert (alpha[2], alpha[4], alpha[3].quantize(Decimal("0.0000001"))) == (
        850_100,
        100,
        Decimal("0.6732792"),
    )

    _rule(member, params={"amount": "16.00", "enforce": "hard", "thresholds": [50, 100]})
    _rule(member, scope={"project": "alpha"}, params={"tokens": M, "period": "day"})
    off = _rule(member, scope={"project": "beta"}, params={"tokens": 10})
    AlertRule.objects.filter(pk=off["id"]).update(enabled=False)
    (rules, alpha_id), expected = _rules_read(tenant_a, "alpha"), list(_rules(tenant_a))
    assert len(expected) == 2
    assert [
        ([(f.attname, getattr(r, f.attname)) for f in AlertRule._meta.concrete_fields], r.tenant)
        for r in rules
    ] == [
        ([(f.attname, getattr(r, f.attname)) for f in AlertRule._meta.concrete_fields], r.tenant)
        for r in expected
    ]
    assert alpha_id == ids["alpha"]
    assert (_rules_read(tenant_a)[1], _rules_read(tenant_a, "gamma")[1]) == (None, None)
    assert _rules_read(tenant_b, "gamma") == ([], ids["gamma"])  # no rule: the project still

    assert constant_rows(RatedMark, _marks_row) == list(_marks_row())
    clock.clock_set(now + timedelta(minutes=16))
    usage_fold()
    assert constant_rows(RatedMark, _marks_row) == list(_marks_row())
    assert read(_month_read, **args) == read(_month_read_of_orm, **args)
    assert read(_month_read, **args)[0] == _marks()
