"""Flywheel cycles: measure, diagnose, learn from applied levers, check the goal; the
weekly task and the management command.

Two weeks of the constructed factory of test_diagnosis: occupancy 0.5 in the first week
(5 of 10 GPUs busy), 0.6 in the second. "Pooled scheduling" (β x1.3 typical) is applied
at the start of the second week: projected 0.65 (+30%), realized 0.6 (+20%), so its typical
multiplier becomes (1.3 + 1.2) / 2 = 1.25.
"""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from flywheel.models import Cycle, Goal, Lever, LeverApplication
from flywheel.services.loop.applications import lever_apply
from flywheel.services.loop.cycles import cycle_run
from flywheel.services.loop.versions import goal_create, lever_create
from flywheel.tasks import cycle_task
from portal.errors import FieldError
from tests.conftest import broker_mode, on_every_clock
from tests.flywheel.test_loop_diagnosis import JAN, build_factory

pytestmark = pytest.mark.both_backends
D = Decimal
WEEK1 = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday
WEEK2 = WEEK1 + timedelta(days=7)
WEEK3 = WEEK2 + timedelta(days=7)
NOW = WEEK3 + timedelta(hours=3, minutes=20)  # the Monday job


def _pooled(typical="1.3", **extra) -> Lever:
    return lever_create(
        slug="pooled",
        name="Pooled multi-model scheduling",
        description="Shares GPUs across models (AlpaServe, OSDI 2023).",
        effects={"occupancy": {"low": "1.1", "typical": typical, "high": "1.5"}},
        one_time_cost=D(180_000),
        monthly_cost=D(20_000),
        effective_from=JAN,
        **extra,
    )


@pytest.fixture
def two_weeks(db):
    build_factory(start=WEEK1, days=7, busy=5)
    build_factory(start=WEEK2, days=7, busy=6)


def test_cycle_shows_realized_against_projected_and_updates_the_multiplier(two_weeks):
    _pooled()
    # Pooled scheduling bets on demand following the busier GPUs: projected unlimited.
    application = lever_apply(slug="pooled", applied_at=WEEK2, now=NOW, demand="unlimited")
    assert application.baseline_factors["occupancy"] == "0.5"
    assert (application.baseline_start, application.baseline_end) == (WEEK1, WEEK2)

    cycle = cycle_run(start=WEEK2, end=WEEK3, now=NOW)

    application.refresh_from_db()
    assert application.evaluated_by == cycle
    realized = application.realized["occupancy"]
    assert {k: D(realized[k]) for k in ("before", "projected", "after")} == {
        "before": D("0.5"),
        "projected": D("0.65"),
        "after": D("0.6"),
    }
    assert D(realized["projected_uplift"]) == D("0.3")
    assert D(realized["realized_uplift"]) == D("0.2")
    assert D(realized["realized_multiplier"]) == D("1.2")
    assert (realized["prior_typical"], realized["updated_typical"]) == ("1.3", "1.25")
    learned = application.updated_lever
    assert learned.effects["occupancy"] == {"low": "1.1", "typical": "1.25", "high": "1.5"}
    assert (learned.source, learned.observations) == (Lever.Source.LEARNED, 1)
    assert learned.effective_from == datetime(2026, 3, 16, 3, tzinfo=UTC)
    assert list(cycle.evaluations.all()) == [application]
    assert cycle.bottleneck == "occupancy"  # 0.6 < 0.75, every other factor at target


def test_under_measured_demand_occupancy_is_compared_with_what_the_busy_time_needs(two_weeks):
    """A lever applied under the measured demand (the default): busier GPUs are not
    projected to sell more, so occupancy is expected to move by 1 / (m_α × m_η), is shown
    against what was realized, and never teaches the lever a multiplier."""
    lever_create(slug="faster", name="Faster kernels", description="Measured here.",
                 effects={"efficiency": {"low": "1", "typical": "1.25", "high": "1.5"},
                          "occupancy": {"low": "1", "typical": "1.3", "high": "1.5"}},
                 one_time_cost=D(1), monthly_cost=D(0), effective_from=JAN)  # fmt: skip
    application = lever_apply(slug="faster", applied_at=WEEK2, now=NOW)

    cycle_run(start=WEEK2, end=WEEK3, now=NOW)

    application.refresh_from_db()
    assert application.demand == "measured"
    occupancy = application.realized["occupancy"]
    # 0.5 × 1 / 1.25 = 0.4 expected; 0.6 measured (demand grew, the lever did not do it).
    assert D(occupancy["projected_multiplier"]) == D("0.8")
    assert (D(occupancy["projected"]), D(occupancy["after"])) == (D("0.4"), D("0.6"))
    assert occupancy["follows_demand"] is True and "realized_multiplier" not in occupancy
    learned = application.updated_lever
    assert learned.effects["occupancy"]["typical"] == "1.3"  # unchanged: nothing learned
    assert "realized_multiplier" in application.realized["efficiency"]


