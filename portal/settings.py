"""Settings for the Token Factory Portal, read from the environment in this one place (12-factor).

Embedded default (no variable set): SQLite in var/, a Celery worker and beat on a broker in
var/portal.sqlite3-broker/ (files beside the database, no server), local-memory cache, DEBUG on.
Production: DEBUG=0 with SECRET_KEY, ALLOWED_HOSTS, DATABASE_URL (PostgreSQL),
CELERY_BROKER_URL and REDIS_URL (Redis).
"""

import os
import re
from datetime import UTC, datetime
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

BASE_DIR = Path(__file__).resolve().parent.parent
# The forecast job fits small models (numpy, scipy): one BLAS thread each, set before either
# loads. Threads of their own spin against the web server and the other workers on a few
# cores: a fit took six times as long on a loaded 2-core machine (docs/performance.md).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
VAR_DIR = Path(os.environ.get("VAR_DIR", BASE_DIR / "var"))
# Where the retention job writes the raw usage events of months past retention (Parquet, one
# file per month, manifest.json): keep it on storage that is backed up.
USAGE_ARCHIVE_DIR = Path(os.environ.get("USAGE_ARCHIVE_DIR", VAR_DIR / "archive"))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG", True)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off.")
    SECRET_KEY = "insecure-development-key-only-for-debug-mode"  # noqa: S105
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver" if DEBUG else "")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")


