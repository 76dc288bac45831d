from django.urls import path

from . import views

urlpatterns = [path("kpis", views.KpiView.as_view(), name="kpis")]
