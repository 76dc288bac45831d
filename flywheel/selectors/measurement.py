"""Measure KPI inputs from the database: the one read path of every KPI and TFOM figure.

`kpi_read(period)` is the one entry point: pages, the API, `/metrics`, exports and the
flywheel's jobs call it with a resolved period and read any scope of it (`kpis(scope=…)`);
nothing else builds the `FactoryData` it returns. It loads a range once, with a number of
queries that depends on the pools, deployments and months covered, never on events or
tenants. A whole day the measure job closed is read from its factory day snapshot (each
pool's additive sums), so a period of measured days reads one row per day however many
events they hold. The rest (the live spans: the day in progress, days reopened by late
usage, days never measured) is measured from the published read models: metering's hourly
rollups and capacity samples (plus the one carried in), and billing's rated usage (paid
tokens by class and by SLO compliance, list value, realized revenue, per deployment and
hour) with the months' minimum shortfalls and rating errors. Nothing here reads raw events
or runs the rating: billing's jobs keep its rated usage current (the measure service
refreshes it first). Periods are read at hourly resolution, the resolution of the rollups:
an hour belongs to a period when it starts inside it; a period inside the loaded range
starts and ends at midnight or at the range's own bounds, since day snapshots are whole
days.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, localcontext
from functools import reduce
from operator import or_

from django.db.models import Count, Max, Q

from billing.selectors.credits import sla_credit_totals
from billing.selectors.rating.rated_usage import (
    minimum_shortfalls,
    months_touched,
    paid_by_hour,
    rating_errors,
    unused_fees,
)
from billing.selectors.reservations import reserved_by_hour
from flywheel.domain.kpis import (
    KPI_CONTEXT,
    CapacitySample,
    CapacityTotals,
    Kpis,
    PoolInputs,
    Telemetry,
    integrate_capacity,
    kpis_compute,
)
from flywheel.models import KpiSnapshot
from flywheel.selectors.production import (
    capacity_samples_read,
    hour_production,
    production_of,
    service_part,
)
from metering.selectors.factory import (
    DeploymentVersions,
    deployment_list,
    pool_list,
    pool_service_lives,
)
from metering.selectors.usage import (
    deployment_hour_totals,
    hourly_usage_list,
)
from portal import clock
from portal.periods import Period, day_floor, month_start, next_month
from portal.pipeline import MEASURE, log_positions

ZERO = Decimal(0)

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)

FACTORY = "factory"


@dataclass
class HourSums:
    """One pool's production and sales in one hour."""

    std: Decimal = ZERO
    tok: Decimal = ZERO
    compliant_std: Decimal = ZERO
    output_tokens: int = 0
    compliant_paid_std: Decimal = ZERO
    paid_output_tokens: int = 0
    list_value: Decimal = ZERO
    realized: Decimal = ZERO
    # Reservations (kpis.md 3d): GPU-seconds reserved, their capacity and the tok they
    # covered (output-token units), and the std of the paid compliant usage on demand.
    reserved: Decimal = ZERO
    reserved_cap: Decimal = ZERO
    covered_tok: Decimal = ZERO
    on_demand_compliant_paid_std: Decimal = ZERO

    def add(self, other: HourSums) -> None:
        """Add another's sums to these (in the caller's decimal context)."""
        for name in HOUR_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))


HOUR_FIELDS = tuple(HourSums.__dataclass_fields__)
RESERVATION_FIELDS = ("reserved", "reserved_cap", "covered_tok", "on_demand_compliant_paid_std")


