from django.urls import path

from billing.api import views
from portal.api.routers import Router

router = Router()
router.register("prices", views.PriceViewSet, basename="price")
router.register("contracts", views.ContractViewSet, basename="contract")
router.register("promotions", views.PromotionViewSet, basename="promotion")
router.register("invoices", views.InvoiceViewSet, basename="invoice")
router.register("ledger", views.LedgerViewSet, basename="ledger")
urlpatterns = [path("sla", views.SlaView.as_view(), name="sla"), *router.urls]
