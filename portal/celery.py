"""The Celery app: configured from Django settings (CELERY_*), tasks autodiscovered per app.
Workers run at a lower CPU priority than the web server (WORKER_NICE): a burst of jobs,
deliveries or folds never slows a page."""

import os

from celery import Celery
from celery.signals import worker_init, worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@worker_process_init.connect
def worker_priority(**_) -> None:
    """Lower this worker process's priority to WORKER_NICE (never raise it back: that takes
    privileges), in the main process and in each pool child."""
    from django.conf import settings

    here = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, max(here, settings.WORKER_NICE))
