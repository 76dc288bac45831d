"""Forecasts of a daily series and their measured accuracy (kpis.md 6b): the method chosen
by the history's length, statsmodels' ETS with 80% and 95% prediction intervals, the
seasonal naive with drift below 28 days, nothing below 14; never below zero (clipped, and
said so); a rolling-origin backtest beside the seasonal naive's.

A series is a list of floats, one per closed UTC day, oldest first, with no gap (a day
without usage is a 0). Forecasts are estimates: floats, rounded where they are shown.

The ETS is fitted with statsmodels' heuristic initialization (the level, trend and weekly
states from the first weeks of data), so the optimizer searches the four smoothing
parameters only instead of those and nine initial states: on the test vector it misses by
1.34% instead of 1.28%, with a ninth of the function evaluations (docs/performance.md,
"The forecast job"). Each backtest origin is fitted again from the parameters of the origin
before it, and the forecast from the last origin's.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

import numpy as np

from flywheel.domain.plan.explain import ETS, NONE, SEASONAL_NAIVE_DRIFT

HORIZON = 90  # days forecast
SEASON = 7  # weekly seasonality
ETS_DAYS = 28  # at least this many closed days: ETS
MIN_DAYS = 14  # at least this many: the seasonal naive with drift; fewer: no forecast
BACKTEST_ORIGINS = 4  # the last origins, every BACKTEST_STEP days
BACKTEST_STEP = 7
BACKTEST_DAYS = 28  # each origin forecasts this many days, after at least ETS_DAYS of history
# Two-sided normal quantiles of the 80% and 95% intervals of the seasonal naive.
Z80 = 1.2815515655446004
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Accuracy:
    """The rolling-origin backtest: the mean absolute percentage error of the method over
    the origins' days (days whose actual is 0 skipped), beside the seasonal naive's.
    `origins` are indexes into the series (the first day each origin forecasts)."""

    mape: float | None
    baseline_mape: float | None
    origins: tuple[int, ...]


@dataclass(frozen=True)
class Forecast:
    """A series' forecast: `method` (`ets`, `seasonal_naive_drift` or `none`), the daily
    point forecast and its bands from the day after the series' last, whether any value was
    clipped at 0, and its backtest. `note` says why there is none or why ETS gave way."""

    method: str
    mean: list[float] = field(default_factory=list)
    lo80: list[float] = field(default_factory=list)
    hi80: list[float] = field(default_factory=list)
    lo95: list[float] = field(default_factory=list)
    hi95: list[float] = field(default_factory=list)
    is_clipped: bool = False
    accuracy: Accuracy = Accuracy(None, None, ())
    note: str = ""


def method_for(days: int) -> str:
    """The method a history of `days` closed days takes (kpis.md 6b)."""
    if days >= ETS_DAYS:
        return ETS
    if days >= MIN_DAYS:
        return SEASONAL_NAIVE_DRIFT
    return NONE


def forecast_make(values: Sequence[float], *, horizon: int = HORIZON) -> Forecast:
    """The forecast of a daily series for `horizon` days after its last, by the method its
    length takes, with its backtest. Under 14 days: none, saying why."""
    series = np.asarray(values, dtype=float)
    method = method_for(len(series))
    if method == NONE:
        return Forecast(
            method=NONE,
            note=f"not enough history: {len(series)} closed days, at least {MIN_DAYS} needed",
        )
    accuracy, params = backtest(series)
    note = ""
    if method == ETS:
        try:
            bands = _ets_forecast(series, horizon=horizon, start_params=params)
        except (ValueError, np.linalg.LinAlgError, FloatingPointError) as error:
            method, note = SEASONAL_NAIVE_DRIFT, f"ETS could not be fitted ({error})"
    if method == SEASONAL_NAIVE_DRIFT:
        bands = seasonal_naive_drift(series, horizon=horizon)
    clipped = [np.maximum(band, 0.0) for band in bands]
    is_clipped = any(bool((band < 0).any()) for band in bands)
    mean, lo80, hi80, lo95, hi95 = ([float(v) for v in band] for band in clipped)
    return Forecast(
        method=method,
        mean=mean,
        lo80=lo80,
        hi80=hi80,
        lo95=lo95,
        hi95=hi95,
        is_clipped=is_clipped,
        accuracy=accuracy,
        note=note,
    )


def seasonal_naive_drift(series: np.ndarray, *, horizon: int) -> tuple[np.ndarray, ...]:
    """Last week's same weekday plus the mean daily change: day n−1+h is day n−1+h−7m
    (m = ⌈h/7⌉ weeks back) plus 7m × d, d the mean of the week-on-week changes over 7; its
    bands ±z σ √m, σ the root mean square of the one-week-ahead errors (drift's own
    uncertainty left out). Returns (mean, lo80, hi80, lo95, hi95)."""
    n = len(series)
    changes = series[SEASON:] - series[:-SEASON]
    drift = float(changes.mean()) / SEASON
    sigma = float(np.sqrt(np.mean((changes - SEASON * drift) ** 2)))
    steps = np.arange(1, horizon + 1)
    weeks = np.ceil(steps / SEASON).astype(int)
    mean = series[n - 1 + steps - SEASON * weeks] + SEASON * weeks * drift
    spread = sigma * np.sqrt(weeks)
    return (
        mean,
        mean - Z80 * spread,
        mean + Z80 * spread,
        mean - Z95 * spread,
        mean + Z95 * spread,
    )


def seasonal_naive(series: np.ndarray, *, origin: int, days: int) -> np.ndarray:
    """The baseline at an origin: each day is the same weekday of the week before it."""
    return np.array([series[origin - SEASON + (h % SEASON)] for h in range(days)], dtype=float)


def backtest_origins(length: int) -> tuple[int, ...]:
    """The last BACKTEST_ORIGINS origins, every 7 days, whose 28 days ahead are known and
    which have at least 28 days before them; the last forecasts the series' last 28 days."""
    last = length - BACKTEST_DAYS
    origins = [last - BACKTEST_STEP * k for k in range(BACKTEST_ORIGINS)]
    return tuple(sorted(o for o in origins if o >= ETS_DAYS))


