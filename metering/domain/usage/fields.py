"""The event's fields: limits, error messages, EventError and EventIn, and shared checks."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, NamedTuple, get_args

import msgspec

from metering.domain.usage.hashing import classes_hash, fields_hash
from portal.formatting import rfc3339

MAX_TOKENS: Final = 2**31 - 1

FUTURE_TOLERANCE: Final = timedelta(minutes=5)

RETENTION_MONTHS: Final = 13  # usage events are kept 13 months (architecture.md, "Runtime")

ID_MAX_LENGTH: Final = 128  # id and source

SLUG_MAX_LENGTH: Final = 128  # tenant and pool

MODEL_MAX_LENGTH: Final = 256  # slugs and engine aliases such as "meta-llama/Meta-Llama-3-8B"

PROJECT_MAX_LENGTH: Final = 64  # a project's slug (portal.projects)

REQUIRED_FIELDS: Final = ("id", "time", "tenant", "model", "input_tokens", "output_tokens")

EVENT_FIELDS: Final = frozenset(
    {
        *REQUIRED_FIELDS,
        "source",
        "pool",
        "cached_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
        "ttft_ms",
        "tpot_ms",
        "latency_ms",
        "status",
        "requests",
        "project",
        "service_tier",
    }
)

# The tiers an event may be served at (kpis.md section 3, "Service tiers"): `standard` when
# absent. The order is how pages and lines list them.
ServiceTier = Literal["standard", "priority", "flex", "batch"]
SERVICE_TIERS: Final[tuple[str, ...]] = get_args(ServiceTier)
STANDARD: Final = "standard"
BAD_TIER = f"must be one of {', '.join(SERVICE_TIERS)} (leave it out for standard)"

_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})?", re.ASCII
)

REQUIRED = "is required"

NOT_OBJECT = "must be a JSON object"

UNKNOWN_FIELD = "is not a known field"

BAD_TOKENS = "must be a non-negative integer"

TOO_MANY_TOKENS = f"must be at most {MAX_TOKENS}"

NULL_TOKENS = "must be a non-negative integer, not null (leave it out for 0)"

MAX_LATENCY_MS: Final = 86_400_000  # a request's latency figures are within a day
BAD_LATENCY = "must be a number of milliseconds from 0 to 86400000 (a day)"

BAD_TIME = "must be an RFC 3339 date-time such as 2026-01-01T00:00:00Z"

NAIVE_TIME = "must include a time zone (Z or +hh:mm)"

INVALID_TIME = "is not a valid date-time"

FUTURE_TIME = "is more than 5 minutes in the future"

OLD_TIME = "is older than the retention window (the start of the UTC month 13 months ago, {})"

# A slug's characters (its length is the field's own: SLUG_MAX_LENGTH, PROJECT_MAX_LENGTH).
SLUG = re.compile(r"[-a-zA-Z0-9_]+")

BAD_SLUG = f"must be a slug: 1 to {SLUG_MAX_LENGTH} letters, digits, hyphens or underscores"

BAD_PROJECT = (
    f"must be a project's slug: 1 to {PROJECT_MAX_LENGTH} letters, digits, hyphens or "
    "underscores (leave it out for the tenant's (none))"
)

BAD_STATUS = 'must be "ok" or "error"'

MAX_REQUESTS: Final = 1_000_000  # requests one event may stand for
BAD_REQUESTS = f"must be an integer from 1 to {MAX_REQUESTS:,} (leave it out for 1)"


class EventError(msgspec.Struct, frozen=True):
    """One problem in a batch: the event ``index``, its ``field`` ("" = the whole item)."""

    index: int
    field: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "field": self.field, "message": self.message}


class TimeWindow(msgspec.Struct, frozen=True):
    """The times ingestion accepts: ``earliest <= time <= latest`` (see ``time_window``)."""

    earliest: datetime  # the start of the retention window
    latest: datetime  # now + FUTURE_TOLERANCE

    def problem(self, time: datetime) -> str | None:
        """Why an aware ``time`` is refused, or None when it is inside the window."""
        if time > self.latest:
            return FUTURE_TIME
        if time < self.earliest:
            return OLD_TIME.format(rfc3339(self.earliest))
        return None


def time_window(*, now: datetime) -> TimeWindow:
    """The one rule for the time of a usage event or capacity sample (kpis.md, general rules):
    not before the start of the UTC month RETENTION_MONTHS before ``now``'s, nor more than
    FUTURE_TOLERANCE after ``now``. Refusals name ``time``."""
    if now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    month = now.astimezone(UTC)
    index = month.year * 12 + month.month - 1 - RETENTION_MONTHS
    earliest = datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)
    return TimeWindow(earliest=earliest, latest=now + FUTURE_TOLERANCE)


class EventIn(msgspec.Struct, frozen=True, gc=False):
    """A validated usage event; ``model`` is still a slug or an engine alias. Its
    ``payload_hash`` is computed from the other fields when it is built (``fields_hash``).

    Built by keyword, but for the JSON fast path (``validate_json_batch``), which passes the
    fields by position, in this order: for a thousand events a request, a call naming 18
    keywords costs six times one passing them in order. The hashes come last, so no
    constructor ever passes them."""

    source: str
    id: str
    time: datetime  # request end, aware, UTC
    tenant: str
    model: str
    pool: str | None
    input_tokens: int  # cached and cache-write ones included
    cached_tokens: int  # subset of input_tokens, read from the prompt cache
    output_tokens: int  # reasoning ones included
    ttft_ms: float | None
    tpot_ms: float | None
    latency_ms: float | None
    status: Literal["ok", "error"]
    # How many requests of the same outcome the event stands for (a pre-aggregated or
    # sampled record): its tokens are their totals, its latencies their means.
    requests: int = 1
    # Token classes inside the counts above (kpis.md section 3, "Token classes").
    cache_write_tokens: int = 0  # of input_tokens - cached_tokens: written to the prompt cache
    reasoning_tokens: int = 0  # of output_tokens
    # The tier it was served at (SERVICE_TIERS): its price and its latency SLO follow it.
    service_tier: str = STANDARD
    # The tenant's project it is metered to (kpis.md 3e): a slug; None is its `(none)`.
    project: str | None = None
    # 32 hex chars, set by __post_init__; same (source, id) + other hash = conflict
    payload_hash: str = ""
    # With token classes, the hash without them ("" without: payload_hash is it): a stored
    # event that lacks them matches a replay that carries them (``is_replay_of``).
    base_hash: str = ""

    def __post_init__(self) -> None:
        base = fields_hash(
            self.source,
            self.id,
            self.time,
            self.tenant,
            self.model,
            self.pool,
            self.input_tokens,
            self.cached_tokens,
            self.output_tokens,
            self.ttft_ms,
            self.tpot_ms,
            self.latency_ms,
            self.status,
            self.requests,
            self.project,
            self.service_tier,
        )
        if self.cache_write_tokens or self.reasoning_tokens:
            msgspec.structs.force_setattr(self, "base_hash", base)
            base = classes_hash(base, self.cache_write_tokens, self.reasoning_tokens)
        msgspec.structs.force_setattr(self, "payload_hash", base)

    def is_replay_of(self, stored_hash: str) -> bool:
        """Whether this event repeats one stored with `stored_hash`: the same payload, or the
        same but for token classes the stored event lacks (an older version ignored them;
        architecture.md "Ingestion"). Anything else under the same (source, id) conflicts."""
        return stored_hash == self.payload_hash or stored_hash == (self.base_hash or None)


class EventRef(NamedTuple):
    """What item ``index`` refers to, for the lookup of tenants, models and deployments.

    A reference that is not well-formed is None (a field error names it already): tenant
    and model slugs, and ``pool`` (None: not given, or not a slug). ``is_placeable``: the
    model and the pool are both well-formed, so its deployment can be looked up. ``project``:
    a well-formed project slug the event names (None: none, or not well-formed)."""

    # A NamedTuple field named index shadows tuple.index, which mypy refuses; callers read
    # ``ref.index``, so the name stays.
    index: int  # type: ignore[assignment]
    tenant: str | None
    model: str | None
    pool: str | None
    is_placeable: bool
    project: str | None = None


def model_problem(value: Any) -> str | None:
    if value is None:
        return REQUIRED
    if type(value) is not str:
        return "must be a string"
    if not value or len(value) > MODEL_MAX_LENGTH:
        return f"must be 1 to {MODEL_MAX_LENGTH} characters"
    if not value.isprintable() or value.strip() != value:
        return "must be printable text without leading or trailing spaces"
    return None


def parse_time(value: Any) -> tuple[datetime | None, str | None]:
    """An aware UTC datetime, or None and the reason."""
    if value is None:
        return None, REQUIRED
    if type(value) is str:
        match = _RFC3339.fullmatch(value)
        if match is None:
            return None, BAD_TIME
        if match.group(1) is None:
            return None, NAIVE_TIME
        try:
            parsed = datetime.fromisoformat(value.upper())  # RFC 3339 allows "t" and "z"
        except ValueError:  # month 13, second 60, offset 24:00...
            return None, INVALID_TIME
    elif isinstance(value, datetime):
        if value.utcoffset() is None:
            return None, NAIVE_TIME
        parsed = value
    else:
        return None, BAD_TIME
    if parsed.tzinfo is UTC:
        return parsed, None
    try:
        return parsed.astimezone(UTC), None
    except OverflowError:
        return None, INVALID_TIME


def bound_tenant_errors(*, tenants: Iterable[tuple[int, Any]], bound: str) -> list[EventError]:
    """Errors naming `tenant` for each (index, tenant) that is not `bound`: a token bound to
    a tenant meters that tenant only, on every ingestion path (architecture.md, roles)."""
    message = f"this token is bound to tenant {bound!r}: it meters that tenant only"
    return [
        EventError(index, "tenant", message)
        for index, tenant in tenants
        if tenant is not None and tenant != bound
    ]


def bound_project_errors(*, projects: Iterable[tuple[int, Any]], bound: str) -> list[EventError]:
    """Errors naming `project` for each (index, project) naming another project than
    `bound`: a token bound to a project meters that project only (kpis.md 3e); an event
    naming none takes it."""
    message = f"this token is bound to project {bound!r}: it meters that project only"
    return [
        EventError(index, "project", message)
        for index, project in projects
        if project is not None and project != bound
    ]
