from django.urls import path

from billing import views

urlpatterns = [
    path("prices/", views.price_book, name="price-book"),
    path("ledger/", views.ledger, name="ledger"),
    path("invoices/", views.invoices, name="invoices"),
    path("invoices/<int:pk>/", views.invoice_detail, name="invoice-page"),
    path("invoices/<int:pk>/pdf/", views.invoice_pdf, name="invoice-page-pdf"),
    path("invoices/<int:pk>/csv/", views.invoice_csv, name="invoice-page-csv"),
    path(
        "invoices/<int:pk>/pay/", views.invoice_action, {"action": "pay"}, name="invoice-page-pay"
    ),
    path(
        "invoices/<int:pk>/void/",
        views.invoice_action,
        {"action": "void"},
        name="invoice-page-void",
    ),
    path("realization/", views.realization, name="realization"),
    path("sla/", views.sla, name="sla-page"),
]