def backtest(series: np.ndarray) -> tuple[Accuracy, np.ndarray | None]:
    """The rolling-origin backtest of ETS against the seasonal naive (kpis.md 6b), and the
    parameters fitted at the last origin (None without an origin): the forecast starts its
    own fit from them."""
    origins = backtest_origins(len(series))
    errors: list[float] = []
    baseline: list[float] = []
    params = None
    for origin in origins:
        try:
            forecast, params = ets_point(series[:origin], days=BACKTEST_DAYS, start_params=params)
        except (ValueError, np.linalg.LinAlgError, FloatingPointError):
            return Accuracy(None, None, ()), None
        actual = series[origin : origin + BACKTEST_DAYS]
        naive = seasonal_naive(series, origin=origin, days=BACKTEST_DAYS)
        known = actual != 0
        errors += list(np.abs(actual - np.maximum(forecast, 0.0))[known] / actual[known])
        baseline += list(np.abs(actual - naive)[known] / actual[known])
    return (
        Accuracy(
            mape=_mean(errors),
            baseline_mape=_mean(baseline),
            origins=origins,
        ),
        params,
    )


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def ets_model(series: np.ndarray, *, indexed: bool = False):
    """The kpis.md 6b model on the series divided by its mean (the fit is not scale-free),
    and that mean. `indexed`: the data as a pandas Series, which statsmodels' prediction
    intervals need (a plain array is lighter for the backtest's point forecasts)."""
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    scale = float(np.mean(series))
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError("the series has no positive mean")
    data = series / scale
    if indexed:
        import pandas as pd

        data = pd.Series(data)
    model = ETSModel(
        data,
        error="add",
        trend="add",
        damped_trend=True,
        seasonal="add",
        seasonal_periods=SEASON,
        initialization_method="heuristic",
    )
    return model, scale


