"""A month's chargeback on the invoice basis (kpis.md 3e; billing.domain.chargeback): per
tenant the invoice that bills the month (issued or paid; else its draft; else, for an open
month, its rating so far, labelled), split across its projects; per project its paid tokens
by class and list value from rated usage. Members see their own tenant's; a query count
that does not grow with tenants or projects."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import Sum

from billing.domain.chargeback import (
    BALANCES,
    Line,
    ProjectCharge,
    chargeback_line,
    chargeback_split,
)
from billing.models import Invoice, InvoiceLine, RatedTenantMonth, RatedUsage, RatedUsageMonth
from billing.selectors.rating.inputs import line_of, quantities_of
from billing.selectors.reservations import reservations_of_month
from portal.access import tenant_scoped
from portal.models import Tenant
from portal.money import round_money
from portal.projects import project_names

TOKEN_COLUMNS = (
    "input_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
)
RATED = "rated so far"  # a month without an invoice yet: its rating so far


@dataclass
class TenantChargeback:
    """One tenant's month split across its projects."""

    tenant: Tenant
    status: str  # issued | paid | draft | rated so far
    currency: str
    total: Decimal  # the invoice before its balance lines
    projects: list[dict] = field(default_factory=list)


def _lines_of(rows) -> list[Line]:
    return [
        Line(
            kind=str(kind),
            amount=Decimal(amount),
            model=model,
            token_class=token_class,
            price_class=price_class,
            list_unit_price=None if price is None else Decimal(price),
            discount_pct=Decimal(pct),
            service_tier=tier,
            reservation=reservation,
        )
        for kind, model, token_class, price_class, price, amount, pct, tier, reservation in rows
    ]


def chargeback_month(
    *, user, month: datetime, tenant: Tenant | None = None
) -> list[TenantChargeback]:
    """The month's chargeback of every tenant the user may see (or of `tenant`), by slug."""
    tenants = tenant_scoped(Tenant.objects.order_by("slug"), user=user, field=None)
    if tenant is not None:
        tenants = tenants.filter(pk=tenant.pk)
    tenants = {t.pk: t for t in tenants}
    rated = {
        row.tenant_id: row
        for row in RatedTenantMonth.objects.filter(tenant_id__in=tenants, month_start=month)
    }
    invoices: dict[int, Invoice] = {}
    for invoice in Invoice.objects.filter(
        tenant_id__in=tenants, kind=Invoice.Kind.USAGE, period_start=month
    ).exclude(status=Invoice.Status.VOID):
        invoices[invoice.tenant_id] = invoice
    invoice_lines: dict[int, list] = defaultdict(list)
    for invoice_id, *row in (
        InvoiceLine.objects.filter(invoice__in=invoices.values())
        .order_by("invoice_id", "position")
        .values_list(
            "invoice_id", "kind", "model", "token_class", "price_class", "list_unit_price",
            "amount", "discount_pct", "service_tier", "reservation_id",
        )
    ):  # fmt: skip
        invoice_lines[invoice_id].append(row)
    usage = _usage(tenants, month)
    covered = _covered(tenants, month)
    names = project_names(tenants)
    answer = []
    for pk, t in tenants.items():
        month_rated, invoice = rated.get(pk), invoices.get(pk)
        if invoice is not None:
            status, currency = str(invoice.status), invoice.currency
            lines = _lines_of(invoice_lines[invoice.pk])
        elif month_rated is not None:
            status, currency = RATED, month_rated.currency or settings.FACTORY_CURRENCY
            lines = [chargeback_line(line_of(row)) for row in month_rated.lines]
        else:
            continue
        quantities = quantities_of(month_rated.quantities) if month_rated else {}
        charges = chargeback_split(
            lines=lines, quantities=quantities, covered=covered.get(pk), currency=currency
        )
        total = sum((line.amount for line in lines if line.kind not in BALANCES), Decimal(0))
        month_usage = usage.get(pk, {})
        projects = sorted(set(charges) | set(month_usage), key=lambda p: (p != 0, names[p][0]))
        answer.append(
            TenantChargeback(
                tenant=t,
                status=status,
                currency=currency,
                total=total,
                projects=[
                    _project_row(
                        names[p], charges.get(p, ProjectCharge(p)), month_usage.get(p), currency
                    )
                    for p in projects
                ],
            )
        )
    return answer


def _covered(tenants, month: datetime) -> dict[int, dict[int, dict[int, Decimal]]]:
    """Per tenant and reservation of the month, each project's covered list value on the
    reservation's deployment (its tenant's reservations there cover pooled, kpis.md 3d), from
    the month totals of rated usage: two queries."""
    values: dict[tuple[int, int], dict[int, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for tenant_id, deployment_id, project_id, list_value in RatedUsageMonth.objects.filter(
        tenant_id__in=tenants, month_start=month, covered=True
    ).values_list("tenant_id", "deployment_id", "project_id", "list_value"):
        values[tenant_id, deployment_id][project_id] += list_value  # summed here: SQLite floats
    covered: dict[int, dict[int, dict[int, Decimal]]] = defaultdict(dict)
    for pk, tenant_id, deployment_id in reservations_of_month(tenants=tenants, month=month):
        covered[tenant_id][pk] = dict(values.get((tenant_id, deployment_id), {}))
    return covered


def _usage(tenants, month: datetime) -> dict[int, dict[int, dict]]:
    """Paid tokens by class and list value per tenant and project, from the month totals of
    rated usage: one query."""
    rows = (
        RatedUsageMonth.objects.filter(
            tenant_id__in=tenants, month_start=month, sale=RatedUsage.Sale.PAID
        )
        .values("tenant_id", "project_id")
        .annotate(**{name: Sum(name) for name in TOKEN_COLUMNS}, list_value=Sum("list_value"))
    )
    usage: dict[int, dict[int, dict]] = defaultdict(dict)
    for row in rows:
        usage[row.pop("tenant_id")][row.pop("project_id")] = row
    return usage


def _project_row(name, charge: ProjectCharge, usage: dict | None, currency: str) -> dict:
    slug, title, cost_center = name
    usage = usage or {}
    return {
        "project": slug,
        "name": title,
        "cost_center": cost_center,
        "tokens": {column: int(usage.get(column) or 0) for column in TOKEN_COLUMNS},
        "list_value": round_money(amount=usage.get("list_value") or Decimal(0), currency=currency),
        "amounts": dict(charge.by_kind),
        "total": charge.total,
    }
