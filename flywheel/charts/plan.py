"""Charts of the forecasts (kpis.md 6b, the Cockpit): the closed days, the forecast and
its bands, and the month in progress."""

import plotly.graph_objects as go

from portal.charts import LABEL_BACKGROUND, base_layout, colour_of

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


def gpus_chart(*, months: list[str], pools: list[dict]) -> go.Figure:
    """GPUs needed (bars) against installed with the plan's additions (a line) per pool and
    month of the plan. `pools`: {"pool", "needed": [...], "installed": [...]} per pool."""
    fig = go.Figure(layout=base_layout(y_title="GPUs", x_title="Month", barmode="group"))
    for pool in pools:
        colour = colour_of(pool["pool"])
        fig.add_bar(x=months, y=pool["needed"], name=f"{pool['pool']} needed",
                    marker={"color": colour})  # fmt: skip
        fig.add_scatter(x=months, y=pool["installed"], mode="lines+markers",
                        name=f"{pool['pool']} installed (with additions)",
                        line={"color": colour, "dash": "dash", "shape": "hv"})  # fmt: skip
    fig.update_xaxes(type="category")
    return fig


def curve_chart(*, curves: list[dict], slo_user_rate: float | None, title: str) -> go.Figure:
    """A model's reference curves: tok/s per GPU against tok/s per user, each curve's
    measured points (markers) and its Pareto front (a line), the SLO's tok/s per user (a
    dotted line) and each curve's operating point there (R_ref, a star; none where the SLO
    is beyond the front). `curves`: {"label", "points": [(user, gpu)], "front": [(user,
    gpu)], "r_ref": float | None}."""
    layout = base_layout(y_title="tok/s per GPU (production)", x_title="tok/s per user")
    layout["title"] = {"text": title, "x": 0.01, "font": {"size": 14}}
    layout["margin"]["t"] = 40
    fig = go.Figure(layout=layout)
    for curve in curves:
        colour = colour_of(curve["label"])
        fig.add_scatter(x=[p[0] for p in curve["points"]], y=[p[1] for p in curve["points"]],
                        mode="markers", name=f"{curve['label']} points",
                        marker={"color": colour, "size": 7, "opacity": 0.5},
                        showlegend=False)  # fmt: skip
        fig.add_scatter(x=[p[0] for p in curve["front"]], y=[p[1] for p in curve["front"]],
                        mode="lines", name=curve["label"], line={"color": colour, "width": 2})  # fmt: skip
        if curve["r_ref"] is not None and slo_user_rate is not None:
            fig.add_scatter(x=[slo_user_rate], y=[curve["r_ref"]], mode="markers+text",
                            name=f"{curve['label']} at the SLO",
                            text=[f"R_ref {curve['r_ref']:,.0f}"], textposition="top right",
                            marker={"color": colour, "size": 14, "symbol": "star",
                                    "line": {"color": "#1b1f24", "width": 1}},
                            showlegend=False)  # fmt: skip
    if slo_user_rate is not None:
        fig.update_layout(
            shapes=[{"type": "line", "xref": "x", "x0": slo_user_rate, "x1": slo_user_rate,
                     "yref": "y domain", "y0": 0, "y1": 1,
                     "line": {"color": "#495057", "dash": "dot"}}],
            annotations=[{"x": slo_user_rate, "xref": "x", "y": 1, "yref": "y domain",
                          "text": f"SLO: {slo_user_rate:g} tok/s per user", "showarrow": False,
                          "xanchor": "left", "yanchor": "bottom", "bgcolor": LABEL_BACKGROUND}],
        )  # fmt: skip
    return fig
