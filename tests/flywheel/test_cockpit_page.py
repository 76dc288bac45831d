"""The cockpit page (ui.md "Cockpit"): staff read it, tenants do not; it says why there is
nothing; it shows the stored forecasts and never fits one."""

from flywheel.services.plan import forecasts_update


def test_cockpit_shows_the_market_figures_of_the_period(books, make_user, client):
    client.force_login(make_user("finance", username="finance-cockpit"))
    response = client.get("/cockpit/?period=2026-03")
    assert response.status_code == 200
    page = response.content.decode()
    assert "highly concentrated" in page
    assert 'data-market="revenue" title="39.00 USD"' in page
    assert "Mar 2026 per the ledger (closed)" in page
    assert 'data-market="mrr"' in page and "468" in page  # ARR 468
    assert "not enough history" in page  # 3 and 12 months before January's start
    assert 'id="quadrant-chart"' in page and 'id="cohort-chart"' in page
    # no forecast stored yet: said so, and none is fitted for the page
    assert "No forecast yet: the forecast job runs every day at 00:45 UTC" in page


def test_cockpit_shows_the_stored_forecasts(books, users, client):
    forecasts_update()
    client.force_login(users["investor"])
    page = client.get("/cockpit/?period=2026-03").content.decode()
    assert 'id="forecast-chart-tokens"' in page and 'id="forecast-chart-revenue"' in page
    assert 'data-series="factory tokens"' in page
    assert 'data-series="model:llama-70b revenue"' in page


def test_cockpit_before_the_factory_entered_service_says_why(books, users, client):
    client.force_login(users["operator"])
    page = client.get("/cockpit/?period=2025-06").content.decode()
    assert 'data-empty-reason="no_pool_in_service"' in page


def test_tenants_may_not_open_the_cockpit(users, client):
    client.force_login(users["tenant"])
    assert client.get("/cockpit/").status_code == 403
