from django.urls import path

from flywheel import views_flywheel

urlpatterns = [path("flywheel/", views_flywheel.flywheel, name="flywheel")]
