from django.urls import path

from flywheel.api import views

urlpatterns = [path("kpis", views.KpiView.as_view(), name="kpis")]