def test_cycle_run_twice_rewrites_the_cycle_and_learns_once(two_weeks):
    _pooled()
    lever_apply(slug="pooled", applied_at=WEEK2, now=NOW, demand="unlimited")

    first = cycle_run(start=WEEK2, end=WEEK3, now=NOW)
    second = cycle_run(start=WEEK2, end=WEEK3, now=NOW + timedelta(hours=2))

    assert first.pk == second.pk and Cycle.objects.count() == 1
    assert Lever.objects.filter(slug="pooled").count() == 2  # the prior and one learned version
    assert LeverApplication.objects.get().evaluated_by == first


def test_learning_blends_each_measurement_into_a_running_mean(two_weeks):
    lever = _pooled(typical="1.25", observations=1, source=Lever.Source.LEARNED)
    assert lever.observations == 1
    lever_apply(slug="pooled", applied_at=WEEK2, now=NOW, demand="unlimited")

    cycle_run(start=WEEK2, end=WEEK3, now=NOW)

    learned = Lever.objects.filter(slug="pooled").order_by("-effective_from").first()
    # (1.25 x 2 + 1.2) / 3 = 1.2333...
    assert learned.effects["occupancy"]["typical"] == "1.2333"
    assert learned.observations == 2


def test_an_application_is_measured_only_by_a_period_wholly_after_it(two_weeks):
    _pooled()
    lever_apply(slug="pooled", applied_at=WEEK2 + timedelta(days=1), now=NOW)

    cycle_run(start=WEEK2, end=WEEK3, now=NOW)

    assert LeverApplication.objects.get().evaluated_by is None
    assert Lever.objects.filter(slug="pooled").count() == 1


def test_lever_apply_refuses_the_future_and_a_second_application(two_weeks):
    _pooled()
    with pytest.raises(FieldError, match="future"):
        lever_apply(slug="pooled", applied_at=NOW + timedelta(days=1), now=NOW)
    lever_apply(slug="pooled", applied_at=WEEK2, now=NOW)
    with pytest.raises(FieldError, match="already recorded"):
        lever_apply(slug="pooled", applied_at=WEEK2, now=NOW)
    assert LeverApplication.objects.count() == 1


def test_cycle_checks_the_goal_and_proposes_the_cheapest_levers(two_weeks):
    _pooled()
    lever_create(
        slug="batching",
        name="Continuous batching",
        description="Orca, OSDI 2022.",
        effects={"occupancy": {"low": "1", "typical": "1.05", "high": "1.1"}},
        one_time_cost=D(1_000),
        monthly_cost=D(0),
        effective_from=JAN,
    )
    goal_create(effective_from=JAN, min_tfi=D("0.7"))

    cycle = cycle_run(start=WEEK2, end=WEEK3, now=NOW)

    # TFI = 1 x 0.6 x 0.9 x 1 x 1 x 1 = 0.54. Under the measured demand the cycle states, a
    # busier GPU sells nothing more: no set reaches 0.7 (if demand followed, x1.3 on β
    # would reach 0.702).
    assert cycle.is_goal_met is False
    assert cycle.goal_check[0]["key"] == "tfi" and cycle.goal_check[0]["actual"] == pytest.approx(
        0.54
    )
    assert cycle.proposal["demand"] == "measured" and not cycle.proposal["is_found"]
    assert "no set of the available levers meets the goal" in cycle.proposal["message"]


def test_cycle_without_a_cost_model_records_why(db):
    from flywheel.models import CostModel

    build_factory()
    CostModel.objects.all().delete()

    cycle = cycle_run(start=WEEK1, end=WEEK1 + timedelta(days=1), now=NOW)

    assert "no cost model" in cycle.error and cycle.figures == {}


@on_every_clock
def test_cycle_task_runs_one_cycle_over_the_last_whole_week(now, db):
    cycle_task.delay()

    cycle = Cycle.objects.get()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    assert (cycle.period_start, cycle.period_end) == (today - timedelta(days=7), today)


