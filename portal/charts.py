"""Shared chart conventions: fixed colours per pool and model, figures as JSON for Plotly.js."""

import hashlib

import plotly.graph_objects as go

PALETTE = ["#1f6feb", "#d9480f", "#2b8a3e", "#7048e8", "#c2255c", "#0b7285", "#e67700", "#495057"]
FIXED = {
    "h100-a": "#1f6feb",
    "h200-a": "#d9480f",
    "b200-a": "#2b8a3e",
    "llama-3.3-70b": "#1f6feb",
    "qwen3-235b-a22b": "#d9480f",
    "deepseek-r1": "#2b8a3e",
}


def colour_of(key: str) -> str:
    """The same colour for the same pool or model on every page."""
    if key in FIXED:
        return FIXED[key]
    return PALETTE[int(hashlib.sha1(key.encode()).hexdigest(), 16) % len(PALETTE)]  # noqa: S324


def base_layout(*, y_title: str, x_title: str = "Day (UTC)", barmode: str | None = None) -> dict:
    layout = {
        "margin": {"l": 70, "r": 20, "t": 30, "b": 90},
        # automargin: long or slanted tick labels (a tenant's name) grow the margin, never clip
        "xaxis": {"title": {"text": x_title}, "automargin": True},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero", "automargin": True},
        "legend": {"orientation": "h", "y": -0.32},
        "font": {"family": "system-ui, sans-serif", "size": 13},
        "plot_bgcolor": "#fff",
        "paper_bgcolor": "#fff",
    }
    if barmode:
        layout["barmode"] = barmode
    return layout


def usage_by_model_chart(rows: list[dict]) -> go.Figure:
    """Stacked bars: output tokens per day and model."""
    fig = go.Figure(layout=base_layout(y_title="Output tokens per day", barmode="stack"))
    models = sorted({r["model"] for r in rows})
    for model in models:
        series = [r for r in rows if r["model"] == model]
        fig.add_bar(
            x=[r["day"] for r in series],
            y=[r["output_tokens"] for r in series],
            name=model,
            marker_color=colour_of(model),
        )
    return fig


def figure_json(fig: go.Figure) -> str:
    return fig.to_json()
