"""billing's pages, under /billing/."""

from django.urls import path

from billing.views import credits, invoices, ledger, pricing, rating

urlpatterns = [
    path("prices/", pricing.price_book, name="price-book"),
    path("ledger/", ledger.ledger, name="ledger"),
    path("invoices/", invoices.invoices, name="invoices"),
    path("invoices/<int:pk>/", invoices.invoice_detail, name="invoice-page"),
    path("invoices/<int:pk>/pdf/", invoices.invoice_pdf, name="invoice-page-pdf"),
    path("invoices/<int:pk>/csv/", invoices.invoice_csv, name="invoice-page-csv"),
    path(
        "invoices/<int:pk>/pay/",
        invoices.invoice_action,
        {"action": "pay"},
        name="invoice-page-pay",
    ),
    path(
        "invoices/<int:pk>/void/",
        invoices.invoice_action,
        {"action": "void"},
        name="invoice-page-void",
    ),
    path("realization/", rating.realization, name="realization"),
    path("sla/", credits.sla, name="sla-page"),
]
