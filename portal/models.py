from django.conf import settings
from django.db import models
from django.utils import timezone

from portal.periods import validate_whole_hour


class Role(models.TextChoices):
    """The four roles of the portal; each is a Django group of the same name."""

    OPERATOR = "operator", "Operator"
    FINANCE = "finance", "Finance"
    INVESTOR = "investor", "Investor"
    TENANT = "tenant", "Tenant member"


class Scope(models.TextChoices):
    """What an API token may do: read data, ingest usage, or change configuration."""

    READ = "read", "read"
    INGEST = "ingest", "ingest"
    ADMIN = "admin", "admin"
    NOTIFY = "notify", "notify"  # webhook endpoints (a tenant's own), alert rules, budget


class EffectiveDated(models.Model):
    """A version of an effective-dated record (portal.versions writes them): in force from
    `effective_from`, a whole UTC hour, until the next version of its series; never edited
    once in force. A series of one version per instant says so with `unique=True` or a
    UniqueConstraint of its own; `audit_type` is what the audit log calls the record
    (`<audit_type>.create`, `.delete`)."""

    audit_type = ""

    effective_from = models.DateTimeField(validators=[validate_whole_hour])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True


class Tenant(models.Model):
    """A customer of the factory; usage, contracts, invoices and SLA are kept per tenant."""

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        SUSPENDED = "suspended", "Suspended"  # usage still ingested, members cannot log in
        CLOSED = "closed", "Closed"  # ingestion refused

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    # Who invoices are addressed to (default: the name) and where.
    billing_name = models.CharField(max_length=200, blank=True)
    billing_address = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Project(models.Model):
    """A tenant's subdivision (a department, product or cost center, kpis.md 3e): usage,
    quotas and chargeback are kept per project. Its slug is unique in the tenant; created by
    the tenant's members, operators and finance, or by the first usage event naming it (at
    most MAX_PROJECTS a tenant, portal.projects). Usage without one is the tenant's
    `(none)`, stored as project id 0."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="projects")
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=200)
    cost_center = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["tenant", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "slug"], name="project_slug_in_tenant")
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.slug}"


class Membership(models.Model):
    """Links a tenant member to exactly one tenant."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership"
    )
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="members")

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant}"


class ApiToken(models.Model):
    """A bearer token for the API: stored as a SHA-256 digest, shown in clear once at creation."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="First characters, to recognise a token.")
    digest = models.CharField(max_length=64, unique=True)
    scopes = models.JSONField(default=list)
    # An ingest token bound to one tenant (a tenant's own gateway): what it sends is metered
    # to that tenant only, and spans without a tenant attribute are that tenant's.
    bound_tenant = models.ForeignKey(
        "portal.Tenant",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="bound_tokens",
    )
    # And to one of that tenant's projects: its events without a project are that project's,
    # naming another is refused (kpis.md 3e).
    bound_project = models.ForeignKey(
        Project,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="bound_tokens",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class AuditEntryQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise PermissionError("audit entries are append-only")

    def delete(self):
        raise PermissionError("audit entries are append-only")


class AuditEntry(models.Model):
    """One change to a configuration object or a sensitive action: who, when, before and
    after. Append-only: the ORM refuses changes, and so does PostgreSQL (a trigger)."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    action = models.CharField(max_length=32)  # create, update, delete, issue_token, revoke_token…
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=128)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    objects = AuditEntryQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.action} {self.object_type} {self.object_id}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise PermissionError("audit entries are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise PermissionError("audit entries are append-only")


class ClosedMonth(models.Model):
    """A UTC month locked by the first step of its month-end close: nothing may take effect
    inside it afterwards (kpis.md, Closed months) but the close's own postings, while it
    runs (`closing`). Written by billing's close through portal.closing, read by every
    write that could move its figures."""

    month = models.DateTimeField(unique=True)  # first instant of the UTC month
    closed_at = models.DateTimeField()
    closing = models.BooleanField(default=False)  # its close is still issuing and posting

    class Meta:
        ordering = ["month"]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m}"


class StageRequest(models.Model):
    """Whether a run of a pipeline stage (portal.pipeline) has been asked for and not begun:
    a write asks only when none is pending, so bursts of writes send one task."""

    name = models.CharField(max_length=64, primary_key=True)  # the stage's task name
    pending = models.BooleanField(default=False)
    requested_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"{self.name} ({'pending' if self.pending else 'idle'})"


class Cursor(models.Model):
    """How far one consumer has read one change log (portal.pipeline): the id of the last
    entry it consumed, advanced in the transaction that consumed it, and how far in time
    the data it read then reached (`until`: the fold's data_until, read with the entries;
    the published cut, portal.pipeline.cut_read)."""

    name = models.CharField(max_length=128, primary_key=True)  # "<consumer stage>:<log>"
    position = models.BigIntegerField(default=0)
    until = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"{self.name} @ {self.position}"


# ---------------------------------------------------------------- alert delivery
# Events are stored in the transaction that caused them (the outbox); the `deliver` job
# sends each to the webhook endpoints and the email recipients it is addressed to
# (portal.events, portal.delivery); the inbox shows them to the users who may see them.


class WebhookEndpoint(models.Model):
    """Where events are delivered, signed as Standard Webhooks says. A tenant's own endpoint
    is bound to it and receives only its events; one without a tenant is the factory's."""

    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=200, blank=True)
    event_types = models.JSONField(default=list, blank=True)  # empty: every type
    tenant = models.ForeignKey(
        Tenant,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="webhook_endpoints",
    )
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=200, blank=True)
    # whsec_ + base64 of 32 random bytes: kept to sign, shown once at creation. After a
    # rotation the previous secret signs beside it until `previous_secret_until`.
    secret = models.CharField(max_length=64)
    previous_secret = models.CharField(max_length=64, blank=True)
    previous_secret_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    # Credentials: the audit log records that they are set, never their values.
    CREDENTIAL_FIELDS = ("secret", "previous_secret")

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.url


