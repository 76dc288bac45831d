from django.urls import path

from flywheel import views_investor

urlpatterns = [
    path("investor/", views_investor.investor, name="investor"),
    path("reports/tfom/", views_investor.tfom_reports, name="tfom-reports"),
]
