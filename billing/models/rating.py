from django.db import models

from portal.models import Tenant


class RatedTenantMonth(models.Model):
    """Billing's read model of one tenant's month as rated: the totals other figures need
    (the base of an SLA credit, the minimum shortfall), written with its rated usage by the
    rate stage (billing.services.rating)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    month_start = models.DateTimeField()
    currency = models.CharField(max_length=3, blank=True)
    # Usage lines after discounts and tiers, before promotions, and reservation lines (rounded
    # per line): the SLA credit base (kpis.md 3b). Of it, the reservation lines':
    usage_amount = models.DecimalField(max_digits=20, decimal_places=4, default=0)
    reserved_amount = models.DecimalField(max_digits=20, decimal_places=4, default=0)
    minimum_shortfall = models.DecimalField(max_digits=20, decimal_places=4, default=0)
    # Unrounded: the month's realized amounts on demand before promotions, the credits applied
    # to them, and their ratio, which gives every hour of rated usage on demand its share when
    # read (covered usage is realized at its reservations' fees: promotions never apply).
    realized = models.DecimalField(max_digits=40, decimal_places=20, default=0)
    promotions = models.DecimalField(max_digits=40, decimal_places=20, default=0)
    promotion_rate = models.DecimalField(max_digits=40, decimal_places=30, default=0)
    # The month's paid quantities per usage line and project (as RatedHour's), its invoice
    # lines and the credits applied as rated: what a draft invoice bills.
    quantities = models.JSONField(default=list)
    lines = models.JSONField(default=list)
    credits_applied = models.JSONField(default=list)  # [credit id, applied, billed]
    error = models.TextField(blank=True)  # the RatingError when it cannot be rated
    rated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "month_start"], name="rated_tenant_month")
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.month_start:%Y-%m}"


class RatedSums(models.Model):
    """What rated usage sums: tokens by class, the paid tokens that met the deployment's SLO,
    and the money (RatedUsage's per hour, RatedUsageMonth's over its month)."""

    input_tokens = models.BigIntegerField(default=0)  # includes cached and cache-write
    cached_tokens = models.BigIntegerField(default=0)
    cache_write_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)  # includes reasoning
    reasoning_tokens = models.BigIntegerField(default=0)
    # Of those (paid rows), the tokens of requests within the SLO; a part of an event split
    # at a boundary holds its share of the event's, a fraction (kpis.md section 3).
    compliant_input_tokens = models.DecimalField(max_digits=30, decimal_places=12, default=0)
    compliant_cached_tokens = models.DecimalField(max_digits=30, decimal_places=12, default=0)
    compliant_output_tokens = models.DecimalField(max_digits=30, decimal_places=12, default=0)
    # Unrounded amounts in the tenant-month's currency (0 on unsold rows).
    list_value = models.DecimalField(max_digits=30, decimal_places=12, default=0)
    contract_discount = models.DecimalField(max_digits=30, decimal_places=12, default=0)
    tier_discount = models.DecimalField(max_digits=30, decimal_places=12, default=0)
    realized = models.DecimalField(max_digits=30, decimal_places=12, default=0)

    class Meta:
        abstract = True


class RatedUsage(RatedSums):
    """Billing's published read model of rated usage: one tenant's project's usage of one
    deployment at one service tier in one hour as its month rated, paid or unsold for one
    reason (a split hour, where the free allowance runs out, holds both), and paid usage
    covered by the tenant's reservations apart from paid usage on demand (kpis.md 3d). Paid
    rows carry tokens by class, the paid tokens that met the deployment's SLO, and the money:
    list value, contract and tier discounts and the realized amount before promotions (an
    on-demand row's promotions are its realized amount times its tenant-month's promotion
    rate; a covered row's realized amount is its share of the hour's fees, never promoted).
    Written only with its tenant-month's RatedTenantMonth and RatedHour
    (billing.services.rating), so it is as fresh as they are."""

    class Sale(models.TextChoices):
        PAID = "paid"
        TRIAL = "trial"
        INTERNAL = "internal"
        ALLOWANCE = "allowance"
        NO_CONTRACT = "no_contract"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    # The tenant's project (portal.Project's id), 0 for its `(none)` (as metering's rollups).
    project_id = models.BigIntegerField(default=0, db_default=0)
    # Set by the rate stage from the tenant-month it upserts with these rows: no constraint
    # check at commit for each of a month's 300,000 rows.
    tenant_month = models.ForeignKey(
        RatedTenantMonth, on_delete=models.CASCADE, related_name="usage", db_constraint=False
    )
    deployment = models.ForeignKey("metering.Deployment", on_delete=models.CASCADE)
    hour = models.DateTimeField()
    month_start = models.DateTimeField()
    sale = models.CharField(max_length=16, choices=Sale.choices)
    service_tier = models.CharField(max_length=8, default="standard")
    covered = models.BooleanField(default=False)  # paid within the tenant's reservations

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "tenant",
                    "deployment",
                    "hour",
                    "sale",
                    "service_tier",
                    "covered",
                    "project_id",
                ],
                name="rated_usage_cell",
            )
        ]
        indexes = [
            models.Index(fields=["hour"], name="rated_usage_hour"),
            # A tenant's month, and its projects' rows in it (the budget read of a project
            # scans its ~1/21 of a tenant's month, not all of it; docs/performance.md).
            models.Index(
                fields=["tenant", "month_start", "project_id"], name="rated_usage_tenant_project"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.deployment_id} {self.hour:%Y-%m-%d %H}:00 {self.sale}"


class RatedUsageMonth(RatedSums):
    """Billing's read model of rated usage summed over its month: a tenant's RatedUsage rows
    of one project, deployment, sale, service tier and coverage in one month, how many and
    their sums. The rate stage keeps it with them, in the same transaction, by what it
    replaces and writes (billing.services.rating), so that a month's figures per project (the
    chargeback, kpis.md 3e; the reservations' covered usage) read a row a cell, not the
    month's hours."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, db_constraint=False)
    month_start = models.DateTimeField()
    project_id = models.BigIntegerField(default=0)  # portal.Project's id, 0 for (none)
    deployment = models.ForeignKey(
        "metering.Deployment", on_delete=models.CASCADE, db_constraint=False
    )
    sale = models.CharField(max_length=16, choices=RatedUsage.Sale.choices)
    service_tier = models.CharField(max_length=8, default="standard")
    covered = models.BooleanField(default=False)
    rows = models.BigIntegerField()  # the month's RatedUsage rows summed here

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "tenant",
                    "month_start",
                    "project_id",
                    "deployment",
                    "sale",
                    "service_tier",
                    "covered",
                ],
                name="rated_usage_month_cell",
            )
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.month_start:%Y-%m} {self.deployment_id} {self.sale}"