# L-BFGS-B stops once an iteration improves the likelihood by less than FACTR × 2.2e-16 of
# it: a third fewer evaluations than statsmodels' default (1e7), the same median error over
# forty series like the bench's and the test vector's 1.34% (docs/performance.md).
FACTR = 1e10


def _fit(model, start_params):
    with warnings.catch_warnings():
        # Convergence and bounds notices: the fit is judged by its backtest instead.
        warnings.simplefilter("ignore")
        return model.fit(disp=False, start_params=start_params, return_params=True, factr=FACTR)


def ets_point(
    series: np.ndarray, *, days: int, start_params: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """ETS's point forecast of `days` days after the series, and the fitted parameters. The
    forecast of an additive damped-trend model from its last states, without the results
    object statsmodels builds (it takes a Hessian for the parameters' standard errors):
    level + (φ + … + φ^h) × trend + the same weekday's seasonal state. A test holds it equal
    to statsmodels' own `forecast`."""
    model, scale = ets_model(series)
    params = _fit(model, start_params)
    _, states = model.smooth(params, return_raw=True)
    level, trend = states[-1, 0], states[-1, 1]
    seasonal = states[-SEASON:, 2]
    steps = np.arange(1, days + 1)
    damping = np.cumsum(params[3] ** steps)  # params: α, β, γ, φ (heuristic initialization)
    return (level + damping * trend + seasonal[(steps - 1) % SEASON]) * scale, params


def _ets_forecast(
    series: np.ndarray, *, horizon: int, start_params: np.ndarray | None
) -> tuple[np.ndarray, ...]:
    """ETS's forecast with its exact 80% and 95% prediction intervals (additive errors).
    Returns (mean, lo80, hi80, lo95, hi95)."""
    model, scale = ets_model(series, indexed=True)
    results = model.smooth(_fit(model, start_params))
    n = len(series)
    prediction = results.get_prediction(start=n, end=n + horizon - 1, method="exact")
    p80 = prediction.summary_frame(alpha=0.20)
    p95 = prediction.summary_frame(alpha=0.05)
    mean = np.asarray(p80["mean"], dtype=float) * scale
    if not np.isfinite(mean).all():
        raise ValueError("the fit diverged")
    return (
        mean,
        np.asarray(p80["pi_lower"], dtype=float) * scale,
        np.asarray(p80["pi_upper"], dtype=float) * scale,
        np.asarray(p95["pi_lower"], dtype=float) * scale,
        np.asarray(p95["pi_upper"], dtype=float) * scale,
    )


@dataclass(frozen=True)
class MonthSum:
    """A UTC month of a forecast: the closed days' sum as measured, the forecast days' sum,
    and whether the series and the horizon together cover the whole month."""

    month: date  # its first day
    actual: float
    forecast: float
    is_whole: bool

    @property
    def total(self) -> float:
        return self.actual + self.forecast


def monthly_sums(
    *, first_day: date, values: Sequence[float], mean: Sequence[float]
) -> list[MonthSum]:
    """The months from the one holding the first forecast day to the horizon's last: a
    month's figure is the sum of its days, the closed ones as measured (kpis.md 6b)."""
    forecast_start = first_day + timedelta(days=len(values))
    days: dict[date, list[float]] = {}  # month -> [actual, forecast, days covered]
    for offset, value in enumerate(values):
        day = first_day + timedelta(days=offset)
        if (day.year, day.month) >= (forecast_start.year, forecast_start.month):
            days.setdefault(day.replace(day=1), [0.0, 0.0, 0])
            days[day.replace(day=1)][0] += value
            days[day.replace(day=1)][2] += 1
    for offset, value in enumerate(mean):
        month = (forecast_start + timedelta(days=offset)).replace(day=1)
        days.setdefault(month, [0.0, 0.0, 0])
        days[month][1] += value
        days[month][2] += 1
    return [
        MonthSum(month=month, actual=a, forecast=f, is_whole=covered == _month_days(month))
        for month, (a, f, covered) in sorted(days.items())
    ]


def _month_days(month: date) -> int:
    following = date(month.year + month.month // 12, month.month % 12 + 1, 1)
    return (following - month).days
