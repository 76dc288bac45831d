"""Grafana's dashboard JSON model (schemaVersion 39) for the dashboards the portal ships
(flywheel.domain.dashboards), the provisioning files beside them, and which metrics a
panel's PromQL reads (what `manage.py grafana_dashboards --check` holds to what /metrics
publishes). Pure: no Django.

Conventions (architecture.md "Metrics and dashboards"): a `datasource` variable every query
names (`${datasource}`), stable uids, every panel titled, described and with a unit; time
series have a minimum interval of an hour, the counters' resolution.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
HOURLY = "1h"  # the counters' resolution: a time series' shortest window
GRID_WIDTH = 24  # Grafana's grid

# Grafana's unit ids (its "Standard options > Unit"); "suffix:<text>" is a unit of one's own.
RATIO = "percentunit"
GPUS = "suffix: GPUs"
TOKENS_PER_SECOND = "suffix: tok/s"
COUNT = "short"
REQUESTS_PER_SECOND = "reqps"
INSTANT = "dateTimeAsIso"
# The currencies with a unit of Grafana's own (its value formats, "Currency").
GRAFANA_CURRENCIES = (
    "USD", "GBP", "EUR", "JPY", "RUB", "UAH", "BRL", "DKK", "ISK", "NOK", "SEK", "CZK", "CHF",
    "PLN", "ZAR", "INR", "KRW",
)  # fmt: skip


def money_unit(currency: str) -> str:
    """Grafana's unit for amounts in `currency` (its own symbol where it has one)."""
    return f"currency{currency}" if currency in GRAFANA_CURRENCIES else f"suffix: {currency}"


@dataclass(frozen=True)
class Panel:
    """One panel: what it shows (`targets`: PromQL and legend) and how."""

    title: str
    description: str
    unit: str
    targets: tuple[tuple[str, str], ...]
    kind: str = "stat"  # stat | timeseries | bargauge
    width: int = 6
    height: int = 5


@dataclass(frozen=True)
class Variable:
    """A query variable over a label of a metric, multi-valued with All (`.*`)."""

    name: str
    label: str
    metric: str


@dataclass(frozen=True)
class Dashboard:
    uid: str
    file: str
    title: str
    description: str
    panels: tuple[Panel, ...]
    variables: tuple[Variable, ...] = field(default=())


# --- Grafana's JSON model ---


def dashboard_json(dashboard: Dashboard) -> dict:
    """The dashboard as Grafana's JSON model (schemaVersion 39), panels laid out in rows
    of the grid left to right."""
    panels, x, y, row_height = [], 0, 0, 0
    for number, panel in enumerate(dashboard.panels, start=1):
        if x + panel.width > GRID_WIDTH:
            x, y, row_height = 0, y + row_height, 0
        panels.append(
            _panel_json(panel, number, {"h": panel.height, "w": panel.width, "x": x, "y": y})
        )
        x, row_height = x + panel.width, max(row_height, panel.height)
    return {
        "annotations": {"list": []},
        "description": dashboard.description,
        "editable": False,
        "graphTooltip": 1,
        "id": None,
        "links": [],
        "panels": panels,
        "refresh": "5m",
        "schemaVersion": SCHEMA_VERSION,
        "tags": ["tokenfactory"],
        "templating": {"list": [_datasource_variable(), *map(_variable_json, dashboard.variables)]},
        "time": {"from": "now-7d", "to": "now"},
        "timepicker": {},
        "timezone": "utc",
        "title": dashboard.title,
        "uid": dashboard.uid,
        "version": 1,
    }


def _panel_json(panel: Panel, number: int, grid: dict) -> dict:
    is_range = panel.kind != "timeseries"
    targets = [
        {
            "datasource": DATASOURCE,
            "editorMode": "code",
            "expr": expr,
            "instant": is_range,
            "legendFormat": legend,
            "range": not is_range,
            "refId": chr(ord("A") + index),
        }
        for index, (expr, legend) in enumerate(panel.targets)
    ]
    body: dict = {
        "datasource": DATASOURCE,
        "description": panel.description,
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "gridPos": grid,
        "id": number,
        "targets": targets,
        "title": panel.title,
        "type": panel.kind,
    }
    if panel.kind == "timeseries":
        body["interval"] = HOURLY
        body["options"] = {"legend": {"displayMode": "list", "placement": "bottom"}}
    else:
        body["options"] = {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}
        }
    return body


