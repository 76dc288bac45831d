"""One declaration per KPI (flywheel.domain.kpis.KPIS): the figures computed, the TFOM
schema's fields, /metrics's gauges, the bands and the pages' labels all come from it, so a
new KPI is its declaration, its formula and its test."""

from dataclasses import fields

from rest_framework import serializers

from flywheel.api.kpis import GAUGES
from flywheel.api.tfom import TfomSerializer
from flywheel.domain.kpis import KPI, KPIS, MONEY, TOKENS, Kpis
from flywheel.domain.loop.factors import LABELS, SYMBOLS
from flywheel.models.loop import Factor


def test_every_figure_of_the_kpis_is_declared_once_in_their_order():
    keys = [kpi.key for kpi in KPIS]
    assert len(set(keys)) == len(keys)
    assert keys == [f.name for f in fields(Kpis)][4:]  # after scope, from, to, telemetry


def test_the_tfom_schema_carries_every_kpi_typed_by_its_unit():
    declared = TfomSerializer().fields
    for kpi in KPIS:
        field = declared[kpi.key]
        expected = {TOKENS: serializers.IntegerField, MONEY: serializers.DecimalField}.get(
            kpi.unit, serializers.FloatField
        )
        assert type(field) is expected, kpi.key
        assert field.allow_null == (kpi.nullable or kpi.unit == MONEY), kpi.key


def test_metrics_publish_the_declared_gauges():
    assert [key for key, _ in GAUGES] == [
        "availability", "occupancy", "efficiency", "tef", "sla_delivery", "sell_through",
        "price_realization", "tfi", "tps", "theoretical_tps",
    ]  # fmt: skip


def test_the_factors_are_named_as_declared_everywhere():
    assert KPI["tef"].row_label == "TEF = α·β·η"
    assert KPI["tfi"].row_label == "TFI = TEF·σ·s·ρ"
    assert KPI["sell_through"].title == "Sell-through s"
    assert dict(Factor.choices)["sla_delivery"] == "σ SLA delivery"
    assert f"{SYMBOLS['price_realization']} {LABELS['price_realization']}" == "ρ price realization"
