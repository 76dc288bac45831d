"""The Celery app: configured from Django settings (CELERY_*), tasks autodiscovered per app.
Workers run at a lower CPU priority than the web server (WORKER_NICE): a burst of jobs,
deliveries or folds never slows a page."""

import os

from celery import Celery, shared_task
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


# The one policy every job of the apps runs under (job_task).
JOB_POLICY = {
    "acks_late": True,  # acknowledged once done: each job is idempotent
    "reject_on_worker_lost": True,  # and redelivered when its worker dies
    "max_retries": 0,  # no retries: the beat's next run is the retry
    "ignore_result": True,  # nothing reads a job's result
}


def job_task(name: str, *, time_limit: int, soft_time_limit: int | None = None):
    """The decorator of an app's job: a task named `name` under JOB_POLICY, killed after
    `time_limit` seconds (a job that stops cleanly is told `soft_time_limit` seconds in)."""
    return shared_task(
        name=name, soft_time_limit=soft_time_limit, time_limit=time_limit, **JOB_POLICY
    )
