"""A period before the factory entered service: the picker never offers it, and a page
asked for it says when service began and to choose a later period (not "an earlier" one).

The world: now is 16 December 2026 10:00 UTC; the only pool is in service from 3 November
2026 07:00 UTC."""

from datetime import UTC, datetime

import pytest

from metering.models import Pool
from tests.metering.factories import make_deployment

pytestmark = pytest.mark.both_backends


@pytest.fixture
def factory(db, now):
    make_deployment()
    Pool.objects.update(in_service_from=datetime(2026, 11, 3, 7, tzinfo=UTC))


def test_the_picker_offers_months_and_quarters_from_the_first_in_service(
    factory, users, session_client
):
    page = session_client(users["operator"]).get("/").content.decode()

    picker = page[page.index('name="period"') :]
    for offered in ('value="2026-12"', 'value="2026-11"', 'value="2026-Q4"'):
        assert offered in picker, offered
    for before in ('value="2026-10"', 'value="2026-Q3"', 'value="2025-12"'):
        assert before not in picker, before


def test_a_month_before_service_says_when_service_began(factory, users, session_client):
    page = session_client(users["operator"]).get("/?period=2026-09").content.decode()

    assert "is before the factory entered service on 3 November 2026" in page
    assert "Choose a period from November 2026 on" in page
    assert "Choose an earlier period" not in page
