import pytest

from portal.models import Tenant


@pytest.mark.integration
def test_worker_executes_a_task_through_redis_on_the_test_database(live_worker):
    Tenant.objects.create(slug="t1", name="T1")
    Tenant.objects.create(slug="t2", name="T2")

    result = live_worker.send_task("portal.ping")

    assert result.get(timeout=60) == {"pong": True, "tenants": 2}
