"""The forecast job (kpis.md 6b, architecture.md "Scheduled jobs"): every series read from
the published read models, fitted, stored; GET /api/v1/forecast and manage.py forecast."""

import io
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import numpy as np
import pytest
from django.conf import settings
from django.core.management import call_command

from flywheel.models import Forecast
from flywheel.selectors.plan import closed_until, series_read
from flywheel.services.plan import forecasts_update
from flywheel.tasks import forecast_task
from metering.models import Deployment
from metering.services.factory import VersionSpec, deployment_version_add
from tests.billing.factories import make_contract, make_priced_model, post_usage
from tests.metering.factories import make_deployment

LAST_CLOSED = date(2026, 12, 15)  # the test clock is 16 December 10:00


def _vector() -> list[int]:
    """kpis.md 6b's test vector: y_t = 1000 + 5t + 100 sin(2πt/7) + N(0, 20²) (numpy
    default_rng(7)), t = 0…119, as y_t × 10^6 tokens a day."""
    rng = np.random.default_rng(7)
    t = np.arange(120)
    y = 1000 + 5 * t + 100 * np.sin(2 * np.pi * t / 7) + rng.normal(0, 20, 120)
    return [round(v * 1e6) for v in y]


def _day(index: int, of: int) -> date:
    """The index-th of `of` days ending on the last closed day."""
    return LAST_CLOSED - timedelta(days=of - 1 - index)


@pytest.fixture
def factory(db, token_client, users, tenant_a):
    """llama-70b on h100-a: the test vector as output tokens, one event a day for 120 days,
    paid at 0.88 per million. Two small models on b200-a: 20 and 10 days of 1,000 tokens."""
    api = token_client(users["operator"], scopes=("admin", "ingest", "read"))
    make_priced_model()
    make_contract(tenant_a)
    events = [
        {"id": f"v{i}", "time": f"{_day(i, 120)}T12:00:00Z", "input_tokens": 0, "output_tokens": y}
        for i, y in enumerate(_vector())
    ]
    post_usage(api, events)
    for model, days in (("small-20", 20), ("small-10", 10)):
        make_deployment(model=model, pool="b200-a")
        short = [
            {"id": f"{model}-{i}", "time": f"{_day(i, days)}T12:00:00Z", "input_tokens": 0,
             "output_tokens": 1000 + 10 * i}
            for i in range(days)
        ]  # fmt: skip
        post_usage(api, short, model=model)
    return api


def test_forecast_job_stores_every_series_with_its_accuracy(factory):
    assert closed_until() == date(2026, 12, 16)
    forecast_task.apply(throw=True)
    stored = {(f.scope, f.metric): f for f in Forecast.objects.all()}
    scopes = {"factory", "h100-a", "b200-a", "model:llama-70b", "model:small-20", "model:small-10"}
    assert set(stored) == {(scope, metric) for scope in scopes for metric in ("tokens", "revenue")}
    for scope in ("factory", "h100-a", "model:llama-70b"):
        for metric in ("tokens", "revenue"):
            forecast = stored[(scope, metric)]
            assert forecast.method == "ets"
            assert forecast.history_start == date(2026, 8, 18)  # 120 closed days
            assert forecast.forecast_start == date(2026, 12, 16)
            assert len(forecast.points) == 90
            # the backtest of the 6b test vector, through ingestion, rating and the job
            assert forecast.origins == ["2026-10-28", "2026-11-04", "2026-11-11", "2026-11-18"]
            assert forecast.mape <= 0.03
            assert forecast.mape < forecast.baseline_mape
    assert stored[("model:small-20", "tokens")].method == "seasonal_naive_drift"
    short = stored[("model:small-10", "tokens")]
    assert (short.method, short.points, short.mape) == ("none", [], None)
    assert short.note == "not enough history: 10 closed days, at least 14 needed"


def test_forecast_job_is_safe_to_run_twice(factory):
    first = [(f.scope, f.metric, f.points) for f in forecasts_update()]
    second = [(f.scope, f.metric, f.points) for f in forecasts_update()]
    assert first == second
    assert Forecast.objects.count() == len(first) == 12