def test_flywheel_command_prints_the_ranked_factors(two_weeks):
    out = StringIO()

    call_command("flywheel", "--from", "2026-03-09", "--to", "2026-03-16", stdout=out)

    text = out.getvalue()
    assert "Cycle 2026-03-09 00:00 – 2026-03-16 00:00 UTC" in text
    assert "1. β occupancy: 60.0% (target 75.0%)" in text
    assert "bottleneck: occupancy" in text
    assert Cycle.objects.filter(period_start=WEEK2, period_end=WEEK3).exists()


def test_flywheel_command_refuses_a_period_naming_the_option_and_runs_nothing(two_weeks):
    with pytest.raises(CommandError) as backwards:
        call_command("flywheel", "--from", "2026-03-16", "--to", "2026-03-09", stdout=StringIO())
    with pytest.raises(CommandError) as unknown:
        call_command("flywheel", "--period", "fortnight", stdout=StringIO())

    assert str(backwards.value) == "--to: must be after from"
    assert str(unknown.value).startswith("--period: must be one of this_month, last_month,")

    assert not Cycle.objects.exists()


def test_flywheel_page_shows_realized_against_projected(two_weeks, users, session_client):
    _pooled()
    lever_apply(slug="pooled", applied_at=WEEK2, now=NOW, demand="unlimited")
    cycle_run(start=WEEK2, end=WEEK3, now=NOW)

    response = session_client(users["finance"]).get(
        "/flywheel/", {"from": "2026-03-09", "to": "2026-03-16"}
    )

    assert response.status_code == 200
    realized = response.context["realized"]
    assert [(r["lever"], r["factor"]) for r in realized] == [("pooled", "occupancy")]
    assert (realized[0]["projected_uplift"], realized[0]["realized_uplift"]) == (0.3, 0.2)
    page = response.content.decode()
    assert 'id="realized-chart"' in page
    assert "×1.3 → ×1.25" in page
    # The week it was measured in, named as its cycle's row names it (it read 9 Mar – 16 Mar).
    assert page.count('<td class="when">9 Mar – 15 Mar 2026</td>') == 2
    assert response.context["diagnosis"].bottleneck.factor == "occupancy"
    assert 'name="action" value="apply"' not in page  # finance reads, operators write


def test_operator_marks_a_lever_applied_from_the_page(two_weeks, users, session_client):
    """The time is typed as the incident forms take it, "2026-03-09 00:00 UTC" (the API's
    "T" spelling too), in a text field: a datetime-local input showed the browser's locale."""
    _pooled()
    client = session_client(users["operator"])

    page = client.get("/flywheel/?from=2026-03-09&to=2026-03-16").content.decode()
    response = client.post(
        "/flywheel/?from=2026-03-09&to=2026-03-16",
        {"action": "apply", "lever": "pooled", "applied_at": "2026-03-09 00:00 UTC"},
    )

    assert 'type="datetime-local"' not in page
    assert (
        '<input type="text" id="applied-pooled" name="applied_at" '
        'placeholder="2026-11-19 03:00 UTC" size="20" autocomplete="off" required>'
    ) in page

    assert response.status_code == 302
    application = LeverApplication.objects.get()
    assert application.applied_at == WEEK2 and application.created_by == users["operator"]
    again = client.post(
        "/flywheel/?from=2026-03-09&to=2026-03-16",
        {"action": "apply", "lever": "pooled", "applied_at": "2026-03-09T00:00"},
    )
    assert again.status_code == 400
    assert "already recorded as applied" in again.content.decode()


def test_goal_form_reports_errors_next_to_its_fields(two_weeks, users, session_client):
    client = session_client(users["operator"])

    response = client.post("/flywheel/?from=2026-03-09&to=2026-03-16", {"action": "goal"})
    number = client.post(
        "/flywheel/?from=2026-03-09&to=2026-03-16", {"action": "goal", "min_tfi": "lots"}
    )

    assert response.status_code == 400
    assert response.context["form_errors"] == {
        "min_gross_margin": "set at least one of gross margin, EBITDA per month or TFI"
    }
    assert number.context["form_errors"] == {"min_tfi": "A valid number is required."}
    assert not Goal.objects.exists()


