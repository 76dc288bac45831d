from django.urls import path

from flywheel.api import views_tfom
from portal.api.routers import Router

router = Router()
router.register("cost-models", views_tfom.CostModelViewSet, basename="cost-model")
router.register("factory-costs", views_tfom.FactoryCostsViewSet, basename="factory-costs")
urlpatterns = [path("tfom", views_tfom.TfomView.as_view(), name="tfom"), *router.urls]