def env_instant(name: str) -> datetime | None:
    """An RFC 3339 instant with a zone, in UTC (None when unset)."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ImproperlyConfigured(f"{name} must include a time zone (Z or +hh:mm): {value!r}")
    return moment.astimezone(UTC)


# A test clock for the servers, workers and demos that tests start (portal.clock): the
# instant domain code takes as "now". DEBUG only: production always runs on the real clock.
PORTAL_NOW = env_instant("PORTAL_NOW")
if PORTAL_NOW is not None and not DEBUG:
    raise ImproperlyConfigured("PORTAL_NOW (a test clock) is refused when DEBUG is off.")

INSTALLED_APPS = [
    "django.contrib.admin",  # its modules found in each app; the site is portal.admin.site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "portal",
    "metering",
    "billing",
    "flywheel",
]

MIDDLEWARE = [
    "portal.middleware.ContentSecurityPolicyMiddleware",  # first: on every response
    "portal.middleware.RequestLimitsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "portal.replica.ReplicaReadsMiddleware",  # where this request's reads go
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "portal.middleware.SessionTimeoutMiddleware",
    "portal.middleware.PrivateResponseMiddleware",
    "portal.middleware.TenantStatusMiddleware",
    "portal.middleware.DatabaseUnavailableMiddleware",
    "portal.middleware.BadInputMiddleware",
    "portal.middleware.ExportAuditMiddleware",
    "portal.snapshot.ReadSnapshotMiddleware",  # last: a GET's figures read one snapshot
]

# The longest URL (path and query) the portal reads; the server's request-line limit is
# above it (gunicorn.conf.py), so the 414 is the portal's, in the API's shape under /api/.
MAX_URL_BYTES = 4096

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.context_processors.shell",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'portal.sqlite3'}",
        conn_max_age=int(os.environ.get("CONN_MAX_AGE", "60")),
        conn_health_checks=True,  # a connection broken by a database restart is replaced
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default's web server and worker share the file. WAL: readers never wait
    # for the writer. IMMEDIATE: a transaction takes the write lock when it begins, so two
    # writers queue (up to the timeout) instead of one failing with "database is locked"
    # when it upgrades a read lock the other's write invalidated.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        timeout=30,
        transaction_mode="IMMEDIATE",
        init_command="PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    )
# A PostgreSQL streaming replica for the pages, reports and read APIs (portal.replica): a
# client reads the primary until the replica has replayed its own last write; jobs, writes
# and sign-in always use the primary.
if os.environ.get("DATABASE_REPLICA_URL"):
    DATABASES["replica"] = dj_database_url.parse(
        os.environ["DATABASE_REPLICA_URL"],
        conn_max_age=int(os.environ.get("CONN_MAX_AGE", "60")),
        conn_health_checks=True,
    )
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
DATABASE_ROUTERS = ["portal.replica.ReplicaRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")


def redis_cache(location: str) -> dict:
    """The cache on Redis (quotas, login lockout). Short socket timeouts: a hung Redis makes
    each call fail in half a second, and the callers fail open, instead of holding the
    request until Redis answers again."""
    return {
        "BACKEND": "portal.cache.RedisCache",  # one Redis client a pool (portal/cache.py)
        "LOCATION": location,
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    }


CACHES = {
    "default": (
        redis_cache(REDIS_URL)
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Django's model backend, reading a session's user with its tenant and role in one query.
AUTHENTICATION_BACKENDS = ["portal.authentication.SessionUserBackend"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = DEBUG  # in DEBUG, serve straight from static/ (no collectstatic)
if DEBUG:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise expects it to exist
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        # STATIC_STORAGE lets a test collect hashed files without compressing them (slow).
        "BACKEND": os.environ.get("STATIC_STORAGE")
        or (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# Sessions: in the database, their row read in one prepared statement (portal.sessions);
# idle timeout (restarted by activity, at most once a minute) and an absolute cap
# (portal.middleware.SessionTimeoutMiddleware).
SESSION_ENGINE = "portal.sessions"
SESSION_COOKIE_AGE = int(os.environ.get("SESSION_IDLE_SECONDS", str(8 * 3600)))
SESSION_ABSOLUTE_SECONDS = int(os.environ.get("SESSION_ABSOLUTE_SECONDS", str(24 * 3600)))
# Sign-in lockout: this many failures for a username or from an address within the
# lockout time lock both out for that time.
LOGIN_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "5"))
LOGIN_LOCKOUT_SECONDS = int(os.environ.get("LOGIN_LOCKOUT_SECONDS", str(15 * 60)))
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy on every response (portal.middleware): everything from the portal
# itself (static/ holds Plotly, htmx and the CSS), no inline script or style, never framed.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "font-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
    ]
)
# Swagger UI's own stylesheet draws its icons as data: SVG images; the API docs page (signed
# in, no user content) takes images from data: too. Keyed by URL name.
CONTENT_SECURITY_POLICY_BY_URL_NAME = {
    "api-docs": CONTENT_SECURITY_POLICY.replace("img-src 'self'", "img-src 'self' data:"),
}
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "portal.permissions.TokenScopePermission",
    ],
    "DEFAULT_PAGINATION_CLASS": "portal.api.pagination.Pagination",
    "PAGE_SIZE": 100,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "portal.api.errors.exception_handler",
    # The API reads JSON: the test client sends it unless a test says otherwise.
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "DEFAULT_THROTTLE_CLASSES": ["portal.security.QuotaThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "read": os.environ.get("API_QUOTA_READ", "6000/min"),
        "write": os.environ.get("API_QUOTA_WRITE", "1200/min"),
        "ingest": os.environ.get("API_QUOTA_INGEST", "60000/min"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Token Factory Portal API",
    "DESCRIPTION": "Metering, billing, SLA and KPIs (TEF, TFI, TFOM) of a token factory.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema has the same access as its docs page: signed in (a session or a token).
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Each reader sees the operations their role and token may call (a tenant member does
    # not see the configuration endpoints).
    "SERVE_PUBLIC": False,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "portal.api.schema.tag_and_summarise",
        "portal.api.schema.examples_as_their_schemas",
    ],
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI from the sidecar package: no CDN (factories are often air-gapped).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Several models have a `status`; name each enum after its model.
    "ENUM_NAME_OVERRIDES": {
        "TenantStatusEnum": "portal.models.Tenant.Status",
        "InvoiceStatusEnum": "billing.models.invoices.Invoice.Status",
        "TokenClassEnum": "billing.models.pricing.TOKEN_CLASS_CHOICES",
        "LineKindEnum": "billing.models.invoices.InvoiceLine.Kind",
        "ServiceTierEnum": "billing.models.reservations.SERVICE_TIER_CHOICES",
        "MultipliedTierEnum": "billing.models.reservations.MULTIPLIED_TIER_CHOICES",
    },
}

# Ingestion bodies: up to 32 MiB after decompression (checked by the ingest views).
DATA_UPLOAD_MAX_MEMORY_SIZE = 33 * 1024 * 1024

FACTORY_CURRENCY = os.environ.get("FACTORY_CURRENCY", "USD")
# /metrics publishes the per-tenant counters (a series per tenant each); 0 leaves them out,
# for factories with thousands of tenants (architecture.md "Metrics and dashboards").
METRICS_TENANT_LABELS = env_bool("METRICS_TENANT_LABELS", True)
# The issuer named on invoices and reports.
FACTORY_NAME = os.environ.get("FACTORY_NAME", "Token Factory")
# The span (or resource) attributes OTLP ingestion reads the tenant, the pool and the
# project from (data-formats.md section 6b).
OTLP_TENANT_ATTRIBUTE = os.environ.get("OTLP_TENANT_ATTRIBUTE", "tenant.id")
OTLP_POOL_ATTRIBUTE = os.environ.get("OTLP_POOL_ATTRIBUTE", "tokenfactory.pool")
OTLP_PROJECT_ATTRIBUTE = os.environ.get("OTLP_PROJECT_ATTRIBUTE", "tokenfactory.project")
# The issuer's postal address on invoices, lines separated by "\n" in the variable.
FACTORY_ADDRESS = os.environ.get("FACTORY_ADDRESS", "").replace("\\n", "\n")


def broker_folder(database: dict) -> Path:
    """The embedded broker's folder follows the database, whatever VAR_DIR is: beside a
    SQLite file, named after it as SQLite names its own companions (`portal.sqlite3-broker`
    beside `portal.sqlite3-wal`); for another database (or SQLite in memory), in VAR_DIR
    named after its host, port and name. Two instances with two databases never share a
    queue; two with one database share it, as they should."""
    name = str(database.get("NAME") or "")
    if database["ENGINE"] == "django.db.backends.sqlite3" and name and ":memory:" not in name:
        path = Path(name).resolve()
        return path.with_name(path.name + "-broker")
    where = f"{database.get('HOST') or 'local'}-{database.get('PORT') or ''}-{name or 'memory'}"
    return VAR_DIR / "broker" / re.sub(r"[^A-Za-z0-9._-]+", "_", where)


# Celery. Every mode runs a real worker and beat (portal.pipeline): production on Redis
# (CELERY_BROKER_URL), the embedded default on kombu's filesystem transport in a folder
# beside the SQLite file (broker_folder: two instances with two databases never share a
# queue; README "The embedded default" says why not the SQLAlchemy transport). Eager
# execution exists only inside unit tests (tests/conftest.py), never as a way to run jobs.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "") or "filesystem://localhost/"
if CELERY_BROKER_URL.startswith("filesystem://"):
    BROKER_DIR = broker_folder(DATABASES["default"])
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "processed_folder": str(BROKER_DIR / "processed"),
        # How often the worker lists the folder: a stage asked for starts within it
        # (docs/performance.md, "The embedded default's broker": 0.2 % of a core at idle).
        "polling_interval": 0.2,
    }
    for folder in ("queue", "control", "processed"):
        (BROKER_DIR / folder).mkdir(parents=True, exist_ok=True)
    # No fanout control messages on files: the worker's remote control stays off.
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
    CELERY_BROKER_POOL_LIMIT = 0
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", "") or None
CELERY_TASK_IGNORE_RESULT = CELERY_RESULT_BACKEND is None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Four queues (architecture.md "Runtime"), every task routed here by name, each declared, so
# a worker started without -Q (`celery -A portal worker`, the README's production command)
# consumes every one; each queue may have workers of its own (`celery -A portal worker -Q
# billing`); the embedded default's one worker serves all of them.
WORKER_QUEUES = ["ingest", "billing", "measure", "notify"]
CELERY_TASK_QUEUES = [Queue(name, Exchange(name), routing_key=name) for name in WORKER_QUEUES]
# A worker's CPU priority (nice 0–19, portal/celery.py): below the web server's, so a burst
# of jobs or deliveries never slows a page.
WORKER_NICE = int(os.environ.get("WORKER_NICE", "10"))
CELERY_TASK_DEFAULT_QUEUE = "measure"
CELERY_TASK_ROUTES = {
    "metering.*": {"queue": "ingest"},
    "billing.*": {"queue": "billing"},
    "flywheel.*": {"queue": "measure"},
    "portal.*": {"queue": "notify"},
}
# The beat (one process: `celery -A portal beat`, or `worker -B` in the embedded default) runs
# every stage of the pipeline on its cadence as the safety net; writes ask for the stage that
# reads them at once (portal.pipeline). The stage order is portal.pipeline.STAGES.
CELERY_BEAT_SCHEDULE = {
    # Fetch /metrics of every enabled scrape target (vLLM, SGLang, DCGM exporters).
    "scrape": {"task": "metering.scrape_targets", "schedule": 30.0},
    # Fold accepted usage events into the rollups (metering's change log).
    "fold": {"task": "metering.fold", "schedule": 60.0},
    # Rate the tenant-months metering's change log and billing's own queue name; each run
    # publishes the cut every read answers as of (portal.pipeline), so an idle factory's
    # window still runs to within a minute of now.
    "rate": {"task": "billing.rate", "schedule": 60.0},
    # KPI snapshots of the changed days and months; the open day and month to the window's
    # end; closes the days and months that ended.
    "measure": {"task": "flywheel.measure", "schedule": crontab(minute="*/15")},
    # The month-end close of last month: lock it, run the stages before billing's, rate,
    # close its SLA, issue invoices and credit notes (billing.services.close).
    "close": {
        "task": "billing.close",
        "schedule": crontab(minute=0, hour=2, day_of_month=1),
    },
    # invoice.overdue for the invoices whose due day ended with something outstanding.
    "overdue": {"task": "billing.overdue", "schedule": crontab(minute=10)},
    # Retention: purge the ingestion debugger's rejections older than 7 days.
    "retention": {"task": "metering.retention", "schedule": crontab(minute=30, hour=3)},
    # Send the due webhook and email deliveries (retries with backoff); also asked for when
    # an event is raised.
    "deliver": {"task": "portal.deliver", "schedule": 30.0},
    # Evaluate the alert rules from read models; fire and resolve alerts (portal.alerts).
    "alerts": {"task": "portal.alerts", "schedule": 60.0},
    # Forecasts and their backtests (kpis.md 6b), daily once the measure runs of 00:15 and
    # 00:30 have closed yesterday.
    "forecast": {"task": "flywheel.forecast", "schedule": crontab(minute=45, hour=0)},
    # Measure, diagnose, check the goal and propose levers, once a week.
    "flywheel": {
        "task": "flywheel.cycle",
        "schedule": crontab(minute=0, hour=3, day_of_week="mon"),
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "filters": {"refusals": {"()": "portal.logfilters.RefusalWithoutTraceback"}},
    "loggers": {
        "django.server": {"level": "WARNING"},
        "django.request": {"filters": ["refusals"]},
    },
}

# Alert delivery (architecture.md "Alerts and notifications"). Links in webhook bodies and
# emails start with PORTAL_URL. Webhook URLs must be https, to public addresses (checked
# when saved and again at each connection: portal.webhooks.address_refusal); loopback (and
# http to it) only with DEBUG or WEBHOOK_ALLOW_LOOPBACK=1 (a receiver on the same host);
# private and unique-local addresses only with WEBHOOK_ALLOW_PRIVATE=1 (receivers inside
# the factory's network); link-local, metadata, multicast and unspecified ones never.
PORTAL_URL = os.environ.get("PORTAL_URL", "http://127.0.0.1:8000")
WEBHOOK_ALLOW_LOOPBACK = env_bool("WEBHOOK_ALLOW_LOOPBACK", False)
WEBHOOK_ALLOW_PRIVATE = env_bool("WEBHOOK_ALLOW_PRIVATE", False)
WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("WEBHOOK_TIMEOUT_SECONDS", "15"))
# A claimed delivery is due again after this (a worker killed while sending it).
WEBHOOK_LEASE_SECONDS = float(os.environ.get("WEBHOOK_LEASE_SECONDS", "60"))
# The demo's factory endpoint: `manage.py webhook_receiver`, which `make demo` starts.
DEMO_WEBHOOK_RECEIVER = f"http://127.0.0.1:{os.environ.get('RECEIVER_PORT', '8009')}/hooks"
# Email through Django's backend: SMTP from the environment (EMAIL_HOST, EMAIL_PORT,
# EMAIL_HOST_USER, EMAIL_HOST_PASSWORD, EMAIL_USE_TLS); without EMAIL_HOST, the console.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend"
)
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = 15
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "portal@token-factory.invalid")