def test_goal_form_takes_percent_as_shown_and_keeps_the_input_on_error(
    two_weeks, users, session_client
):
    """The fields say (%): 150 is refused as a percentage (not as "a ratio at most 1"),
    and the page shows what the user typed, not the old goal."""
    client = session_client(users["operator"])

    refused = client.post(
        "/flywheel/?from=2026-03-09&to=2026-03-16",
        {"action": "goal", "min_gross_margin": "150", "min_tfi": "22.5", "note": "stretch"},
    )
    saved = client.post(
        "/flywheel/?from=2026-03-09&to=2026-03-16",
        {"action": "goal", "min_gross_margin": "55", "min_tfi": "22.5"},
    )

    assert refused.status_code == 400
    assert refused.context["form_errors"] == {
        "min_gross_margin": "a percentage from 0 to 100 (55 means 55%)"
    }
    page = refused.content.decode()
    assert 'name="min_gross_margin" inputmode="decimal" value="150"' in page
    assert 'name="min_tfi" inputmode="decimal" value="22.5"' in page
    assert 'value="stretch"' in page
    assert saved.status_code == 302
    goal = Goal.objects.get()
    assert (goal.min_gross_margin, goal.min_tfi) == (Decimal("0.55"), Decimal("0.225"))


def _drained(queue) -> list:
    """Every message waiting in `queue`, in the order sent."""
    messages = []
    while True:
        try:
            messages.append(queue.get(timeout=1))
        except queue.Empty:
            return messages


@pytest.mark.parametrize("now", [NOW], indirect=True)
def test_the_page_queues_a_cycle_and_follows_it_until_the_job_ran_it(
    two_weeks, users, session_client, now
):
    """Requests never run a job (architecture.md): the page's button sends the cycle job of
    the last whole week (9-16 March 2026 at NOW) to the broker, where nothing runs it here.
    The page says it is queued and polls its history until the job has run it."""
    client = session_client(users["operator"])
    with broker_mode("memory://") as app:
        queued = client.post("/flywheel/", {"action": "cycle"})
        with app.connection_for_read() as connection:
            sent = _drained(connection.SimpleQueue("measure"))
    waiting = client.get(queued["Location"])
    (message,) = [
        m for m in sent if m.headers["task"] == "flywheel.cycle"
    ]  # one, maybe beside the stages a write schedules

    assert queued.status_code == 302
    assert queued["Location"] == "/flywheel/?queued=2026-03-16T03%3A20%3A00Z"
    assert not Cycle.objects.exists()  # nothing ran in the request
    assert message.payload[1] == {"start": "2026-03-09T00:00:00Z", "end": "2026-03-16T00:00:00Z"}
    page = waiting.content.decode()
    # The period named as the cycle rows name theirs (it read 2026-03-09 – 2026-03-16).
    assert "Cycle over 9 Mar – 15 Mar 2026 queued: the cycle job runs it" in page
    assert (
        '<tr class="queued" role="status">\n      <td class="when">9 Mar – 15 Mar 2026</td>' in page
    )
    assert 'hx-trigger="every 2s" hx-select="#cycles"' in page

    cycle_task.apply(kwargs=message.payload[1])  # the worker's turn
    ran = client.get(queued["Location"]).content.decode()

    cycle = Cycle.objects.get()
    assert (cycle.period_start, cycle.period_end, cycle.ran_at) == (WEEK2, WEEK3, NOW)
    assert '<tr class="queued"' not in ran and 'hx-trigger="every 2s"' not in ran
    assert '<td class="when">9 Mar – 15 Mar 2026</td>' in ran  # the 7 whole days it judged


def test_finance_may_not_write_on_the_page(two_weeks, users, session_client):
    response = session_client(users["finance"]).post("/flywheel/", {"action": "cycle"})

    assert response.status_code == 403
    assert not Cycle.objects.exists()


def test_a_lever_that_moves_nothing_is_shown_in_place_and_never_proposed(
    two_weeks, users, session_client
):
    """Continuous batching at ×1.00 (already running here) costs 10,000 and moves no
    factor: the page calls it already in place and the goal's proposal never includes it."""
    from flywheel.selectors.loop.levers import lever_specs, levers_in_force, proposable_levers

    _pooled()
    lever_create(slug="batching", name="Continuous batching", description="In place.",
                 effects={"efficiency": {"low": "1", "typical": "1", "high": "1"}},
                 one_time_cost=D(10_000), monthly_cost=D(0), effective_from=JAN)  # fmt: skip

    specs = lever_specs(levers_in_force(at=NOW), start=WEEK2, end=WEEK3)
    proposable = [spec.slug for spec in proposable_levers(specs.values())]
    page = session_client(users["operator"]).get("/flywheel/?from=2026-03-09&to=2026-03-16")

    assert proposable == ["pooled"]
    assert "already in place" in page.content.decode()


