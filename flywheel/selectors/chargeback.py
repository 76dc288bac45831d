"""A month's chargeback at cost (kpis.md 3e): each tenant's project charged its Σ std(e) ×
the factory's cost per standard GPU-second in the month (section 5's `total_cost` ÷ the
factory's Σ std(e): idle capacity is shared by production), split to the cent by largest
remainder so that over every tenant and project it sums to the month's `total_cost`. A
member sees its own tenant's rows of that one split."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, localcontext
from operator import itemgetter

from django.conf import settings

from billing.selectors.chargeback import chargeback_month
from flywheel.domain.chargeback import (
    COST,
    INVOICE,
    cost_rows,
    invoice_rows,
    rows_csv,
    rows_xlsx,
)
from flywheel.domain.kpis import KPI_CONTEXT, ZERO
from flywheel.selectors.measurement import FACTORY
from flywheel.selectors.production import hour_production
from flywheel.selectors.tfom import tfom_measure
from metering.selectors.factory import DeploymentVersions
from metering.selectors.usage import deployment_totals, window_until
from portal.access import tenant_get, tenant_scoped
from portal.errors import FieldError
from portal.models import Tenant
from portal.money import round_money, split_money
from portal.projects import project_names


@dataclass(frozen=True)
class CostChargeback:
    month: datetime
    currency: str
    total_cost: Decimal  # the month's so far, the factory's, to the cent
    std_gpu_seconds: Decimal  # the factory's Σ std(e) in the month so far
    rows: list[dict]  # per tenant and project the user may see: std GPU-seconds and cost

    @property
    def cost_per_std_gpu_second(self) -> Decimal:
        if not self.std_gpu_seconds:
            return ZERO
        with localcontext(KPI_CONTEXT):
            return self.total_cost / self.std_gpu_seconds


def std_by_project(*, start: datetime, end: datetime) -> dict[tuple[int, int], Decimal]:
    """Σ std(e) = tok(e) / R_ref(d(e)) per (tenant id, project id) over [start, end), from
    the hourly rollups under the deployment version in force each hour (an hour holding
    `end` as of the cut, as the month's total_cost reads it): the tokens summed in the
    database per deployment, tenant and project over the whole range, and again span by span
    for a deployment whose version changes within it (one query, and one a span of those)."""
    versions = DeploymentVersions()
    std: dict[tuple[int, int], Decimal] = defaultdict(Decimal)
    spans_of: dict[int, list] = {}  # per deployment, its versions' spans within the range
    split: dict[int, list] = {}

    def add(row: dict, version) -> None:
        if version is not None and version.r_ref:
            tok = hour_production(row, version)[0]
            std[row["tenant_id"], row["project_id"]] += tok / version.r_ref

    with localcontext(KPI_CONTEXT):
        # by deployment: each sum added in one order, whatever the database's (KPI_CONTEXT
        # rounds every addition)
        totals = deployment_totals("tenant_id", "project_id", start=start, end=end)
        for row in sorted(totals, key=itemgetter("deployment_id")):
            deployment_id = row["deployment_id"]
            if deployment_id not in spans_of:
                spans_of[deployment_id] = _version_spans(versions, deployment_id, start, end)
            spans = spans_of[deployment_id]
            if len(spans) == 1:
                add(row, spans[0][2])
            else:
                split[deployment_id] = spans
        for deployment_id, spans in split.items():
            for lo, hi, version in spans:
                for row in deployment_totals(
                    "tenant_id", "project_id", start=lo, end=hi, deployment_id=deployment_id
                ):
                    add(row, version)
    return dict(sorted(std.items()))


def _version_spans(versions: DeploymentVersions, deployment_id: int, start, end) -> list:
    """(from, until, version) of each version of the deployment in force within [start, end)
    (None before its first), in order."""
    spans = []
    before = versions.at(deployment_id, start)
    cursor = start
    for begin, _, version in versions.series(deployment_id).spans():
        if begin <= start:
            continue
        if begin >= end:
            break
        spans.append((cursor, begin, before))
        cursor, before = begin, version
    spans.append((cursor, end, before))
    return spans


def chargeback_cost(*, user, month: datetime, tenant: Tenant | None = None) -> CostChargeback:
    """The month's cost split over every tenant's projects (an open month's so far: to the
    cut, kpis.md section 0); the rows of those the user may see (or of `tenant`), by tenant
    slug then project, `(none)` first."""
    # The month as measured so far (kpis.md section 0: to the cut, nothing ahead of it), as
    # its TFOM reads it: an open month's costs are those of its days so far.
    start, to = window_until({"period": f"{month:%Y-%m}"})
    end = max(start, to)
    currency = settings.FACTORY_CURRENCY
    total_cost = round_money(
        amount=tfom_measure(scope=FACTORY, start=month, end=end).total_cost
        if end > start
        else ZERO,
        currency=currency,
    )
    std = std_by_project(start=month, end=end)
    costs = split_money(amount=total_cost, weights=std, currency=currency) if std else {}
    visible = tenant_scoped(Tenant.objects.all(), user=user, field=None)
    if tenant is not None:
        visible = visible.filter(pk=tenant.pk)
    slugs = dict(visible.values_list("pk", "slug"))
    names = project_names(slugs)
    rows = [
        {
            "tenant": slugs[tenant_id],
            "project": names[project][0],
            "name": names[project][1],
            "cost_center": names[project][2],
            "std_gpu_seconds": seconds,
            "cost": costs[tenant_id, project],
        }
        for (tenant_id, project), seconds in std.items()
        if tenant_id in slugs
    ]
    rows.sort(key=lambda row: (row["tenant"], row["project"] != names[0][0], row["project"]))
    return CostChargeback(
        month=month,
        currency=currency,
        total_cost=total_cost,
        std_gpu_seconds=sum(std.values(), ZERO),
        rows=rows,
    )


@dataclass(frozen=True)
class ChargebackRead:
    """A month's chargeback on one basis, ready for JSON, CSV, XLSX and the page."""

    basis: str
    month: datetime
    rows: list[dict]  # flat, per tenant and project (flywheel.domain.chargeback)
    summary: dict  # per basis: the invoices' totals per tenant, or the month's cost figures

    def as_json(self) -> dict:
        return {
            "month": f"{self.month:%Y-%m}",
            "basis": self.basis,
            **_jsonable(self.summary),
            "rows": [_jsonable(row) for row in self.rows],
        }

    def csv(self) -> str:
        return rows_csv(self.rows, basis=self.basis)

    def xlsx(self) -> bytes:
        title = f"Chargeback {self.month:%B %Y}, {self.basis} basis"
        return rows_xlsx(self.rows, basis=self.basis, title=title)


def _jsonable(values: dict) -> dict:
    """Money and figures as decimal strings (money already to the cent)."""
    return {
        key: format(value, "f") if isinstance(value, Decimal) else value
        for key, value in values.items()
    }


def chargeback_read(*, user, month: datetime, tenant: str | None, basis: str | None):
    """The month's chargeback of `basis` (invoice by default) for the user (`tenant`: one of
    those it may see, by slug; 404 otherwise)."""
    basis = basis or INVOICE
    if basis not in (INVOICE, COST):
        raise FieldError("basis", "must be invoice or cost")
    one = tenant_get(user=user, slug=tenant) if tenant else None
    label = f"{month:%Y-%m}"
    if basis == COST:
        cost = chargeback_cost(user=user, month=month, tenant=one)
        summary = {
            "currency": cost.currency,
            "total_cost": cost.total_cost,
            "std_gpu_seconds": cost.std_gpu_seconds,
            "cost_per_std_gpu_second": cost.cost_per_std_gpu_second,
        }
        return ChargebackRead(COST, month, cost_rows(cost, month=label), summary)
    tenants = chargeback_month(user=user, month=month, tenant=one)
    summary = {
        "tenants": [
            {
                "tenant": t.tenant.slug,
                "status": t.status,
                "currency": t.currency,
                "total": format(t.total, "f"),
            }
            for t in tenants
        ]
    }
    return ChargebackRead(INVOICE, month, invoice_rows(tenants, month=label), summary)
