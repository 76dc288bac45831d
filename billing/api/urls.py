"""billing's API routes, relative to /api/v1/: one router for the app."""

from django.urls import path

from billing.api import (
    budget,
    close,
    credit_notes,
    credits,
    exports,
    invoices,
    ledger,
    prepaid,
    pricing,
    reservations,
)
from portal.api.routers import Router

router = Router()
router.register("prices", pricing.PriceViewSet, basename="price")
router.register("contracts", pricing.ContractViewSet, basename="contract")
router.register("promotions", pricing.PromotionViewSet, basename="promotion")
router.register("reservations", reservations.ReservationViewSet, basename="reservation")
router.register("service-tiers", reservations.ServiceTierViewSet, basename="service-tier")
router.register("invoices", invoices.InvoiceViewSet, basename="invoice")
router.register("ledger", ledger.LedgerViewSet, basename="ledger")
router.register("credit-notes", credit_notes.CreditNoteViewSet, basename="credit-note")

urlpatterns = [
    path("sla", credits.SlaView.as_view(), name="sla"),
    path("close", close.CloseView.as_view(), name="close"),
    path("close/<str:month>", close.CloseReportView.as_view(), name="close-report"),
    path("receivables", close.ReceivablesView.as_view(), name="receivables"),
    path("prepaid", prepaid.PrepaidView.as_view(), name="prepaid"),
    path("exports/focus", exports.FocusExportView.as_view(), name="focus-export"),
    path("tenants/<slug:slug>/balances", prepaid.BalancesView.as_view(), name="tenant-balances"),
    path("tenants/<slug:slug>/budget", budget.BudgetView.as_view(), name="tenant-budget"),
    *router.urls,
]
