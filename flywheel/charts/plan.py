"""Charts of the forecasts (kpis.md 6b, the Cockpit): the closed days, the forecast and
its bands, and the month in progress."""

import plotly.graph_objects as go

from portal.charts import base_layout

FORECAST_COLOUR = "#1f6feb"


def forecast_chart(
    *, days: list, actual: list, forecast_days: list, points: list, unit: str, month: dict
) -> go.Figure:
    """The closed days as measured (solid), the forecast (dashed) with its 80% and 95%
    bands, a dotted line where the forecast starts, and the month in progress shaded and
    named as partial (`month`: first and last day, label). `points`: [mean, lo80, hi80,
    lo95, hi95] per forecast day."""
    layout = base_layout(y_title=unit)
    layout["height"] = 440  # the legend names the month in progress below the plot
    fig = go.Figure(layout=layout)
    for name, lo, hi, opacity in (("95% band", 3, 4, 0.12), ("80% band", 1, 2, 0.25)):
        fig.add_scatter(x=forecast_days, y=[p[hi] for p in points], mode="lines",
                        line={"width": 0}, showlegend=False, hoverinfo="skip")  # fmt: skip
        fig.add_scatter(
            x=forecast_days,
            y=[p[lo] for p in points],
            mode="lines",
            line={"width": 0},
            fill="tonexty",
            fillcolor=f"rgba(31, 111, 235, {opacity})",
            name=name,
            hoverinfo="skip",
        )
    fig.add_scatter(x=days, y=actual, mode="lines", name="actual (closed days)",
                    line={"color": "#1b1f24", "width": 2})  # fmt: skip
    fig.add_scatter(x=forecast_days, y=[p[0] for p in points], mode="lines", name="forecast",
                    line={"color": FORECAST_COLOUR, "width": 2, "dash": "dash"})  # fmt: skip
    shapes = []
    if forecast_days:
        start = f"{forecast_days[0]}T00:00:00"
        shapes.append({"type": "line", "xref": "x", "x0": start, "x1": start, "yref": "y domain",
                       "y0": 0, "y1": 1, "line": {"color": "#495057", "dash": "dot"}})  # fmt: skip
    if month:
        shapes.append({"type": "rect", "xref": "x", "x0": f"{month['first']}T00:00:00",
                       "x1": f"{month['end']}T00:00:00", "yref": "y domain", "y0": 0, "y1": 1,
                       "fillcolor": "#adb5bd", "opacity": 0.15, "line": {"width": 0},
                       "layer": "below"})  # fmt: skip
        fig.add_scatter(x=[None], y=[None], mode="markers", name=month["label"],
                        marker={"symbol": "square", "size": 12, "color": "#adb5bd",
                                "opacity": 0.4})  # fmt: skip
    fig.update_layout(shapes=shapes, hovermode="x unified")
    if forecast_days:  # the days drawn, not stretched by Plotly to fit its marks
        first = days[0] if days else forecast_days[0]
        fig.update_xaxes(range=[f"{first}T00:00:00", f"{forecast_days[-1]}T23:59:00"])
    return fig
