from django.apps import AppConfig


class FlywheelConfig(AppConfig):
    name = "flywheel"