def _datasource_variable() -> dict:
    return {
        "current": {},
        "hide": 0,
        "includeAll": False,
        "label": "Data source",
        "multi": False,
        "name": "datasource",
        "options": [],
        "query": "prometheus",
        "refresh": 1,
        "regex": "",
        "type": "datasource",
    }


def _variable_json(variable: Variable) -> dict:
    query = f"label_values({variable.metric}, {variable.name})"
    return {
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "datasource": DATASOURCE,
        "definition": query,
        "hide": 0,
        "includeAll": True,
        "label": variable.label,
        "multi": True,
        "name": variable.name,
        "options": [],
        "query": {"query": query, "refId": "variable"},
        "refresh": 2,
        "regex": "",
        "sort": 1,
        "type": "query",
    }


# --- the files of deploy/grafana/ ---

DASHBOARDS_DIR = "/var/lib/grafana/dashboards/tokenfactory"  # where Grafana reads them from

PROVISIONING_DASHBOARDS = f"""\
# Grafana provisioning: the portal's dashboards (README, "Grafana dashboards"). Mount
# deploy/grafana/dashboards/ at {DASHBOARDS_DIR}.
apiVersion: 1
providers:
  - name: tokenfactory
    orgId: 1
    folder: Token Factory
    folderUid: tokenfactory
    type: file
    disableDeletion: false
    allowUiUpdates: false
    updateIntervalSeconds: 60
    options:
      path: {DASHBOARDS_DIR}
"""

PROVISIONING_DATASOURCE = """\
# Grafana provisioning: the Prometheus that scrapes the portal's /metrics (README, "Grafana
# dashboards"); PROMETHEUS_URL in Grafana's environment, e.g. http://prometheus:9090.
apiVersion: 1
datasources:
  - name: Token Factory Prometheus
    uid: tokenfactory-prometheus
    type: prometheus
    access: proxy
    url: ${PROMETHEUS_URL}
    jsonData:
      timeInterval: 30s  # the scrape interval: Grafana's $__rate_interval starts from it
"""


def grafana_files(boards: Iterable[Dashboard]) -> dict[str, str]:
    """Every file of deploy/grafana/ by relative path: the dashboards' JSON and the
    provisioning of the dashboards and of a Prometheus data source."""
    files = {
        f"dashboards/{board.file}": json.dumps(dashboard_json(board), indent=2, ensure_ascii=False)
        + "\n"
        for board in boards
    }
    files["provisioning/dashboards/tokenfactory.yaml"] = PROVISIONING_DASHBOARDS
    files["provisioning/datasources/tokenfactory.yaml"] = PROVISIONING_DATASOURCE
    return files


# --- what a query reads ---

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACES = re.compile(r"\{[^}]*\}|\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"(?<![\w.$])[a-zA-Z_:][\w:]*\b(?!\s*\()")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "start", "end"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: its identifiers outside strings,
    label matchers, ranges and grouping clauses, that are neither functions nor keywords."""
    bare = _GROUPING.sub(" ", _BRACES.sub(" ", _STRINGS.sub(" ", expr)))
    return {name for name in _NAME.findall(bare) if name.lower() not in _KEYWORDS}


def panels_unpublished(
    boards: Iterable[Dashboard], *, published: set[str]
) -> list[tuple[str, str, str]]:
    """(dashboard file, panel title, metric) of every panel query or variable that reads a
    metric /metrics does not publish."""
    missing = []
    for board in boards:
        for variable in board.variables:
            if variable.metric not in published:
                missing.append((board.file, f"variable {variable.name}", variable.metric))
        for panel in board.panels:
            for expr, _ in panel.targets:
                missing += [
                    (board.file, panel.title, name)
                    for name in sorted(metric_names(expr) - published)
                ]
    return missing