class RatedHour(models.Model):
    """Where a tenant's month's rating stands at the end of an hour with usage
    (billing.domain.rating.hours): the free allowance's and the volume tiers' running
    totals, the realized amount so far before promotions, the hour's paid quantities per
    usage line, and the realized amount before each credit expiry inside the
    hour. Written with the hour's rated usage; the rating of a later hour resumes from it."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, db_constraint=False)
    month_start = models.DateTimeField()
    hour = models.DateTimeField()
    consumed = models.BigIntegerField()  # the allowance's running total, every ok item
    paid_tokens = models.BigIntegerField()  # the tiers' running total, paid items
    realized = models.DecimalField(max_digits=40, decimal_places=20)
    # [[model, service tier, class, price class, price, multiplier, contract %, tier %,
    #   tier from, quantity, project]] (project id; absent in rows stored before projects:
    #   the tenant's (none))
    quantities = models.JSONField()
    cuts = models.JSONField(default=dict)  # {instant: realized before it}

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "hour"], name="rated_hour")]

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.hour:%Y-%m-%d %H}:00"


class RatedHourPrefix(models.Model):
    """Where a tenant-month's rating stands inside its last hour with usage, when that hour is
    split and settled (billing.selectors.rating.items.HourBounds.settled) and every
    reservation's capacity on its deployments spent: its events up to `at` rated one by one,
    the rest of each rollup row as one item after them. With the running totals, realized amount, paid
    quantities and credit cuts at `at`, the sums those events rated to per rated usage cell,
    and the events' own sums per rollup row, the next run rates that hour from `at` on
    instead of from its start, when nothing but later events changed it: its events up to
    `at` still number `events` and the deployment versions still end at `versions`
    (billing.selectors.rating.inputs.month_rate). Written and replaced with the tenant-month's
    RatedHour rows (billing.services.rating)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, db_constraint=False)
    month_start = models.DateTimeField()
    hour = models.DateTimeField()
    at = models.DateTimeField()  # every event of the hour up to it (inclusive) rated one by one
    events = models.BigIntegerField()  # how many: a late one makes them more
    tokens = models.BigIntegerField()  # their input + output tokens
    versions = models.BigIntegerField()  # the last deployment version's id when rated
    consumed = models.BigIntegerField()  # the allowance's running total at `at`
    paid_tokens = models.BigIntegerField()  # the tiers' running total at `at`
    # The month's realized amount at `at`, as text: exact (SQLite keeps a decimal as a float,
    # and the hour's realized amount at its end is this one plus its rest's).
    realized = models.TextField()
    quantities = models.JSONField()  # the hour's paid quantities up to `at` (as RatedHour's)
    cuts = models.JSONField(default=dict)  # {instant: realized before it}, instants up to `at`
    # [[project, deployment, sale, service tier, covered, *tokens, *compliant, *money]]: the
    # rated usage of those events (billing.services.rated_rows.RATED_FIELDS' sums)
    cells = models.JSONField()
    # [[deployment, service tier, project, *tokens, requests, *compliant]]: those events'
    # sums per rollup row (tokens as TOKEN_FIELDS, compliant: within the SLO)
    explained = models.JSONField()
    # [deployment]: those a reservation covers in the hour, each one's capacity spent by an
    # event up to `at`: every later event of theirs is on demand
    spent = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "month_start"], name="rated_hour_prefix")
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.hour:%Y-%m-%d %H}:00 up to {self.at:%M:%S.%f}"


class RatingPending(models.Model):
    """Billing's own work queue for the rate stage: a price, contract, promotion, service tier
    or reservation change, or an invoice that spent promotions, makes the usage from `start`
    rate differently, for one tenant (or every tenant). Written in the transaction of the change, claimed by the rate
    stage in the transaction that rates again."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True)
    start = models.DateTimeField()
    # False: only what the months' promotions apply changed, which no hour's rated usage
    # holds: the months' totals are worked out again, no hour is rated again.
    hours = models.BooleanField(default=True)


class RatedChange(models.Model):
    """Billing's change log (portal.pipeline, "billing.rated"): a tenant's rated usage changed
    in the hours [start, end), from the first hour that changed to the last (a late event
    moves the allowance and tiers of every later hour of its month that has usage). Appended
    by the rate stage in the transaction that stored the rated usage; read by the
    measurement past its own cursor."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, db_constraint=False)
    start = models.DateTimeField()  # a whole UTC hour
    end = models.DateTimeField()  # a whole UTC hour, in start's month or its end


class RatedMark(models.Model):
    """How far rated usage is current: the time usage was metered until (kpis.md section 0,
    data_until) when the last rate run read metering's change log; every usage folded by
    then is rated. One row, upserted by the rate stage; budgets read their as-of from it."""

    rated_until = models.DateTimeField()
