"""`manage.py demo`: the steps each app registers, run in the order of the story."""

import io

from django.core.management import call_command


def test_demo_list_prints_every_registered_step_in_the_order_of_the_story():
    out = io.StringIO()
    call_command("demo", "--list", stdout=out)
    assert out.getvalue().splitlines() == [
        " 1. portal: tenants and demo logins",
        " 2. portal: webhook endpoints and email opt-ins",
        " 3. metering: pools, models, deployments",
        " 4. metering: reference curves (demo data, one GPU type not bought)",
        " 5. metering: capacity and usage from the first day of the month two months back",
        " 6. metering: incidents and maintenance",
        " 7. metering: engine telemetry of the last day",
        " 8. flywheel: cost models per pool and factory costs (demo-factory.md TCO inputs)",
        " 9. billing: price book, contracts, promotions, the closed months' invoices and payments",
        "10. flywheel: KPI snapshots of every demo day and month",
        "11. flywheel: forecasts of the factory, each pool and each model (kpis.md 6b), then "
        "the capacity plan (6c)",
        "12. flywheel: lever catalogue (published uplifts), a goal, one lever applied, one cycle",
        "13. alerts: the operators' and Acme's rules, and what they fired the last day",
    ]
