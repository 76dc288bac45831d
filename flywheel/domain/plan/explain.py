"""The forecast's methods and its measured accuracy in words (kpis.md 6b): what the pages
and the API say beside every forecast. Pure Python, without the statistics (the pages read
stored forecasts and never load them)."""

from __future__ import annotations

ETS = "ets"
SEASONAL_NAIVE_DRIFT = "seasonal_naive_drift"
NONE = "none"

METHODS = {
    ETS: "exponential smoothing (ETS: additive errors, damped trend, weekly seasonality)",
    SEASONAL_NAIVE_DRIFT: "seasonal naive with drift (last week's same weekday plus the mean "
    "daily change): fewer than 28 closed days",
    NONE: "no forecast",
}

METRICS = {"tokens": "production (output-token units)", "revenue": "realized revenue (the rating)"}


def percent(value: float) -> str:
    """A share as a percentage with one decimal: 0.041 -> '4.1%'."""
    return f"{value * 100:.1f}%"


def accuracy_sentence(*, mape: float | None, baseline_mape: float | None, origins: int) -> str:
    """The accuracy line shown beside a forecast: "over the last 4 origins this forecast
    missed by 4.1%; a naive forecast by 9.8%", or why there is none."""
    if not origins or mape is None:
        return (
            "accuracy not measured yet: a backtest needs 56 closed days (28 of history "
            "before an origin and the 28 it forecasts)"
        )
    where = "the last origin" if origins == 1 else f"the last {origins} origins"
    line = f"over {where} this forecast missed by {percent(mape)}"
    if baseline_mape is not None:
        line += f"; a naive forecast by {percent(baseline_mape)}"
    return line
