"""Forecasts and their accuracy (kpis.md 6b): the method by the history's length, the test
vector, never below zero, the seasonal naive with drift by hand, monthly sums."""

from datetime import date

import numpy as np
import pytest

from flywheel.domain.plan.explain import ETS, NONE, SEASONAL_NAIVE_DRIFT, accuracy_sentence
from flywheel.domain.plan.forecast import (
    HORIZON,
    MonthSum,
    backtest_origins,
    ets_model,
    ets_point,
    forecast_make,
    method_for,
    monthly_sums,
    seasonal_naive_drift,
)


def vector() -> list[float]:
    """kpis.md 6b: y_t = 1000 + 5t + 100 sin(2πt/7) + N(0, 20²), t = 0…119, × 10^6 tokens."""
    rng = np.random.default_rng(7)
    t = np.arange(120)
    y = 1000 + 5 * t + 100 * np.sin(2 * np.pi * t / 7) + rng.normal(0, 20, 120)
    return list(y * 1e6)


def test_forecast_of_the_test_vector_misses_by_at_most_3_percent_and_beats_the_naive():
    forecast = forecast_make(vector())
    assert forecast.method == ETS
    # origins at days 71, 78, 85 and 92, each forecasting 28 days
    assert forecast.accuracy.origins == (71, 78, 85, 92)
    assert forecast.accuracy.mape <= 0.03
    assert forecast.accuracy.mape < forecast.accuracy.baseline_mape
    # about 1.3% and 5.8% (kpis.md 6b)
    assert forecast.accuracy.mape == pytest.approx(0.0134, abs=0.001)
    assert forecast.accuracy.baseline_mape == pytest.approx(0.05795, abs=0.0001)
    assert len(forecast.mean) == HORIZON == 90
    # the bands hold the forecast: 95% outside 80%
    for mean, lo80, hi80, lo95, hi95 in zip(
        forecast.mean, forecast.lo80, forecast.hi80, forecast.lo95, forecast.hi95, strict=True
    ):
        assert lo95 <= lo80 <= mean <= hi80 <= hi95
    assert not forecast.is_clipped


def test_forecast_is_the_same_on_every_run():
    first, second = forecast_make(vector()), forecast_make(vector())
    assert first == second


def test_a_20_day_series_uses_the_seasonal_naive_with_drift_and_says_so():
    forecast = forecast_make(vector()[:20])
    assert method_for(20) == SEASONAL_NAIVE_DRIFT
    assert forecast.method == SEASONAL_NAIVE_DRIFT
    assert len(forecast.mean) == 90
    # too short for a backtest (28 days of history and 28 forecast)
    assert forecast.accuracy.origins == ()
    assert forecast.accuracy.mape is None
    assert "needs 56 closed days" in accuracy_sentence(mape=None, baseline_mape=None, origins=0)


def test_a_10_day_series_gives_not_enough_history():
    forecast = forecast_make(vector()[:10])
    assert forecast.method == NONE
    assert forecast.mean == []
    assert forecast.note == "not enough history: 10 closed days, at least 14 needed"


def test_the_method_follows_the_history_length_at_its_bounds():
    assert [method_for(n) for n in (13, 14, 27, 28)] == [
        NONE,
        SEASONAL_NAIVE_DRIFT,
        SEASONAL_NAIVE_DRIFT,
        ETS,
    ]


def test_a_series_falling_to_zero_never_forecasts_below_zero_and_says_so():
    # 1,000 falling by 20 a day to 0 on day 50, then 0
    falling = [max(0.0, 1000.0 - 20 * day) for day in range(60)]
    forecast = forecast_make(falling)
    assert forecast.method == ETS
    assert min(forecast.mean + forecast.lo80 + forecast.lo95) == 0.0
    assert forecast.is_clipped
    # days whose actual is 0 are skipped by the accuracy (no division by 0)
    assert forecast.accuracy.origins == (32,)
    assert forecast.accuracy.mape is not None


def test_a_series_of_zeros_forecasts_zeros_without_ets():
    forecast = forecast_make([0.0] * 40)
    assert forecast.method == SEASONAL_NAIVE_DRIFT
    assert forecast.note == "ETS could not be fitted (the series has no positive mean)"
    assert set(forecast.mean) == {0.0}


def test_seasonal_naive_with_drift_by_hand():
    # Two weeks: the second is the first plus 7 a day (a mean daily change of 1)
    week = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0]
    series = np.array(week + [v + 7 for v in week])
    mean, *bands = seasonal_naive_drift(series, horizon=9)
    # day 15 is day 8 (last week's Monday, 17) plus 7 × 1; day 22 is two weeks of drift on
    assert list(mean) == [24, 34, 44, 54, 64, 74, 84, 31, 41]
    # every week-on-week change is exactly 7: no error, so the bands are the forecast
    assert all(list(band) == list(mean) for band in bands)


def test_backtest_origins_are_the_last_four_every_7_days_with_28_days_before_them():
    assert backtest_origins(120) == (71, 78, 85, 92)
    assert backtest_origins(66) == (31, 38)  # the demo's 66 closed days: two origins
    assert backtest_origins(56) == (28,)
    assert backtest_origins(55) == ()


def test_monthly_sums_add_the_closed_days_as_measured_to_the_forecast_days():
    # Closed days 1 Oct – 5 Dec (66 days of 1), forecast 6 Dec onwards (90 days of 2)
    months = monthly_sums(first_day=date(2026, 10, 1), values=[1.0] * 66, mean=[2.0] * 90)
    assert months == [
        MonthSum(date(2026, 12, 1), actual=5.0, forecast=52.0, is_whole=True),
        MonthSum(date(2027, 1, 1), actual=0.0, forecast=62.0, is_whole=True),
        MonthSum(date(2027, 2, 1), actual=0.0, forecast=56.0, is_whole=True),
        MonthSum(date(2027, 3, 1), actual=0.0, forecast=10.0, is_whole=False),  # to 5 March
    ]
    assert months[0].total == 57.0


def test_the_accuracy_line_in_words():
    assert (
        accuracy_sentence(mape=0.041, baseline_mape=0.098, origins=4)
        == "over the last 4 origins this forecast missed by 4.1%; a naive forecast by 9.8%"
    )
    assert accuracy_sentence(mape=0.02, baseline_mape=None, origins=1) == (
        "over the last origin this forecast missed by 2.0%"
    )


def test_the_backtests_point_forecast_is_statsmodels_own():
    series = np.array(vector())
    mine, params = ets_point(series, days=28, start_params=None)
    model, scale = ets_model(series)
    theirs = np.asarray(model.smooth(params).forecast(28)) * scale
    assert np.allclose(mine, theirs, rtol=1e-12)