@dataclass
class PoolSums:
    """One pool's additive figures over a period: integrated capacity (C, A, B), how much
    of it telemetry covered, and its production and sales. Sums of consecutive periods
    are the sums of their union, which is how the pages combine day snapshots."""

    calendar: Decimal
    available: Decimal
    busy: Decimal
    telemetry: Telemetry
    hours: HourSums

    def add(self, other: PoolSums) -> None:
        # Telemetry is judged over in-service time: a part with no calendar time (out of
        # service) says nothing of it. Otherwise measured when every part was, assumed when
        # every part was (integrate_capacity), else partial.
        if self.calendar == 0:
            self.telemetry = other.telemetry
        elif other.calendar != 0 and self.telemetry != other.telemetry:
            self.telemetry = "partial"
        with localcontext(KPI_CONTEXT):
            self.calendar += other.calendar
            self.available += other.available
            self.busy += other.busy
            self.hours.add(other.hours)

    def inputs(self, *, pool: str, r_refs: tuple[Decimal, ...]) -> PoolInputs:
        total = self.hours
        # Rounding in sums of exact shares can leave compliant paid a hair above compliant.
        return PoolInputs.of_sums(
            pool=pool,
            calendar_gpu_seconds=self.calendar,
            available_gpu_seconds=self.available,
            busy_gpu_seconds=self.busy,
            telemetry=self.telemetry,
            std_gpu_seconds=total.std,
            production_tokens=total.tok,
            compliant_std_gpu_seconds=total.compliant_std,
            compliant_paid_std_gpu_seconds=total.compliant_paid_std,
            output_tokens=total.output_tokens,
            paid_output_tokens=total.paid_output_tokens,
            list_value=total.list_value,
            realized_revenue=total.realized,
            reserved_gpu_seconds=total.reserved,
            reserved_capacity=total.reserved_cap,
            covered_tokens=total.covered_tok,
            on_demand_compliant_paid_std_gpu_seconds=total.on_demand_compliant_paid_std,
            deployment_r_refs=r_refs,
        )

    def as_json(self) -> dict[str, str | int]:
        """Exact decimal strings (ints for token counts): what a day snapshot stores."""
        out: dict[str, str | int] = {
            "calendar": str(self.calendar),
            "available": str(self.available),
            "busy": str(self.busy),
            "telemetry": self.telemetry,
        }
        for name in HOUR_FIELDS:
            value = getattr(self.hours, name)
            out[name] = value if isinstance(value, int) else str(value)
        return out

    @classmethod
    def from_json(cls, data: dict) -> PoolSums:
        # A snapshot written before reservations has none of their sums: none was reserved
        # then, so every paid compliant std was on demand (a reservation made since names
        # its days in billing's change log: they are measured again).
        data = {"on_demand_compliant_paid_std": data["compliant_paid_std"]} | data
        hours = HourSums(
            **{
                name: int(data[name]) if name.endswith("tokens") else Decimal(data[name])
                for name in HOUR_FIELDS
                if name in data or name not in RESERVATION_FIELDS
            }
        )
        return cls(
            calendar=Decimal(data["calendar"]),
            available=Decimal(data["available"]),
            busy=Decimal(data["busy"]),
            telemetry=data["telemetry"],
            hours=hours,
        )


def kpi_read(
    period: Period, *, remeasure: frozenset[datetime] = frozenset(), snapshots: bool = True
) -> FactoryData:
    """The KPI read of a resolved period, every scope of it: the factory's and each pool's
    (`FactoryData.kpis(scope=…)`), their TFOM inputs, rating errors and snapshot age. The
    measure stage names the days it measures again in `remeasure`."""
    return FactoryData(start=period.start, end=period.end, remeasure=remeasure, snapshots=snapshots)


def day_snapshots_stamp(
    *, start: datetime, end: datetime, scope: str = FACTORY, slugs: list[str] | None = None
) -> tuple:
    """What names the closed day snapshots of `scope` starting in [start, end) (those holding
    the sums of every pool of `slugs`, when given), exactly: their count, the latest time one
    of them was measured (a snapshot written again is measured then), and where the measure
    stage has read the change logs to (it measures a closed day again, in the transaction
    that moves its cursors, when what the day sums changed)."""
    rows = KpiSnapshot.objects.filter(
        scope=scope,
        period_kind=KpiSnapshot.PeriodKind.DAY,
        is_closed=True,
        period_start__gte=start,
        period_start__lt=end,
    )
    if slugs is not None:
        rows = rows.filter(sums__has_keys=slugs)
    found = rows.aggregate(count=Count("*"), last=Max("measured_at"))
    return found["count"], found["last"], log_positions(consumer=MEASURE)


