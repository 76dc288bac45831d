from django.urls import path

from . import views

urlpatterns = [
    path("usage/", views.usage, name="usage"),
    path("metering/", views.metering, name="metering"),
]