def test_flywheel_page_shows_the_goals_lever_sets_under_both_demands(
    two_weeks, users, session_client
):
    _pooled()
    goal_create(effective_from=JAN, min_tfi=D("0.7"))

    response = session_client(users["operator"]).get(
        "/flywheel/", {"from": "2026-03-09", "to": "2026-03-16"}
    )

    page = response.content.decode()
    measured, unlimited = response.context["proposals"]
    assert (measured.demand.kind, measured.is_found) == ("measured", False)
    assert (unlimited.demand.kind, unlimited.levers) == ("unlimited", ("pooled",))
    unlimited_block = page.split('id="goal-proposal-unlimited"')[1].split("</div>")[0]
    assert "pooled" in unlimited_block and "If demand follows (unlimited)" in unlimited_block
    assert "Under measured demand" in page and "No lever set meets it" in page
    assert "EBITDA gain under measured demand" in page
    assert "EBITDA per 30.4-day month" in page  # a week: not a calendar month
    assert 'id="scenario-demand"' in page


def test_the_page_shows_the_weekly_cycles_proposal_beside_the_goal_box_when_they_differ(
    two_weeks, users, session_client
):
    """The cycle judged the second week (TFI 1 x 0.6 x 0.9 = 0.54) against a goal of 0.7:
    under the measured demand no set meets it, nor does one on the page for that week, so
    nothing is shown beside. Once the goal is replaced by 0.5, the page's period meets it
    with no lever while the cycle's proposal stands: the page shows it beside, with why."""
    _pooled()
    goal_create(effective_from=JAN, min_tfi=D("0.7"))
    cycle_run(start=WEEK2, end=WEEK3, now=NOW)
    client = session_client(users["operator"])
    week = {"from": "2026-03-09", "to": "2026-03-16"}

    agreeing = client.get("/flywheel/", week)
    goal_create(effective_from=WEEK3 + timedelta(hours=4), min_tfi=D("0.5"))
    differing = client.get("/flywheel/", week)

    assert agreeing.context["cycle_beside"] is None
    assert 'id="cycle-proposal"' not in agreeing.content.decode()
    assert differing.context["goal_check"].is_met and not differing.context["proposals"]
    beside = differing.context["cycle_beside"]
    assert (beside["proposal"]["is_found"], beside["proposal"]["levers"]) == (False, [])
    page = " ".join(differing.content.decode().split())
    assert "The weekly cycle's proposal: 9 Mar – 15 Mar 2026 (7 whole days), under measured" in page
    assert (
        "It differs from this page's (the goal met: none needed) because the cycle checked "
        "the goal in force when it ran, since replaced." in page
    )


def test_operator_adds_a_lever_version_from_the_page(two_weeks, users, session_client):
    """The lever form: new multipliers and a one-time cost (typed with a thousands
    separator), the monthly cost left empty keeps the one in force; a refused number reads
    as the API's message and writes nothing."""
    first = _pooled()
    client = session_client(users["operator"])
    form = {"action": "lever", "slug": "pooled", "occupancy.low": "1.1",
            "occupancy.typical": "1.4", "occupancy.high": "1.6"}  # fmt: skip

    refused = client.post("/flywheel/", {**form, "one_time_cost": "lots"})
    unknown = client.post("/flywheel/", {**form, "slug": "nothing"})
    no_date = client.post("/flywheel/", {"action": "apply", "lever": "pooled"})
    saved = client.post("/flywheel/", {**form, "one_time_cost": "200,000", "monthly_cost": ""})

    assert refused.status_code == 400
    assert refused.context["form_errors"] == {
        "one_time_cost": 'must be a decimal amount written plainly, e.g. "1250.00"'  # the API's
    }
    assert unknown.context["form_errors"] == {"slug": "unknown lever"}
    assert no_date.context["form_errors"] == {
        "applied_at": "give the date and time (UTC) it went into service, e.g. 2026-11-19 03:00 UTC"
    }
    assert saved.status_code == 302
    new = Lever.objects.exclude(pk=first.pk).get()
    assert new.effective_from > first.effective_from
    assert {k: Decimal(str(v)) for k, v in new.effects["occupancy"].items()} == {
        "low": Decimal("1.1"), "typical": Decimal("1.4"), "high": Decimal("1.6")
    }  # fmt: skip
    assert (new.one_time_cost, new.monthly_cost) == (Decimal(200_000), Decimal(20_000))
    assert not LeverApplication.objects.exists()