def closed_days_stamp(*, start: datetime, end: datetime, slugs: list[str]) -> tuple | None:
    """day_snapshots_stamp of the factory's days a KPI read of [start, end) reads, when it
    reads every day of it from them (whole UTC days, each closed and holding the sums of
    every pool, `slugs`); None when some of it would be measured live."""
    if not slugs or start != day_floor(start) or end != day_floor(end):
        return None
    stamp = day_snapshots_stamp(start=start, end=end, slugs=slugs)
    return stamp if stamp[0] == (end - start) // DAY else None


class FactoryData:
    """Everything the KPIs of any period inside [start, end) need, loaded once (built by
    `kpi_read` only). With `snapshots=False` every day is measured live; the measure stage,
    which writes the day snapshots, names the days it measures again in `remeasure`
    (measured live, the rest of the range read as any read would)."""

    def __init__(
        self,
        *,
        start: datetime,
        end: datetime,
        snapshots: bool = True,
        remeasure: frozenset[datetime] = frozenset(),
    ) -> None:
        self.start, self.end = start, end
        self.pools = {p.pk: p for p in pool_list()}
        self.slugs = {p.slug: p.pk for p in self.pools.values()}
        self.service = pool_service_lives(pools=list(self.pools.values()))
        self.versions = DeploymentVersions()
        self.pool_of_deployment: dict[int, int] = {}
        self.deployment_ids: dict[str, int] = {}
        for deployment in deployment_list():
            self.pool_of_deployment[deployment.pk] = deployment.pool_id
            self.deployment_ids[deployment.slug] = deployment.pk
        self.hours: dict[int, dict[datetime, HourSums]] = defaultdict(lambda: defaultdict(HourSums))
        self.samples: dict[int, list[CapacitySample]] = defaultdict(list)
        self.rating_errors: dict[str, str] = {}
        self.month_shortfalls: dict[datetime, Decimal] | None = None  # months that are over
        self.month_sla_credits: dict[datetime, Decimal] = {}
        self.days: dict[datetime, dict[int, PoolSums]] = {}  # closed days read from snapshots
        self.measured_at: datetime | None = None  # the oldest of those snapshots
        if snapshots:
            self._load_snapshots(skip=remeasure)
        self.live = self._live_spans()
        self._load_production()
        self._load_capacity()
        self._load_sales()

    def _load_snapshots(self, *, skip: frozenset[datetime]) -> None:
        """The closed factory snapshots of the whole days inside the range that hold every
        pool's sums, but the days in `skip`."""
        rows = KpiSnapshot.objects.filter(
            scope=FACTORY,
            period_kind=KpiSnapshot.PeriodKind.DAY,
            is_closed=True,
            period_start__gte=self.start,
            period_start__lt=self.end,
        )
        for row in rows:
            begin, finish = row.period_start.astimezone(UTC), row.period_end.astimezone(UTC)
            whole = finish == begin + DAY and self.start <= begin and finish <= self.end
            if whole and begin not in skip and self.slugs.keys() <= row.sums.keys():
                self.days[begin] = {
                    pk: PoolSums.from_json(row.sums[slug]) for slug, pk in self.slugs.items()
                }
                self.rating_errors.update(row.rating_errors)
                self.measured_at = min(self.measured_at or row.measured_at, row.measured_at)

    def _live_spans(self) -> list[Period]:
        """The parts of the range not read from day snapshots, in order."""
        spans: list[Period] = []
        cursor = self.start
        for day in sorted(self.days):
            if cursor < day:
                spans.append(Period(cursor, day))
            cursor = day + DAY
        if cursor < self.end:
            spans.append(Period(cursor, self.end))
        return spans

    def _is_live(self, moment: datetime) -> bool:
        return any(span.start <= moment < span.end for span in self.live)

    def _load_production(self) -> None:
        if not self.live:
            return
        hours = reduce(or_, (Q(hour__gte=s.start, hour__lt=s.end) for s in self.live))
        rows = deployment_hour_totals(hourly_usage_list().filter(hours), end=self.end)
        with localcontext(KPI_CONTEXT):
            for row in rows:
                hour = row["hour"].astimezone(UTC)
                version = self.versions.at(row["deployment_id"], hour)
                if version is None:
                    continue
                sums = self.hours[self.pool_of_deployment[row["deployment_id"]]][hour]
                tok, compliant = hour_production(row, version)
                sums.tok += tok
                sums.std += tok / version.r_ref
                sums.compliant_std += compliant / version.r_ref
                sums.output_tokens += row["o"]

    def _load_capacity(self) -> None:
        if not self.live:
            return
        self.samples.update(capacity_samples_read(start=self.live[0].start, end=self.live[-1].end))

    def _load_sales(self) -> None:
        """The paid usage of the live spans from billing's rated usage, per pool and hour."""
        months = sorted({month for span in self.live for month in months_touched(span)})
        self.rating_errors.update(rating_errors(months=months))
        self.month_sla_credits = sla_credit_totals(start=month_start(self.start), end=self.end)
        if not self.live:
            return
        with localcontext(KPI_CONTEXT):
            for row in paid_by_hour(spans=self.live):
                hour = row["hour"].astimezone(UTC)
                version = self.versions.at(row["deployment_id"], hour)
                if version is None:
                    continue
                sums = self.hours[self.pool_of_deployment[row["deployment_id"]]][hour]
                compliant = production_of(
                    version,
                    row["compliant_output_tokens"],
                    row["compliant_input_tokens"],
                    row["compliant_cached_tokens"],
                )
                sums.compliant_paid_std += compliant / version.r_ref
                sums.paid_output_tokens += row["output_tokens"]
                sums.list_value += row["list_value"]
                sums.realized += row["realized"] - row["promotions"]
                if row["covered"]:
                    sums.covered_tok += production_of(
                        version, row["output_tokens"], row["input_tokens"], row["cached_tokens"]
                    )
                else:
                    sums.on_demand_compliant_paid_std += compliant / version.r_ref
            for (deployment_id, hour), (gpu_seconds, cap) in reserved_by_hour(
                spans=self.live
            ).items():
                sums = self.hours[self.pool_of_deployment[deployment_id]][hour.astimezone(UTC)]
                sums.reserved += gpu_seconds
                sums.reserved_cap += cap

    def _shortfalls(self) -> dict[datetime, Decimal]:
        """The minimum shortfall and the reservations' unused fees of every month over that
        the range touches (TFOM revenue needs them, the KPIs do not), from billing's rated
        tenant-months."""
        if self.month_shortfalls is None:
            now, over = clock.now(), []
            month = month_start(self.start)
            while month < self.end and next_month(month) <= now:
                over.append(month)
                month = next_month(month)
            unused = unused_fees(months=over)  # revenue like a shortfall (kpis.md 3d)
            self.month_shortfalls = {
                month: amount + unused[month]
                for month, amount in minimum_shortfalls(months=over).items()
            }
        return self.month_shortfalls

    def _month_share(self, monthly: dict[datetime, Decimal], start, end) -> Decimal:
        """Each month's amount spread evenly over its seconds; the period takes its share."""
        total = ZERO
        with localcontext(KPI_CONTEXT):
            for month, amount in monthly.items():
                month_end = next_month(month)
                overlap = (min(end, month_end) - max(start, month)).total_seconds()
                if overlap > 0 and amount:
                    total += (
                        amount
                        * Decimal(int(overlap))
                        / Decimal(int((month_end - month).total_seconds()))
                    )
        return total

    def revenue_adjustments(self, *, start: datetime, end: datetime) -> tuple[Decimal, Decimal]:
        """(minimum-commitment shortfall, SLA credits) falling in [start, end), factory-wide:
        TFOM revenue = realized revenue + shortfall − credits (kpis.md section 5)."""
        return (
            self._month_share(self._shortfalls(), start, end),
            self._month_share(self.month_sla_credits, start, end),
        )

    def pool_sums(self, pool_id: int, start: datetime, end: datetime) -> PoolSums:
        """One pool's additive sums over [start, end): capacity and production and sales,
        from the day snapshots inside it and measured over its live spans. Day snapshots are
        whole days, so a period bound inside a day must be a bound of the loaded range."""
        for bound in (start, end):
            if bound not in (self.start, self.end) and bound != day_floor(bound):
                raise ValueError("a period inside the loaded range must start and end at midnight")
        total = PoolSums(
            calendar=ZERO, available=ZERO, busy=ZERO, telemetry="measured", hours=HourSums()
        )
        for day, pools in self.days.items():
            if start <= day < end:
                total.add(pools[pool_id])
        for span in self.live:
            part = Period(max(span.start, start), min(span.end, end))
            if part.start < part.end:
                total.add(self._live_sums(pool_id, part))
        return total

    def _live_sums(self, pool_id: int, part: Period) -> PoolSums:
        pool = self.pools[pool_id]
        in_service = self.in_service(pool_id, part.start, part.end)
        # Out of service the pool counts no calendar time, so nothing is assumed of it.
        capacity = (
            integrate_capacity(
                samples=self.samples.get(pool_id, []),
                start=in_service.start,
                end=in_service.end,
                gpu_count=pool.gpu_count,
            )
            if in_service
            else CapacityTotals(
                calendar_gpu_seconds=ZERO,
                available_gpu_seconds=ZERO,
                busy_gpu_seconds=ZERO,
                covered_seconds=ZERO,
                telemetry="measured",
            )
        )
        total = HourSums()
        with localcontext(KPI_CONTEXT):
            for hour, sums in self.hours.get(pool_id, {}).items():
                if part.start <= hour < part.end:
                    total.add(sums)
        return PoolSums(
            calendar=capacity.calendar_gpu_seconds,
            available=capacity.available_gpu_seconds,
            busy=capacity.busy_gpu_seconds,
            telemetry=capacity.telemetry,
            hours=total,
        )

    def in_service(self, pool_id: int, start: datetime, end: datetime) -> Period | None:
        """The part of [start, end) the pool is in service (kpis.md section 0), or None."""
        return service_part(self.service[pool_id], start, end)

    def r_refs(self, pool_id: int) -> tuple[Decimal, ...]:
        deployments = [d for d, p in self.pool_of_deployment.items() if p == pool_id]
        return self.versions.latest_r_refs(deployments)

    def pool_inputs(self, pool_id: int, start: datetime, end: datetime) -> PoolInputs:
        return self.pool_sums(pool_id, start, end).inputs(
            pool=self.pools[pool_id].slug, r_refs=self.r_refs(pool_id)
        )

    def kpis(self, *, scope: str, start: datetime, end: datetime) -> Kpis:
        """KPIs of the factory or of one pool (by slug) over [start, end) ⊆ the loaded range."""
        if not (self.start <= start < end <= self.end):
            raise ValueError("period outside the loaded range")
        if scope == FACTORY:
            ids = sorted(self.pools)
        elif scope in self.slugs:
            ids = [self.slugs[scope]]
        else:
            raise KeyError(scope)
        return kpis_compute(
            scope=scope, start=start, end=end, pools=[self.pool_inputs(i, start, end) for i in ids]
        )

    def scopes(self) -> list[str]:
        return [FACTORY, *sorted(self.slugs)]