@pytest.mark.both_backends
def test_forecast_series_are_the_production_of_the_closed_days(factory):
    series = {(s.scope, s.metric): s for s in series_read(end=closed_until())}
    tokens = series[("model:llama-70b", "tokens")]
    assert (tokens.first_day, len(tokens.values)) == (date(2026, 8, 18), 120)
    assert tokens.values == [float(v) for v in _vector()]
    # realized revenue as rated: 0.88 per million output tokens, no allowance, no discount
    revenue = series[("model:llama-70b", "revenue")]
    assert revenue.values[0] == pytest.approx(_vector()[0] * 0.88 / 1e6)
    # the factory sums every model; a series starts on its first day with production
    assert series[("model:small-10", "tokens")].first_day == date(2026, 12, 6)
    factory_tokens = series[("factory", "tokens")].values
    assert factory_tokens[-1] == _vector()[-1] + 1000 + 10 * 19 + 1000 + 10 * 9


@pytest.mark.both_backends
def test_a_day_whose_w_in_changes_after_midnight_is_read_hour_by_hour(factory, users):
    # w_in 0 until 15 December 14:00, then 1: an event at 16:00 with 1 M uncached input
    deployment = Deployment.objects.get(slug="llama-70b@h100-a")
    deployment_version_add(
        deployment=deployment,
        effective_from=datetime(2026, 12, 15, 14, tzinfo=UTC),
        spec=VersionSpec(r_ref=Decimal(1000), w_in=Decimal(1)),
        by=None,
    )
    post_usage(
        factory,
        [{"id": "late", "time": "2026-12-15T16:00:00Z", "input_tokens": 10**6, "output_tokens": 0}],
    )
    series = {(s.scope, s.metric): s for s in series_read(end=closed_until())}
    # 12:00's output at w_in 0, 16:00's input at w_in 1 (the day's row would weigh it 0)
    assert series[("model:llama-70b", "tokens")].values[-1] == _vector()[-1] + 10**6


def test_forecast_api_reads_the_stored_forecast_for_staff_only(
    factory, make_user, client, tenant_a
):
    forecasts_update()
    client.force_login(make_user("investor", username="investor-forecast"))
    body = client.get("/api/v1/forecast?scope=model:llama-70b&metric=revenue").json()
    assert body["method"] == "ets"
    assert body["forecast_start"] == "2026-12-16"
    assert body["horizon_days"] == 90 == len(body["points"])
    assert body["mape"] <= 0.03 and body["mape"] < body["baseline_mape"]
    assert body["accuracy"].startswith("over the last 4 origins this forecast missed by ")
    point = body["points"][0]
    assert point["day"] == "2026-12-16"
    low80, high80 = (Decimal(v) for v in point["p80"])
    low95, high95 = (Decimal(v) for v in point["p95"])
    assert low95 <= low80 <= Decimal(point["forecast"]) <= high80 <= high95
    assert [m["month"] for m in body["monthly"]] == ["2026-12", "2027-01", "2027-02", "2027-03"]
    december = body["monthly"][0]
    assert Decimal(december["total"]) == Decimal(december["actual"]) + Decimal(december["forecast"])
    tokens = client.get("/api/v1/forecast").json()  # the factory's production by default
    assert (tokens["scope"], tokens["metric"]) == ("factory", "tokens")
    assert isinstance(tokens["points"][0]["forecast"], int)
    none = client.get("/api/v1/forecast?scope=model:small-10").json()
    assert (none["method"], none["note"], none["points"]) == (
        "none",
        "not enough history: 10 closed days, at least 14 needed",
        [],
    )
    missing = client.get("/api/v1/forecast?scope=model:nope")
    assert missing.status_code == 400
    assert missing.json()["errors"][0]["field"] == "scope"
    assert client.get("/api/v1/forecast?metric=gpus").json()["errors"][0]["field"] == "metric"
    client.force_login(make_user("tenant", tenant=tenant_a, username="member-forecast"))
    assert client.get("/api/v1/forecast").status_code == 403


def test_manage_forecast_prints_each_series_and_its_accuracy(factory):
    out = io.StringIO()
    call_command("forecast", stdout=out)
    text = out.getvalue()
    assert "12 series, forecast from 2026-12-16 (UTC)" in text
    assert "  model:small-10 tokens: no forecast (not enough history: 10 closed days" in text
    assert "factory tokens: exponential smoothing" in text


def test_the_beat_runs_the_forecast_job_daily_on_the_measure_queue():
    entry = settings.CELERY_BEAT_SCHEDULE["forecast"]
    assert entry["task"] == forecast_task.name == "flywheel.forecast"
    assert (entry["schedule"].hour, entry["schedule"].minute) == ({0}, {45})
