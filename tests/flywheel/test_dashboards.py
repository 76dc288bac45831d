"""The Grafana dashboards in deploy/grafana/ (architecture.md "Metrics and dashboards"): every
file read as Grafana would, and `manage.py grafana_dashboards --check`."""

import json
import re
import shutil

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from flywheel.domain import dashboards as dashboards_module
from flywheel.domain.grafana import Dashboard, Panel, metric_names

GRAFANA = settings.BASE_DIR / "deploy" / "grafana"
FILES = sorted((GRAFANA / "dashboards").glob("*.json"))
WINDOW = re.compile(r"\b(?:rate|increase)\([^\[]*\[([^\]]*)\]")
VARIABLE = re.compile(r"label_values\((\w+), \w+\)")


def test_the_three_dashboards_are_there():
    assert [path.name for path in FILES] == ["factory.json", "finance.json", "tenants.json"]
    assert (GRAFANA / "provisioning" / "dashboards" / "tokenfactory.yaml").is_file()
    assert (GRAFANA / "provisioning" / "datasources" / "tokenfactory.yaml").is_file()


@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
def test_every_dashboard_follows_the_conventions(path):
    """schemaVersion ≥ 39, a `datasource` variable every panel and query names, a stable
    uid, every panel titled, described and with a unit, and rates over $__rate_interval
    (increases over the dashboard's range)."""
    board = json.loads(path.read_text())

    assert board["schemaVersion"] >= 39
    assert board["uid"] == f"tokenfactory-{path.stem}"
    assert board["title"] and board["description"]
    variables = {variable["name"]: variable for variable in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert board["panels"]
    for panel in board["panels"]:
        assert panel["title"] and panel["description"], panel
        assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
            windows = set(WINDOW.findall(target["expr"]))
            if panel["type"] == "timeseries":
                assert windows <= {"$__rate_interval"}, (panel["title"], windows)
            else:
                assert windows <= {"$__range"}, (panel["title"], windows)
    assert len({panel["id"] for panel in board["panels"]}) == len(board["panels"])


def test_metric_names_are_the_selectors_of_a_query():
    expr = (
        'bottomk(10, sum by (tenant) (increase(tokenfactory_a_total{tenant=~"$t"}[$__range]))'
        " / (sum without (pool) (rate(b[5m] offset 1h)) * 1e6 > 0)) and on (x) c_total"
    )

    assert metric_names(expr) == {"tokenfactory_a_total", "b", "c_total"}


def test_check_passes_on_the_files_of_the_repository(capsys):
    """The checked-in files are the generator's output, byte for byte."""
    call_command("grafana_dashboards", "--check")

    assert "5 files" in capsys.readouterr().out


@pytest.mark.django_db
def test_every_metric_the_dashboards_read_is_on_metrics(users, token_client):
    """Each metric a panel's query or a variable reads has its TYPE line on a real
    GET /metrics (the families are declared even before any series)."""
    text = token_client(users["operator"]).get("/metrics").content.decode()
    on_metrics = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    read = set()
    for path in FILES:
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            read |= {name for target in panel["targets"] for name in metric_names(target["expr"])}
        read |= {
            VARIABLE.fullmatch(variable["definition"])[1]
            for variable in board["templating"]["list"]
            if variable["type"] == "query"
        }

    assert len(read) >= 15
    assert read <= on_metrics, read - on_metrics


def test_check_fails_on_a_stale_file(tmp_path):
    copy = tmp_path / "grafana"
    shutil.copytree(GRAFANA, copy)
    finance = copy / "dashboards" / "finance.json"
    finance.write_text(finance.read_text().replace("Realized revenue", "Revenue", 1))

    with pytest.raises(CommandError, match=r"stale in .*: dashboards/finance\.json"):
        call_command("grafana_dashboards", "--check", "--dir", str(copy))


def test_check_fails_on_a_panel_reading_an_unpublished_metric(monkeypatch):
    shipped = dashboards_module.dashboards

    def with_a_stray_panel(*, currency):
        boards = shipped(currency=currency)
        stray = Panel("Stray", "reads vLLM", "short", (("sum(vllm:num_requests_running)", ""),))
        boards[0] = Dashboard(**{**boards[0].__dict__, "panels": (*boards[0].panels, stray)})
        return boards

    monkeypatch.setattr("flywheel.management.commands.grafana_dashboards.dashboards",
                        with_a_stray_panel)  # fmt: skip

    with pytest.raises(CommandError, match=r"factory\.json 'Stray': vllm:num_requests_running"):
        call_command("grafana_dashboards", "--check")
