"""billing's pages, under /billing/."""

from django.urls import path

from billing.views import close, credits, home, invoices, ledger, pricing, rating, reservations

urlpatterns = [
    path("prices/", pricing.price_book, name="price-book"),
    path("reservations/", reservations.reservations, name="reservations-page"),
    path("reservations/<int:pk>/", reservations.reservation_detail, name="reservation-page"),
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
    path("invoices/<int:pk>/credit/", close.invoice_credit, name="invoice-page-credit"),
    path("close/", close.close_index, name="close-page"),
    path("close/<str:month>/", close.close_month, name="close-month-page"),
    path("close/<str:month>/pdf/", close.close_pdf, name="close-month-pdf"),
    path("receivables/", close.receivables, name="receivables-page"),
    path("balances/", close.balances, name="balances-page"),
    path("credit-notes/", close.credit_notes, name="credit-notes-page"),
    path("credit-notes/<int:pk>/", close.credit_note_detail, name="credit-note-page"),
    path("credit-notes/<int:pk>/pdf/", close.credit_note_pdf, name="credit-note-pdf"),
    path("credit-notes/<int:pk>/csv/", close.credit_note_csv, name="credit-note-csv"),
    path("realization/", rating.realization, name="realization"),
    path("sla/", credits.sla, name="sla-page"),
    path("budget/", home.budget_set, name="budget-set"),
]
