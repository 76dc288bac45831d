"""A month's rating as billing stores it (billing.services.rating stores through it): its
rated usage rows (per tenant, project, deployment, hour, sale, service tier and coverage:
tokens, their SLO-compliant part, list value, discounts, realized amount) and its hours'
states (the running allowance and tier totals, paid quantities and realized amount the
rating resumes from), and back."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache

from django.db import connection

from billing.domain.rating.hours import HourPrefix, HourState
from billing.domain.rating.types import RatedItem, Running
from billing.models import RatedHour, RatedHourPrefix, RatedUsage, RatedUsageMonth
from billing.selectors.rating.inputs import MonthRating, quantities_of
from billing.selectors.rating.items import row_cell
from metering.domain.usage.compliance import is_slo_compliant, tier_thresholds
from metering.domain.usage.rollup import PRODUCTION_FIELDS, TOKEN_FIELDS
from metering.selectors.factory import DeploymentVersions, deployment_list
from portal.bulk import exact_sums, rows_add
from portal.money import EXACT, fraction_to_decimal
from portal.periods import hour_floor

ZERO = Decimal(0)
HUNDRED = Decimal(100)

RATED_TOKENS = TOKEN_FIELDS
RATED_COMPLIANT = tuple(f"compliant_{name}" for name in PRODUCTION_FIELDS)
RATED_MONEY = ("list_value", "contract_discount", "tier_discount", "realized")


@lru_cache(maxsize=8192)
def stored_time(moment: datetime):
    """A datetime as the ORM stores it (SQLite: text), for rows written without the ORM; the
    same hours come back for every tenant, so they are converted once."""
    return connection.ops.adapt_datetimefield_value(moment)


HOUR_FIELDS = (
    "tenant_id", "month_start", "hour", "consumed", "paid_tokens", "realized", "quantities",
    "cuts",
)  # fmt: skip


def hour_row(tenant_id: int, month_start: datetime, state: HourState) -> tuple:
    """A state as billing stores it: a row of HOUR_FIELDS."""
    when = stored_time
    cuts = {instant.isoformat(): str(realized) for instant, realized in state.cuts.items()}
    return (
        tenant_id,
        when(month_start),
        when(state.hour),
        state.running.consumed,
        state.running.paid_tokens,
        state.realized,
        json.dumps(quantities_json(state.quantities)),
        json.dumps(cuts),
    )


def hour_state_of(row: RatedHour | RatedHourPrefix) -> HourState:
    """A stored state (of an hour's end, or inside it: HourPrefix.state) as the rating
    resumes from it."""
    return HourState(
        hour=row.hour.astimezone(UTC),
        running=Running(consumed=row.consumed, paid_tokens=row.paid_tokens),
        realized=Decimal(row.realized),
        quantities=quantities_of(row.quantities),
        cuts={datetime.fromisoformat(k): Decimal(v) for k, v in row.cuts.items()},
    )


def prefix_row(tenant_id: int, month_start: datetime, prefix: HourPrefix) -> RatedHourPrefix:
    """A state inside an hour as billing stores it (sums: integers as they are, decimals as
    text, so that they read back as they were)."""
    state = prefix.state
    return RatedHourPrefix(
        tenant_id=tenant_id,
        month_start=month_start,
        hour=state.hour,
        at=prefix.at,
        events=prefix.events,
        tokens=prefix.tokens,
        versions=prefix.versions,
        consumed=state.running.consumed,
        paid_tokens=state.running.paid_tokens,
        realized=str(state.realized),
        quantities=quantities_json(state.quantities),
        cuts={instant.isoformat(): str(realized) for instant, realized in state.cuts.items()},
        cells=[[*key, *map(_json_sum, values)] for key, values in prefix.cells.items()],
        explained=[[*key, *values] for key, values in prefix.explained.items()],
        spent=sorted(prefix.spent),
    )


def _json_sum(value: int | Decimal) -> int | str:
    return value if isinstance(value, int) else str(value)


def prefix_of_row(row: RatedHourPrefix) -> HourPrefix:
    """A stored state inside an hour as the rating resumes from it."""
    return HourPrefix(
        at=row.at.astimezone(UTC),
        state=hour_state_of(row),
        events=row.events,
        tokens=row.tokens,
        versions=row.versions,
        cells={
            tuple(cell[:5]): tuple(v if isinstance(v, int) else Decimal(v) for v in cell[5:])
            for cell in row.cells
        },
        explained={tuple(cell[:3]): tuple(cell[3:]) for cell in row.explained},
        spent=frozenset(row.spent),
    )


def quantities_json(quantities: dict) -> list[list]:
    """Paid quantities per usage line and project as billing stores them: [model, service
    tier, class, price class, price, multiplier, contract %, tier %, tier from, quantity,
    project id]."""
    return [
        [
            model, service_tier, str(token), str(priced), str(price),
            None if multiplier is None else str(multiplier), str(contract), str(tier), tier_from,
            quantity, project,
        ]
        for (
            model, service_tier, token, priced, price, multiplier, (contract, tier, tier_from),
            project,
        ), quantity in sorted(quantities.items(), key=str)
    ]  # fmt: skip


RATED_FIELDS = (
    "tenant_id",
    "project_id",
    "deployment_id",
    "hour",
    "month_start",
    "sale",
    "service_tier",
    "covered",
    *RATED_TOKENS,
    *RATED_COMPLIANT,
    *RATED_MONEY,
)


# A month total's cell (RatedUsageMonth): a rated usage row's but its hour.
MONTH_CELL = ("tenant_id", "project_id", "deployment_id", "sale", "service_tier", "covered")
RATED_SUMS = (*RATED_TOKENS, *RATED_COMPLIANT, *RATED_MONEY)


def month_cells(rows) -> dict[tuple, list]:
    """Rated usage rows (a queryset) summed per MONTH_CELL, exactly: how many rows, then
    their sums."""
    return exact_sums(rows, MONTH_CELL, RATED_SUMS)


def month_totals_move(
    month_start: datetime, removed: Mapping[tuple, list], added: Mapping[tuple, list]
) -> None:
    """The month totals (RatedUsageMonth) less the rated usage rows `removed` and plus those
    `added` (month_cells of each); a cell left with no row is deleted."""
    moves = []
    for key in removed.keys() | added.keys():
        gone, new = removed.get(key), added.get(key)
        if gone == new:
            continue
        if gone is None:
            moves.append((*key, *new))
        elif new is None:
            moves.append((*key, *(-value for value in gone)))
        else:
            moves.append((*key, *(a - b for a, b in zip(new, gone, strict=True))))
    if not moves:
        return
    when = stored_time(month_start)
    rows_add(
        RatedUsageMonth._meta.db_table,
        ("month_start", *MONTH_CELL),
        ("rows", *RATED_SUMS),
        sorted((when, *move) for move in moves),
    )
    RatedUsageMonth.objects.filter(
        tenant_id__in={move[0] for move in moves}, month_start=month_start, rows=0
    ).delete()


def rated_usage_rows(rating: MonthRating) -> list[tuple]:
    """The rating's items summed per tenant, project, deployment, hour, sale, service tier
    and coverage, with what an hour rated from a state inside it (MonthRating.resumed) had
    rated before: rows of RATED_FIELDS."""
    versions = DeploymentVersions()
    deployments = dict(deployment_list().values_list("slug", "pk"))
    cells: dict[tuple, list] = {}
    rests = _rest_rows(rating, versions)
    with localcontext(EXACT):
        for (tenant_id, hour), prefix in rating.resumed.items():
            for (project, deployment_id, sale, tier, covered), values in prefix.cells.items():
                key = (tenant_id, project, deployment_id, hour, rating.month_start, sale, tier)
                _sums_add(cells, (*key, covered), values)
        for tenant_id, rated in rating.rated.items():
            rows = {
                (hour, row["deployment"], row["service_tier"], row["project_id"]): rests.get(
                    (tenant_id, hour, row_cell(row)), row
                )
                for hour, hour_rows in rating.rows.get(tenant_id, {}).items()
                for row in hour_rows
            }
            for item in rated.items:
                key, values = _item_sums(rating, item, rows, deployments, versions)
                _sums_add(cells, (tenant_id, *key), values)
    when = stored_time
    return [
        (tenant_id, project, deployment_id, when(hour), when(month), sale, tier, covered, *sums)
        for (tenant_id, project, deployment_id, hour, month, sale, tier, covered), sums in (
            cells.items()
        )
    ]


def _item_sums(
    rating: MonthRating,
    item: RatedItem,
    rows: dict[tuple, dict],
    deployments: dict[str, int],
    versions: DeploymentVersions,
) -> tuple[tuple, tuple]:
    """A rated item's rated usage cell (project, deployment id, hour, month, sale, service
    tier, covered) and what it adds to it (RATED_FIELDS' sums; unsold: its tokens alone)."""
    usage = item.item
    hour = hour_floor(usage.time)
    sale = RatedUsage.Sale.PAID if item.is_paid else item.unsold_reason.value
    deployment_id = deployments[usage.deployment]
    key = (
        usage.project, deployment_id, hour, rating.month_start, str(sale), usage.service_tier,
        item.covered,
    )  # fmt: skip
    tokens = tuple(getattr(usage, name) for name in RATED_TOKENS)
    if not item.is_paid:
        return key, tokens
    compliant = _compliant_tokens(
        item,
        event=rating.events.get((usage.source, usage.id)),
        row=rows.get((hour, usage.deployment, usage.service_tier, usage.project)),
        version=versions.at(deployment_id, usage.time),
    )
    return key, (*tokens, *compliant, *_amounts(item))


def _sums_add(cells: dict[tuple, list], key: tuple, values) -> None:
    """`values` added to the sums of `cells[key]` (RATED_FIELDS' sums, from the first)."""
    sums = cells.get(key)
    if sums is None:
        sums = cells[key] = [0] * (len(RATED_TOKENS) + len(RATED_COMPLIANT)) + [ZERO] * 4
    for index, value in enumerate(values):
        sums[index] += value


def hour_prefixes(
    rating: MonthRating, wanted: Mapping[int, tuple[HourState, datetime, frozenset[int]]]
) -> dict[int, HourPrefix]:
    """Per tenant of `wanted` (tenant id -> (state, at, covered)), the state inside its split
    hour `state.hour` whose events were rated one by one up to `at` (MonthRating.settled;
    `state` the rating's state then; `covered` the deployments its reservations cover, whose
    events were all rated), to rate that hour from it next time (RatedHourPrefix); none
    where an event it read had no rollup row yet (not folded: the next rating reads it
    again) or a covered deployment's capacity is not spent by `at` (a later event may be
    covered: what the hour's covered items realize is known once they all are)."""
    if not wanted:
        return {}
    versions = DeploymentVersions()
    deployments = dict(deployment_list().values_list("slug", "pk"))
    read: dict[int, list[dict]] = defaultdict(list)
    for event in rating.events.values():
        if event["tenant_id"] in wanted:
            read[event["tenant_id"]].append(event)
    prefixes = {}
    for tenant_id, (state, at, covered) in wanted.items():
        hour = state.hour
        events = [event for event in read[tenant_id] if hour <= event["time"] <= at]
        rows = {
            (hour, row["deployment"], row["service_tier"], row["project_id"]): row
            for row in rating.rows[tenant_id][hour]
        }
        names = {row_cell(row) for row in rows.values()}
        if any(row_cell(event) not in names for event in events):
            continue
        rated = [item for item in rating.rated[tenant_id].items if hour <= item.item.time <= at]
        on_demand = [item for item in rated if not item.covered]
        if not covered <= {deployments[item.item.deployment] for item in on_demand}:
            continue
        cells: dict[tuple, list] = {}
        with localcontext(EXACT):
            for item in rated:
                (project, deployment_id, _, _, sale, tier, is_covered), values = _item_sums(
                    rating, item, rows, deployments, versions
                )
                _sums_add(cells, (project, deployment_id, sale, tier, is_covered), values)
        prefixes[tenant_id] = HourPrefix(
            at=at,
            state=state,
            events=len(events),
            tokens=sum(item.item.total_tokens for item in on_demand),
            versions=rating.versions,
            cells={key: tuple(values) for key, values in cells.items()},
            explained=_explained(events, versions),
            spent=covered,
        )
    return prefixes


def _explained(events: list[dict], versions: DeploymentVersions) -> dict[tuple, tuple[int, ...]]:
    """The events' sums per row_cell: their tokens (TOKEN_FIELDS), requests and tokens within
    their version's SLO (PRODUCTION_FIELDS)."""
    explained: dict[tuple, list[int]] = defaultdict(
        lambda: [0] * (len(TOKEN_FIELDS) + 1 + len(PRODUCTION_FIELDS))
    )
    for event in events:
        version = versions.at(event["deployment_id"], event["time"])
        within = _within_slo(event, event["service_tier"], version)
        values = (
            *(event[name] for name in TOKEN_FIELDS),
            event["requests"],
            *(event[name] if within else 0 for name in PRODUCTION_FIELDS),
        )
        sums = explained[row_cell(event)]
        for index, value in enumerate(values):
            sums[index] += value
    return {key: tuple(values) for key, values in explained.items()}


def _amounts(item: RatedItem) -> tuple[Decimal, ...]:
    """(list value, contract discount, tier discount, realized) of a paid item: the
    contract discount comes off the list value first, the tier discount off the rest."""
    contract = item.list_value * item.contract_discount_pct / HUNDRED
    tier = (item.list_value - contract) * item.tier_discount_pct / HUNDRED
    return item.list_value, contract, tier, item.realized_amount


def _rest_rows(rating: MonthRating, versions: DeploymentVersions) -> dict[tuple, dict]:
    """Per (tenant id, hour, row_cell) of an hour whose events were rated one by one up to
    where it was settled (MonthRating.settled), what its rollup row holds beyond those
    events: the input, output and compliant tokens its rest item (hour_items) is a share of."""
    if not rating.settled:
        return {}
    read: dict[tuple, list[int]] = defaultdict(lambda: [0] * (2 + len(RATED_COMPLIANT)))
    first_compliant = len(TOKEN_FIELDS) + 1
    for (tenant_id, hour), prefix in rating.resumed.items():  # the events rated before
        for cell, sums in prefix.explained.items():
            read[tenant_id, hour, cell] = [
                sums[TOKEN_FIELDS.index("input_tokens")],
                sums[TOKEN_FIELDS.index("output_tokens")],
                *sums[first_compliant:],
            ]
    for event in rating.events.values():
        hour = hour_floor(event["time"])
        settled = rating.settled.get((event["tenant_id"], hour))
        if settled and event["deployment_id"] not in settled[1]:
            sums = read[event["tenant_id"], hour, row_cell(event)]
            sums[0] += event["input_tokens"]
            sums[1] += event["output_tokens"]
            version = versions.at(event["deployment_id"], event["time"])
            if _within_slo(event, event["service_tier"], version):
                for index, name in enumerate(PRODUCTION_FIELDS, start=2):
                    sums[index] += event[name]
    rests = {}
    for (tenant_id, hour), (_, covered) in rating.settled.items():
        for row in rating.rows.get(tenant_id, {}).get(hour, ()):
            if row["deployment_id"] in covered:
                continue  # its events were all rated one by one
            key = (tenant_id, hour, row_cell(row))
            taken = read.get(key, [0] * (2 + len(RATED_COMPLIANT)))
            rests[key] = {
                **row,
                "input_tokens": max(row["input_tokens"] - taken[0], 0),
                "output_tokens": max(row["output_tokens"] - taken[1], 0),
                **{
                    name: max(row[name] - value, 0)
                    for name, value in zip(RATED_COMPLIANT, taken[2:], strict=True)
                },
            }
    return rests


def _within_slo(event: dict, service_tier: str, version) -> bool:
    """Whether an event met its version's SLO for its tier."""
    slo_ttft_ms, slo_tpot_ms = tier_thresholds(version, service_tier)
    return is_slo_compliant(
        is_error=False,
        ttft_ms=event.get("ttft_ms"),
        tpot_ms=event.get("tpot_ms"),
        slo_ttft_ms=slo_ttft_ms,
        slo_tpot_ms=slo_tpot_ms,
    )


def _compliant_tokens(item: RatedItem, *, event, row, version) -> tuple[int | Decimal, ...]:
    """The tokens of a paid item (input, cached, output) whose requests met their SLO: an
    event's when it is within its version's SLO, a rollup row's compliant tokens for an
    aggregate; a part of either (what a split hour's events leave of the row, an event split
    at a boundary) holds its share of them, a fraction (kpis.md section 3, "Boundaries")."""
    usage = item.item
    if usage.id:
        whole = usage.whole
        if not _within_slo(event, usage.service_tier, version):
            return (0, 0, 0)
        compliant: tuple[int, ...] = (whole.input_tokens, whole.cached_tokens, whole.output_tokens)
        share = usage.share
    else:
        compliant = tuple(row[name] for name in RATED_COMPLIANT)
        total = row["input_tokens"] + row["output_tokens"]
        share = Fraction(usage.total_tokens, total) if total else Fraction(0)
    if share == 1:
        return compliant
    return tuple(fraction_to_decimal(tokens * share) for tokens in compliant)