class Event(models.Model):
    """Something that happened, as delivered: `type` (invoice.issued…), the instant it
    happened, a readable summary, a link to its page and its data (ids, amounts as decimal
    strings, RFC 3339 times). Addressed to one tenant (`tenant`), to the factory
    (`for_factory`: operators, and finance for billing types), or both."""

    class Level(models.TextChoices):
        INFO = "info", "Info"
        WARNING = "warning", "Warning"
        CRITICAL = "critical", "Critical"

    webhook_id = models.CharField(max_length=40, unique=True)  # msg_…: the same on every retry
    type = models.CharField(max_length=64)
    level = models.CharField(max_length=8, choices=Level.choices, default=Level.INFO)
    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    for_factory = models.BooleanField(default=True)
    occurred_at = models.DateTimeField()
    summary = models.CharField(max_length=300)
    link = models.CharField(max_length=500, blank=True)  # a path on the portal
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-pk"]
        indexes = [models.Index(fields=["tenant", "-id"]), models.Index(fields=["type"])]

    def __str__(self) -> str:
        return f"{self.type} {self.webhook_id}"


class Delivery(models.Model):
    """One event to one webhook endpoint or one user's email, with its attempts. Due when
    `next_attempt_at` (real clock) has passed; a claim moves it a lease on (60 s), so a worker
    killed while sending leaves it due again, to be sent with the same webhook-id."""

    class Channel(models.TextChoices):
        WEBHOOK = "webhook", "Webhook"
        EMAIL = "email", "Email"

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"  # retries exhausted, or the endpoint disabled

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(max_length=8, choices=Channel.choices)
    endpoint = models.ForeignKey(
        WebhookEndpoint, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="deliveries",
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-pk"]
        indexes = [models.Index(fields=["state", "next_attempt_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["event", "endpoint"],
                condition=models.Q(endpoint__isnull=False),
                name="delivery_once_per_endpoint",
            ),
            models.UniqueConstraint(
                fields=["event", "user"],
                condition=models.Q(user__isnull=False),
                name="delivery_once_per_user",
            ),
        ]


class DeliveryAttempt(models.Model):
    """One try of a delivery: when, the answer's status (None: no answer), how long it took
    and the first KiB of the answer or why there was none."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    at = models.DateTimeField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    response = models.TextField(blank=True)  # at most 1 KiB
    error = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["pk"]


class EmailSubscription(models.Model):
    """A user's opt-in to email for one event type (of those the user may see)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_subscriptions"
    )
    event_type = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "event_type"], name="email_subscription_once")
        ]


class InboxRead(models.Model):
    """An event a user has read in the inbox."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="inbox_reads"
    )
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="reads")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "event"], name="inbox_read_once")]


# ---------------------------------------------------------------- alert rules and alerts
# A rule watches one kind of figure (kpis.md section 3c) on one scope; the `alerts` job
# evaluates every enabled rule through the kind's owner app (portal.alerts) and keeps one
# Alert per (rule, scope key, window start, threshold): fired once, resolved once.


class AlertRule(models.Model):
    """A rule of one kind on one scope. Its kind is one an app registered
    (portal.alert_kinds), checked when the rule is written: the kernel lists none."""

    kind = models.CharField(max_length=32)
    # The scope: a tenant (its rules are its own), and for some kinds a pool, deployment,
    # source or scrape target in `scope` ({"deployment": slug}…); neither: the factory.
    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="alert_rules"
    )
    scope = models.JSONField(default=dict, blank=True)
    params = models.JSONField(default=dict, blank=True)
    level = models.CharField(max_length=8, choices=Event.Level.choices, default="warning")
    enabled = models.BooleanField(default=True)
    # Its kind allows a tenant one rule of it (Kind.one_per_tenant: a budget) per `one_key`
    # (Kind.one_key: a budget's project and period; "" for one per tenant), set when the rule
    # is written (not fields anyone edits: the audit log leaves them out), so the database
    # holds that without naming a kind.
    one_per_tenant = models.BooleanField(default=False, editable=False)
    one_key = models.CharField(max_length=200, blank=True, default="", editable=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "kind", "one_key"],
                condition=models.Q(one_per_tenant=True),
                name="alert_rule_one_per_tenant_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk}"

    @property
    def params_shown(self) -> str:
        """The params as a reader sees them: "amount 19.00 · thresholds 50, 80, 100"."""
        return " · ".join(
            f"{key} {', '.join(map(str, value)) if isinstance(value, list) else value}"
            for key, value in self.params.items()
        )


class Alert(models.Model):
    class State(models.TextChoices):
        FIRING = "firing"
        RESOLVED = "resolved"

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="alerts")
    scope_key = models.CharField(max_length=200, blank=True)  # a source, a target…
    window_start = models.DateTimeField()  # the month or day (calendar kinds), or onset
    threshold = models.CharField(max_length=40, blank=True)
    state = models.CharField(max_length=8, choices=State.choices, default=State.FIRING)
    level = models.CharField(max_length=8, choices=Event.Level.choices)
    value = models.CharField(max_length=60)  # the figure that fired it, as shown
    figures = models.JSONField(default=dict)  # every figure behind it (decimal strings)
    summary = models.CharField(max_length=300)
    link = models.CharField(max_length=500, blank=True)
    fired_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-fired_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "scope_key", "window_start", "threshold"], name="alert_key"
            )
        ]
        indexes = [models.Index(fields=["state", "rule"])]

    def __str__(self) -> str:
        return f"{self.rule} {self.threshold} {self.state}"
