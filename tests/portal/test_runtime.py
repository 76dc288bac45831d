import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from portal.pipeline import STAGES

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="the make test run sets DATABASE_URL to the throwaway PostgreSQL",
)
def test_database_is_postgresql_under_make_test(db):
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version_num")
        assert int(cursor.fetchone()[0]) >= 150000


def test_celery_beat_schedule_loads_every_job_with_a_registered_task():
    from portal.celery import app

    app.loader.import_default_modules()
    schedule = settings.CELERY_BEAT_SCHEDULE
    assert set(schedule) == {
        "scrape", "fold", "measure", "rate", "close", "flywheel", "retention", "deliver", "alerts",
        "overdue", "forecast",
    }  # fmt: skip
    for entry in schedule.values():
        assert entry["task"] in app.tasks, entry["task"]
    assert schedule["scrape"]["schedule"] == 30.0
    assert schedule["fold"]["schedule"] == 60.0
    assert schedule["rate"]["schedule"] == 60.0  # the cut reads answer as of: within a minute
    assert schedule["deliver"]["schedule"] == 30.0  # and on raise
    assert app.amqp.router.route({}, schedule["deliver"]["task"])["queue"].name == "notify"
    assert schedule["alerts"]["schedule"] == 60.0  # every minute, on the notify queue
    assert app.amqp.router.route({}, schedule["alerts"]["task"])["queue"].name == "notify"
    assert app.amqp.router.route({}, schedule["close"]["task"])["queue"].name == "billing"
    assert app.amqp.router.route({}, schedule["forecast"]["task"])["queue"].name == "measure"
    # Every stage of the pipeline runs on the beat too (the safety net), routed to its queue.
    assert {entry["task"] for entry in schedule.values()} >= set(STAGES)
    queues = {name: app.amqp.router.route({}, name)["queue"].name for name in STAGES}
    assert queues == {"metering.fold": "ingest", "billing.rate": "billing",
                      "flywheel.measure": "measure"}  # fmt: skip
    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True


def _deploy_check(extra_env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        # production settings: no test clock either (PORTAL_NOW is refused with DEBUG off)
        if k not in {"DEBUG", "SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE", "PORTAL_NOW"}
    }
    env.update(extra_env)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_production_settings_pass_check_deploy_without_warnings():
    result = _deploy_check(
        {
            "DEBUG": "0",
            "SECRET_KEY": "k3Jv9-pQ2sX8nR4tW7yZ1aB6cD0eF5gH2iJ8kL3mN9oP4qR7sT1u",
            "ALLOWED_HOSTS": "portal.example.com",
        }
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_settings_refuse_to_start_without_secret_key():
    result = _deploy_check({"DEBUG": "0", "ALLOWED_HOSTS": "portal.example.com"})
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr
