"""`make bench` (scripts/bench.sh): the performance goals of the ingestion and read paths,
each measured as a ratio of two arms interleaved in one run (A B A B …).

Needs DATABASE_URL (a PostgreSQL superuser on a throwaway cluster), REDIS_URL and
TEST_BROKER_URL, as scripts/with-services.sh exports them. Creates two databases, loads the
small and the large dataset (config.sizes()), then measures:

  1. HTTP batch ingestion vs the raw deduplicating COPY of the same events: the database's
     CPU an event stored (its client backends'), and the web workers' CPU an event
  2. replay of stored events vs fresh events, through the API
  3. the operator dashboard and GET /api/v1/usage, 30 days: large vs small dataset, and
     large vs the same figures computed from raw rows
  4. incremental rollup of one hour of new events vs a full rollup rebuild
  5. FactoryData(...).kpis(...) of the month vs the equivalent SQL on raw rows
  6. peak RSS of a web worker ingesting 10,000-event batches
  7. the embedded default (manage.py serve: SQLite, the filesystem broker, a worker with
     the beat) under 5,000 events/s for 5 minutes: each event in the KPIs within 60 s p95, no
     "database is locked", Overview's p95 within 1 s; flat-out ingestion against production
     settings (gunicorn, PostgreSQL, Redis) as information
  8. rating one more hour vs rating the whole month (the rate stage)
  9. an accepted event of the current hour reaches the usage API, the KPIs and the budget
     read within 60 s, in the embedded default and in production settings, each serving
     the demo under a gateway's feed
 10. HTTP batch ingestion of this tree vs a baseline revision (BENCH_BASELINE) served from
     its own tree: on the same database, or each on a database of its own when the
     baseline's migrations differ
 11. OTLP/HTTP protobuf trace exports (GenAI spans) vs native JSON batches, 1,000 a request
 12. peak RSS of a web worker ingesting 10,000-span OTLP exports
 13. webhook delivery: 3 bursts of 10,000 events to 10 endpoints, one hanging: the others'
     p95; a page's CPU a read during the bursts against at rest, and its lock waits
 14. the budget read's p95 over HTTP, of a tenant and of one of its projects; the alerts
     job over every rule of 200 tenants, and its query count against 20 tenants'
 19. every read API over 3 years, large dataset: each under 2 s
 20. every page of every role's navigation, the dataset month: p95 large vs small, and
     under 300 ms on the large
 21. 50 clients at once on Overview, Metering and the usage API (large): each p95 under
     1 s, no error; the throughput
 23. the forecast job over 200 models and pools (402 series, 120 days): under 60 s
 24. GET /metrics with 1,000 tenants and 13 months of history: p95 under 300 ms; the measure
     stage's counters step timed
 25. the capacity plan over 50 models and 20 pools, 12 months: under 10 s in the job
 26. a month's chargeback of 200 tenants x 20 projects over HTTP, invoice basis and at cost:
     each p95 under 2 s

Prints the ratio table and writes every figure to var/bench/*.json (docs/performance.md
explains the method).
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import msgspec
import psycopg

from tests.bench import config, cpu, fresh, hooks, raw, storage, sustained, waits, web
from tests.bench.events import EventGenerator

STARTED = time.perf_counter()
RUN = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())  # the run's name in var/bench/runs/
INGEST_SEQ = 1_000_000_000  # sequence numbers of ingestion events (never in a dataset)
ROLLUP_SEQ = 2_000_000_000
MEMORY_SEQ = 3_000_000_000
PROFILE_SEQ = 4_000_000_000
EMBEDDED_SEQ = 5_000_000_000
RATING_SEQ = 6_000_000_000
BASELINE_SEQ = 7_000_000_000
OTLP_SEQ = 8_000_000_000


# An empty database this tree migrated, copied for every database of its own a stage makes.
MIGRATED = "bench_migrated"


def log(message: str) -> None:
    print(f"[{time.perf_counter() - STARTED:7.1f}s] {message}", flush=True)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def database_url(base: str, name: str) -> str:
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=f"/{name}"))


class Agent:
    """A Django process on one database (tests/bench/agent.py of `root`, the tree it runs)."""

    def __init__(self, name: str, env: dict, *, root: Path = config.ROOT) -> None:
        self.name = name
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.bench.agent"],
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._answer()

    def _answer(self):
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"agent {self.name} died")
        answer = json.loads(line)
        if not answer["ok"]:
            raise RuntimeError(f"agent {self.name}: {answer['error']}")
        return answer["result"]

    def call(self, op: str, **args):
        self.process.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def manage(env: dict, *args: str, root: Path = config.ROOT) -> subprocess.Popen:
    """`manage.py` of `root` (this tree, or a baseline revision's)."""
    return subprocess.Popen(
        [sys.executable, "manage.py", *args], cwd=root, env=env, stdout=subprocess.DEVNULL
    )


# PostgreSQL's processes that run the sessions' statements (pg_stat_activity.backend_type),
# and the bench's own session that asks it which process is which.
CLIENT_BACKENDS = ("client backend", "parallel worker")
MONITOR = "the bench's monitor"


def backend_types(monitor: psycopg.Connection):
    """The kinds of PostgreSQL's processes for cpu.ChildrenCPU, from pg_stat_activity."""
    own = monitor.info.backend_pid

    def kinds(pids: list[int]) -> dict[int, str | None]:
        found = dict(
            monitor.execute(
                "SELECT pid, backend_type FROM pg_stat_activity WHERE pid = ANY(%s)", [pids]
            ).fetchall()
        )
        found[own] = MONITOR
        return {pid: found.get(pid) for pid in pids}

    return kinds


def verdict(value: float, limit: float, at_least: bool) -> str:
    ok = value >= limit if at_least else value <= limit
    return "pass" if ok else "MISS"


# A reference arm (raw SQL on raw rows, tens to thousands of times slower than the portal's
# arm it is held against) is sampled in the first and the last slot of its interleaved
# schedule, and in the slots between only while its ratio so far is not this many times
# inside the target: then no sample it could add moves the verdict.
REFERENCE_MARGIN = 10


def reference_due(slot: int, last: int, ratio: float, limit: float) -> bool:
    """Whether a reference arm is sampled in `slot` (0 to `last`) of its schedule, its goal's
    ratio so far being `ratio` (portal over reference, ≤ `limit` passes; NaN before both arms
    have a sample)."""
    return slot in (0, last) or not ratio * REFERENCE_MARGIN <= limit


class Bench:
    def __init__(self) -> None:
        self.sizes = config.sizes()
        base = os.environ.get("DATABASE_URL", "")
        if not base.startswith("postgres"):
            raise SystemExit("DATABASE_URL must point at PostgreSQL: run scripts/bench.sh")
        self.base = base
        self.urls = {
            "small": database_url(base, "bench_small"),
            "large": database_url(base, "bench_large"),
        }
        self.tmp = Path(tempfile.mkdtemp(prefix="tfp-bench-"))
        self.results: dict = {
            "sizes": {"small": self.sizes.small, "large": self.sizes.large},
            "quick": self.sizes.quick,
            "rounds": self.sizes.rounds,
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
        }
        self.rows: list[tuple] = []  # the ratio table
        self.servers: list[web.Server] = []
        self.budget_web: web.Server | None = None  # budget_reads' (its clock set)
        self.agents: dict[str, Agent] = {}
        # Whether MIGRATED holds this tree's migrated empty database, and its static files
        # are collected in the run's VAR_DIR (own_database).
        self.migrated = self.collected = False
        # The large dataset's month rated whole with the clock at its end by goal 8's last
        # run: the chargeback stage's precondition (it then rates only what is pending).
        self.rated_whole = False

    # -- setup ------------------------------------------------------------------------

    def env(self, which: str) -> dict:
        return web.server_env(database_url=self.urls[which], var_dir=self.tmp / "var")

    def durability(self, *, durable: bool) -> None:
        """Loading needs no durability; every measurement runs with durable commits."""
        with psycopg.connect(self.base, autocommit=True) as conn:
            for name in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(
                    f"ALTER SYSTEM {'RESET' if durable else 'SET'} {name}"
                    + ("" if durable else " = off")
                )
            conn.execute("SELECT pg_reload_conf()")
            time.sleep(0.5)
            if durable:
                conn.execute("CHECKPOINT")
                settings = {
                    name: conn.execute(f"SHOW {name}").fetchone()[0]
                    for name in (
                        "server_version",
                        "fsync",
                        "synchronous_commit",
                        "full_page_writes",
                        "shared_buffers",
                        "work_mem",
                        "max_wal_size",
                    )
                }
                if (settings["fsync"], settings["synchronous_commit"]) != ("on", "on"):
                    raise RuntimeError(f"commits are not durable: {settings}")
                self.results["postgresql"] = settings
                log(f"durable commits on: PostgreSQL {settings}")

    def prepare(self) -> None:
        self.durability(durable=False)
        with psycopg.connect(self.base, autocommit=True) as conn:
            for name in ("bench_small", "bench_large", MIGRATED):
                conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute("CREATE DATABASE bench_small")
        (self.tmp / "var").mkdir()
        jobs = [manage(self.env("small"), "migrate", "--noinput", "--skip-checks")]
        jobs.append(manage(self.env("small"), "collectstatic", "--noinput"))
        for job in jobs:
            if job.wait() != 0:
                raise RuntimeError("migrate/collectstatic failed")
        with psycopg.connect(self.base, autocommit=True) as conn:
            for name in ("bench_large", MIGRATED):
                conn.execute(f"CREATE DATABASE {name} TEMPLATE bench_small")
        self.migrated = self.collected = True
        log("migrated both databases, collected static files")
        for which in ("small", "large"):
            self.agents[which] = Agent(which, self.env(which))
        self.ids = {}
        for which in ("small", "large"):
            self.ids[which] = self.agents[which].call("setup", events=getattr(self.sizes, which))
        log("factory set up: pools, models, deployments, tenants, contracts, prices, capacity")
        loads = {}
        for which in ("small", "large"):
            count = getattr(self.sizes, which)
            log(f"loading the {which} dataset: {count:,} events (COPY)")
            loads[which] = raw.bulk_load(
                dsn=self.urls[which],
                count=count,
                tenant_ids=self.ids[which]["tenants"],
                deployment_ids=self.ids[which]["deployments"],
                log=log,
            )
            log(f"  loaded in {loads[which]:.0f} s; rolling up (rollup_rebuild)")
            first = self.agents[which].call("full_rollup")
            raw.vacuum_analyze(self.urls[which])
            month = {"start": config.MONTH_START.isoformat(), "end": config.MONTH_END.isoformat()}
            measured = self.agents[which].call("measure", **month)
            log(f"  measure job over the month: {measured['seconds']:.1f} s")
            counts = self.agents[which].call("counts")
            log(f"  first rollup {first['seconds']:.1f} s; {counts}")
            self.results[f"dataset_{which}"] = {
                "load_seconds": loads[which],
                "first_rollup": first,
                "measure_job": measured,
                **counts,
            }
        self.durability(durable=True)

    def own_database(
        self, name: str, *, served: bool = False, root: Path = config.ROOT, **extra: str
    ) -> dict:
        """A stage's database of its own, created afresh: migrated by `root`'s manage.py, or
        a copy of MIGRATED once this tree has migrated one (the same empty database, without
        its minute of migrations); the static files collected when it is `served`, unless
        this tree's are already in the run's VAR_DIR. The environment of the processes that
        use it."""
        ours = root == config.ROOT
        copied = ours and self.migrated
        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {MIGRATED}" if copied else ""))
        (self.tmp / "var").mkdir(exist_ok=True)
        env = web.server_env(database_url=database_url(self.base, name), var_dir=self.tmp / "var")
        env.update(extra)
        commands = [] if copied else [("migrate", "--noinput", "--skip-checks")]
        if served and not (ours and self.collected):
            commands.append(("collectstatic", "--noinput"))
        for args in commands:
            if manage(env, *args, root=root).wait() != 0:
                raise RuntimeError(f"{args[0]} failed")
        if ours and not copied:  # the copy made before anything else connects to it
            with psycopg.connect(self.base, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {MIGRATED}")
                conn.execute(f"CREATE DATABASE {MIGRATED} TEMPLATE {name}")
            self.migrated = True
        self.collected = self.collected or (ours and served)
        return env

    def server(self, which: str, name: str) -> web.Server:
        """A gunicorn on the `which` database, logging to gunicorn-`name`.log; stopped by
        close()."""
        server = web.Server(env=self.env(which), log=self.tmp / f"gunicorn-{name}.log")
        self.servers.append(server)
        return server

    def start_servers(self) -> None:
        self.web = {which: self.server(which, which) for which in ("small", "large")}
        log(f"gunicorn (2 workers) on ports {self.web['small'].port} and {self.web['large'].port}")

    # -- the comparisons ----------------------------------------------------------------

    def add(
        self, goal: str, what: str, a: str, b: str, ratio: float, limit: str, result: str
    ) -> None:
        self.rows.append((goal, what, a, b, ratio, limit, result))

    def budget_reads(self, prepared: dict, path: str) -> list[float]:
        """200 reads of a budget `path` on the large dataset with the member's read token
        (`prepared`'s), after 10 that warm both workers: their seconds. Served with the
        portal's clock at config.BUDGET_AT (tests/bench/clocked_wsgi.py), so the read sums
        the dataset month's rated usage; its last answer is kept in `prepared["answer"]`."""
        if self.budget_web is None:
            env = {**self.env("large"), "BENCH_NOW": config.BUDGET_AT.isoformat()}
            self.budget_web = web.Server(
                env=env, log=self.tmp / "gunicorn-budget.log", app="tests.bench.clocked_wsgi"
            )
            self.servers.append(self.budget_web)
        getter = web.Getter(self.budget_web.port, {"Authorization": f"Bearer {prepared['token']}"})
        for _ in range(10):
            getter.get(path)
        seconds = [getter.get(path) for _ in range(200)]
        prepared["answer"] = json.loads(getter.body)
        return seconds

    def budget_row(self, prepared: dict, query: str, seconds: list[float]) -> None:
        """Goal 14's rows of a budget read (`query`: "" or "?project=…"): p95 ≤ 20 ms, the
        month it read and the rated usage rows its scope has in it; then what it answered
        (its scope's first budget: the project's with ?project=) and the tenant's rows."""
        read95 = p95(seconds)
        answer = prepared["answer"]
        budget = (answer.get("project") or {}).get("budgets", [answer])[0]
        self.add(
            "14",
            f"GET budget{query} p95, 200 reads of {answer['month']} "
            f"({prepared['budget_rows']:,} rated rows)",
            f"{read95 * 1000:.1f} ms",
            f"p50 {statistics.median(seconds) * 1000:.1f} ms",
            float("nan"),
            "<= 20 ms",
            "pass" if read95 <= 0.020 else "MISS",
        )
        self.add(
            "-",
            f"  answer: spent ({budget['unit']}), state; "
            f"{prepared['tenant']} {prepared['tenant_rows']:,} rows (info)",
            str(budget["spent"]),
            budget["state"],
            float("nan"),
            "-",
            "-",
        )

    def add_spread(self, what: str, rounds: list[float]) -> None:
        """An information row: the lowest and highest of the rounds' own ratios (sorted)."""
        self.add(
            "-",
            f"  the rounds' own {what} ratios: lowest vs highest (info)",
            f"{rounds[0]:.3f}",
            f"{rounds[-1]:.3f}",
            rounds[0] / rounds[-1],
            "-",
            "info",
        )

    def kpis(self) -> None:
        """Goal 5: FactoryData(...).kpis of the month vs the equivalent SQL on raw rows."""
        log("goal 5: KPI measurement vs raw SQL (interleaved)")
        month = {"start": config.MONTH_START.isoformat(), "end": config.MONTH_END.isoformat()}
        reads = {w: raw.RawReads(self.urls[w]) for w in ("small", "large")}
        for which in ("small", "large"):  # warm both sides once
            self.agents[which].call("kpis", **month)
        self.agents["large"].call("kpis", **month)
        reads["large"].kpis()
        arms: dict[str, list] = {"measure_large": [], "raw_large": [], "measure_small": []}
        queries = {"small": set(), "large": set()}
        raw_rows = None
        rounds = max(2, self.sizes.rounds // 2)  # long arms: fewer rounds
        for n in range(rounds):
            figures = self.agents["large"].call("kpis", **month)
            arms["measure_large"].append(figures["seconds"])
            queries["large"].add(figures["queries"])
            if reference_due(n, rounds - 1, self.kpis_ratio(arms), 0.3):
                seconds, raw_rows = reads["large"].kpis()
                arms["raw_large"].append(seconds)
            small = self.agents["small"].call("kpis", **month)
            arms["measure_small"].append(small["seconds"])
            queries["small"].add(small["queries"])
        for r in reads.values():
            r.close()
        profile = self.agents["large"].call("kpis", profile=True, **month)
        (config.OUT_DIR / "profile-kpis.txt").write_text(profile.pop("profile"))
        ratio = self.kpis_ratio(arms)
        flat = len(queries["small"] | queries["large"]) == 1
        self.results["kpis"] = {
            "seconds": arms,
            "queries": {k: sorted(v) for k, v in queries.items()},
            "figures_large": figures,
            "raw_rows_large": [[str(v) for v in row] for row in raw_rows],
            "ratio_median": ratio,
        }
        self.add(
            "5",
            f"KPIs of 30 days, large: FactoryData vs raw SQL (medians of "
            f"{len(arms['measure_large'])} vs {len(arms['raw_large'])})",
            f"{statistics.median(arms['measure_large']) * 1000:.0f} ms",
            f"{statistics.median(arms['raw_large']) * 1000:.0f} ms",
            ratio,
            "≤ 0.3",
            verdict(ratio, 0.3, False),
        )
        self.add(
            "5",
            "queries: small vs large",
            str(sorted(queries["small"])),
            str(sorted(queries["large"])),
            1.0 if flat else float("nan"),
            "equal",
            "pass" if flat else "MISS",
        )

    @staticmethod
    def kpis_ratio(arms: dict[str, list]) -> float:
        """Goal 5's ratio: the medians of FactoryData's and of the raw SQL's seconds (NaN
        before the raw SQL's first sample)."""
        if not arms["raw_large"]:
            return float("nan")
        return statistics.median(arms["measure_large"]) / statistics.median(arms["raw_large"])

    def reads(self) -> None:
        """Goal 3: dashboard and /api/v1/usage, 30 days; large vs small and vs raw rows."""
        log("goal 3: dashboard and usage API p95 (interleaved small/large) and raw usage SQL")
        month = f"from={config.MONTH_START:%Y-%m-%d}&to={config.MONTH_END:%Y-%m-%d}"
        samples = 30 if self.sizes.quick else 40
        getters = {}
        for which in ("small", "large"):
            ids = self.ids[which]
            getters[which] = {
                "dashboard": web.Getter(
                    self.web[which].port, {"Cookie": f"sessionid={ids['session']}"}
                ),
                "usage": web.Getter(
                    self.web[which].port, {"Authorization": f"Bearer {ids['token']}"}
                ),
            }
        paths = {"dashboard": f"/?{month}", "usage": f"/api/v1/usage?{month}"}
        for which in ("small", "large"):  # warm up both workers of each server
            for page, path in paths.items():
                for _ in range(2 if page == "dashboard" else 4):
                    getters[which][page].get(path)
        times: dict[str, list[float]] = {
            f"{page}_{which}": [] for page in paths for which in ("small", "large")
        }
        # As many samples as the API's: with rounds x 2 (8 in a quick run) the p95 was the
        # slowest sample, one pause (a full garbage collection) deciding the goal.
        for _ in range(samples):
            for which in ("small", "large"):
                times[f"dashboard_{which}"].append(
                    getters[which]["dashboard"].get(paths["dashboard"])
                )
        times["raw_usage_large"] = []
        raw_reads = raw.RawReads(self.urls["large"])
        raw_reads.usage()  # warm
        raw_every = max(1, samples // (self.sizes.rounds * 2))
        for i in range(samples):
            for which in ("small", "large"):
                times[f"usage_{which}"].append(getters[which]["usage"].get(paths["usage"]))
            so_far = (
                p95(times["usage_large"]) / p95(times["raw_usage_large"])
                if times["raw_usage_large"]
                else float("nan")
            )
            if i % raw_every == 0 and reference_due(
                i // raw_every, (samples - 1) // raw_every, so_far, 0.05
            ):
                times["raw_usage_large"].append(raw_reads.usage())
        raw_reads.close()
        for which in ("small", "large"):  # where the dashboard's time goes, in-process
            profile = self.agents[which].call("profile_page", path=paths["dashboard"])
            (config.OUT_DIR / f"profile-dashboard-{which}.txt").write_text(
                f"GET {paths['dashboard']} ({which}): {profile['seconds'] * 1000:.0f} ms\n"
                f"{profile['profile']}"
            )
        raw_kpis = self.results.get("kpis", {}).get("seconds", {}).get("raw_large") or []
        self.results["reads"] = {"seconds": times, "p95": {k: p95(v) for k, v in times.items()}}
        q = self.results["reads"]["p95"]
        ms = lambda s: f"{s * 1000:.0f} ms"  # noqa: E731
        for page, label, raw_p95, raw_n in (
            ("dashboard", "operator dashboard", p95(raw_kpis or [float("nan")]), len(raw_kpis)),
            ("usage", "GET /api/v1/usage", q["raw_usage_large"], len(times["raw_usage_large"])),
        ):
            growth = q[f"{page}_large"] / q[f"{page}_small"]
            self.add(
                "3",
                f"{label} p95, 30 days: large vs small",
                ms(q[f"{page}_large"]),
                ms(q[f"{page}_small"]),
                growth,
                "≤ 1.5",
                verdict(growth, 1.5, False),
            )
            share = q[f"{page}_large"] / raw_p95
            self.add(
                "3",
                f"{label} p95, large: vs same query on raw rows ({samples} vs {raw_n})",
                ms(q[f"{page}_large"]),
                ms(raw_p95),
                share,
                "≤ 0.05",
                verdict(share, 0.05, False),
            )

    def pages(self) -> None:
        """Goal 20: every page of every role's navigation, the dataset month, p95 on the large
        dataset vs the small (interleaved), and under 300 ms on the large."""
        log("goal 20: every page of every role, p95 (interleaved small/large)")
        month = f"from={config.MONTH_START:%Y-%m-%d}&to={config.MONTH_END:%Y-%m-%d}"
        samples = 20 if self.sizes.quick else 30
        pages = self.agents["small"].call("role_pages")
        times: dict[str, dict[str, list[float]]] = {}
        for role, paths in pages.items():
            getters = {
                which: web.Getter(
                    self.web[which].port,
                    {"Cookie": f"sessionid={self.ids[which]['sessions'][role]}"},
                )
                for which in ("small", "large")
            }
            for path in paths:  # "/" is Overview to the staff, the tenant's home to a member
                url, key = f"{path}?{month}", f"{role} {path}"
                for which in ("small", "large"):  # warm up both workers
                    for _ in range(2):
                        getters[which].get(url)
                times[key] = {"small": [], "large": []}
                for _ in range(samples):
                    for which in ("small", "large"):
                        times[key][which].append(getters[which].get(url))
        ms = lambda s: f"{s * 1000:.0f} ms"  # noqa: E731
        for key, by_size in times.items():
            large, small = p95(by_size["large"]), p95(by_size["small"])
            self.add("20", f"{key} p95: large vs small", ms(large), ms(small), large / small,
                     "≤ 1.5", verdict(large / small, 1.5, False))  # fmt: skip
            self.add("20", f"{key} p95, large: vs 300 ms", ms(large), "300 ms", large / 0.3,
                     "≤ 1", verdict(large / 0.3, 1, False))  # fmt: skip
        self.results["pages"] = {
            "seconds": times,
            "p95": {key: {w: p95(v) for w, v in t.items()} for key, t in times.items()},
        }
        # Where the slowest staff pages' time goes on the large dataset, in-process (an
        # operator's view: the same reads as finance's).
        staff = [key for key in times if key.startswith("operator ")]
        slowest = sorted(staff, key=lambda key: -p95(times[key]["large"]))[:3]
        profiles = []
        for key in slowest:
            path = f"{key.split(' ', 1)[1]}?{month}"
            profile = self.agents["large"].call("profile_page", path=path)
            profiles.append(f"GET {path}: median {profile['median'] * 1000:.0f} ms, profiled "
                            f"{profile['seconds'] * 1000:.0f} ms\n{profile['profile']}")  # fmt: skip
        (config.OUT_DIR / "profile-pages.txt").write_text("\n\n".join(profiles))

    def crowd(self) -> None:
        """Goal 21: 50 clients at once, each on a keep-alive connection of its own, without
        pause, on Overview, Metering and the usage API (a third each) of the large dataset for
        BENCH_CROWD_SECONDS: p95 of each under 1 s, no error, and the throughput."""
        clients, seconds = 50, int(os.environ.get("BENCH_CROWD_SECONDS", "60"))
        log(f"goal 21: {clients} clients for {seconds} s on the large dataset")
        month = f"from={config.MONTH_START:%Y-%m-%d}&to={config.MONTH_END:%Y-%m-%d}"
        ids = self.ids["large"]
        targets = {
            "overview": (f"/?{month}", {"Cookie": f"sessionid={ids['session']}"}),
            "metering": (f"/metering/?{month}", {"Cookie": f"sessionid={ids['session']}"}),
            "usage API": (f"/api/v1/usage?{month}", {"Authorization": f"Bearer {ids['token']}"}),
        }
        names = list(targets)
        profiles = []  # where each target's time goes, in-process, before the load
        for name, (path, headers) in targets.items():
            if "Authorization" in headers:
                profile = self.agents["large"].call("profile_read", path=path, token=ids["token"])
            else:
                profile = self.agents["large"].call("profile_page", path=path)
            profiles.append(f"GET {path} ({name}): median {profile['median'] * 1000:.0f} ms, "
                            f"profiled {profile['seconds'] * 1000:.0f} ms\n"
                            f"{profile['profile']}")  # fmt: skip
        (config.OUT_DIR / "profile-crowd.txt").write_text("\n\n".join(profiles))
        times: dict[str, list[float]] = {name: [] for name in names}
        errors: list[str] = []
        deadline = time.monotonic() + seconds
        lock = threading.Lock()

        def client(number: int) -> None:
            name = names[number % len(names)]
            path, headers = targets[name]
            getter = web.Getter(self.web["large"].port, headers)
            while time.monotonic() < deadline:
                try:
                    elapsed = getter.get(path)
                except Exception as error:  # counted: the goal is none
                    with lock:
                        errors.append(f"{name}: {error}"[:300])
                    getter = web.Getter(self.web["large"].port, headers)
                    continue
                with lock:
                    times[name].append(elapsed)

        started = time.perf_counter()
        threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        answered = sum(len(t) for t in times.values())
        for name in names:
            worst = p95(times[name])
            self.add("21", f"{clients} clients: {name} p95 vs 1 s ({len(times[name])} answers)",
                     f"{worst * 1000:.0f} ms", "1000 ms", worst, "≤ 1",
                     verdict(worst, 1, False))  # fmt: skip
        self.add("21", f"{clients} clients: errors; throughput {answered / wall:.1f} requests/s",
                 str(len(errors)), "0", float("nan"), "0",
                 "pass" if not errors else "MISS")  # fmt: skip
        self.results["crowd"] = {
            "clients": clients,
            "seconds": wall,
            "answers": {name: len(t) for name, t in times.items()},
            "p95": {name: p95(t) for name, t in times.items()},
            "throughput_per_s": answered / wall,
            "errors": errors[:20],
        }

    def widest(self) -> None:
        """Every read operation over the longest period validation accepts (3 years to the
        current hour), large dataset, as the operator: each under 2 s (bounded work)."""
        log("widest reads: every read operation over 3 years, large dataset")
        end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)  # noqa: TID251
        start = end - timedelta(days=3 * 365 + 1)
        query = f"from={start:%Y-%m-%dT%H:00:00Z}&to={end:%Y-%m-%dT%H:00:00Z}"
        getter = web.Getter(
            self.web["large"].port, {"Authorization": f"Bearer {self.ids['large']['token']}"}
        )
        paths = {
            "/api/v1/kpis": "",
            "/api/v1/tfom": "",
            "/api/v1/flywheel/diagnosis": "",
            "/api/v1/market": "",
            "/api/v1/sla": "&page_size=1000",
            "/api/v1/usage": "&page_size=1000",
            "/api/v1/ledger/": "&page_size=1000",
            "/api/v1/incidents/": "&page_size=1000",
            "/api/v1/maintenance/": "&page_size=1000",
        }
        times: dict[str, list[float]] = {}
        answered: dict[str, int] = {}  # a read may refuse the period (400): not profiled
        for path, extra in paths.items():
            url = f"{path}?{query}{extra}"
            getter.get(url, expect=(200, 400))  # warm
            times[path] = [getter.get(url, expect=(200, 400)) for _ in range(3)]
            answered[path] = getter.status
            slowest = max(times[path])
            self.add(
                "19",
                f"GET {path} over 3 years (large): slowest of 3 vs 2 s",
                f"{slowest * 1000:.0f} ms",
                "2000 ms",
                slowest / 2,
                "≤ 1",
                verdict(slowest / 2, 1, False),
            )
        served = [path for path in times if answered[path] == 200]
        slowest_path = max(served, key=lambda p: max(times[p]))
        profile = self.agents["large"].call(
            "profile_read",
            path=f"{slowest_path}?{query}{paths[slowest_path]}",
            token=self.ids["large"]["token"],
        )
        (config.OUT_DIR / "profile-widest.txt").write_text(
            f"GET {slowest_path} over 3 years\n{profile.pop('profile')}"
        )
        self.results["widest"] = {"seconds": times, "query": query, "profile": profile}

    def rollups(self) -> None:
        """Goal 4: incremental rollup of one hour of new events vs a full rebuild (large)."""
        log("goal 4: incremental rollup (one hour) vs full rebuild (interleaved)")
        agent = self.agents["large"]
        per_hour = max(1000, self.sizes.large // (config.DAYS * 24))
        rounds = max(2, self.sizes.rounds // 2)
        full, incremental, details = [], [], []
        for r in range(rounds):
            hour = config.MONTH_START + timedelta(days=3 + 5 * r, hours=15)  # a busy hour
            figures = agent.call(
                "incremental_rollup",
                seq0=ROLLUP_SEQ + r * per_hour,
                hour=hour.isoformat(),
                per_hour=per_hour,
            )
            incremental.append(figures["seconds"])
            details.append(figures)
            full.append(agent.call("full_rollup")["seconds"])
            vacuums = figures["autovacuum"]
            log(
                f"  round {r + 1}: incremental {incremental[-1] * 1000:.0f} ms, full {full[-1]:.1f} s;"
                f" autovacuum when the fold started {vacuums['start'] or 'idle'},"
                f" when it ended {vacuums['end'] or 'idle'}"
            )
        ratio = statistics.median(incremental) / statistics.median(full)
        self.results["rollup"] = {
            "events_per_hour": per_hour,
            "incremental_seconds": incremental,
            "full_seconds": full,
            "incremental": details,
            "ratio_median": ratio,
        }
        self.add(
            "4",
            f"incremental rollup of one hour ({per_hour:,} new events) vs full rebuild",
            f"{statistics.median(incremental) * 1000:.0f} ms",
            f"{statistics.median(full):.1f} s",
            ratio,
            "≤ 0.01",
            verdict(ratio, 0.01, False),
        )
        self.add_spread("rollup", sorted(i / f for i, f in zip(incremental, full, strict=True)))
        vacuumed = sum(bool(d["autovacuum"]["start"] or d["autovacuum"]["end"]) for d in details)
        self.add(
            "-",
            "  autovacuum running as the fold started or ended: rounds (info)",
            f"{vacuumed}",
            f"of {len(details)}",
            float("nan"),
            "-",
            "info",
        )

    def rating(self) -> None:
        """Goal 8: the rate stage after one busy hour of new events in the month's last hour
        (the current hour of a live month) vs rating the whole month (large)."""
        log("goal 8: rating after one busy hour vs rating the whole month (interleaved)")
        agent = self.agents["large"]
        per_hour = max(1000, 2 * self.sizes.large // (config.DAYS * 24))  # twice the mean
        hour = config.MONTH_END - timedelta(hours=1)
        rounds = max(2, self.sizes.rounds // 2)
        after_hour, whole = [], []
        for r in range(rounds + 1):  # the whole month first: every month rated before
            if r < rounds:
                month = agent.call("rating_whole_month", month=config.MONTH_START.isoformat())
            figures = agent.call(
                "rating_after_hour",
                seq0=RATING_SEQ + r * per_hour,
                hour=hour.isoformat(),
                per_hour=per_hour,
                profile=r == rounds,
            )
            if r == rounds:  # one more hour, profiled: where its time goes
                # And the month's, with the clock at its end: the chargeback stage's rating
                # (chargeback_prepare), which it then need not repeat; not profiled (the
                # profiler makes it half as long again, 200 s of a full run).
                month = agent.call(
                    "rating_whole_month", month=config.MONTH_START.isoformat(),
                    at=config.MONTH_END.isoformat(),
                )  # fmt: skip
                self.rated_whole = True
                (config.OUT_DIR / "profile-rating-hour.txt").write_text(
                    f"rate stage after {per_hour:,} events in {hour:%Y-%m-%d %H}:00\n"
                    f"{figures['profile']}"
                )
                break
            whole.append(month["seconds"])
            after_hour.append(figures["seconds"])
            log(
                f"  round {r + 1}: after the hour {after_hour[-1] * 1000:.0f} ms"
                f" ({figures['tenant_months']} tenant-months), whole month {whole[-1]:.1f} s"
                f" ({month['tenant_months']} tenant-months)"
            )
        made = agent.call("rating_reservations", month=config.MONTH_START.isoformat())
        log(f"  the month's reservations as rated: {made}")
        ratio = statistics.median(after_hour) / statistics.median(whole)
        self.results["rating"] = {
            "reservations_rated": made,
            "events_per_hour": per_hour,
            "reservations": config.RESERVATIONS,
            "after_hour_seconds": after_hour,
            "whole_month_seconds": whole,
            "ratio_median": ratio,
        }
        self.add(
            "8",
            f"rating after one busy hour ({per_hour:,} events) vs the whole month",
            f"{statistics.median(after_hour) * 1000:.0f} ms",
            f"{statistics.median(whole):.1f} s",
            ratio,
            "≤ 0.02",
            verdict(ratio, 0.02, False),
        )

    def ingestion(self) -> None:
        """Goals 1 and 2: API batches vs the bare dedup COPY of the same events (and vs the
        same into the project's own tables, labelled); replay vs fresh."""
        log("goals 1-2: ingestion, API vs bare and schema dedup COPY, raw binary COPY; replay")
        ids = self.ids["large"]
        # A fresh server, as for the memory goal: no page of the read stages in its workers.
        server = self.server("large", "ingest")
        generator = EventGenerator()
        per_round = self.sizes.ingest_events
        raw_ingest = raw.RawIngest(self.urls["large"])
        arms: dict[str, list] = {
            "bare_dedup": [],
            "raw_dedup": [],
            "api": [],
            "raw_binary": [],
            "replay": [],
        }
        latencies: dict[str, list] = {"api": [], "replay": []}
        encoder = msgspec.json.Encoder()

        def round_events(r: int):
            # A live feed: each round is one hour of events, in time order.
            hour = config.INGEST_START + timedelta(days=1, hours=r)
            rows = list(
                generator.rows(
                    seq0=INGEST_SEQ + r * per_round, count=per_round, start=hour, days=1, hours=1
                )
            )
            rows.sort(key=lambda x: x.time)
            bodies = [
                encoder.encode([generator.item(x) for x in rows[i : i + 1000]])
                for i in range(0, per_round, 1000)
            ]
            resolved = raw.resolved(rows, ids["tenants"], ids["deployments"], suffix="-raw")
            batches = [resolved[i : i + 1000] for i in range(0, per_round, 1000)]
            return bodies, batches

        warm_bodies, warm_batches = round_events(self.sizes.rounds)  # warm-up, not measured
        web.post_batches(
            port=server.port, token=ids["token"], bodies=warm_bodies, threads=4, expect="accepted"
        )
        raw_ingest.bare_dedup_copy(warm_batches)
        raw_ingest.dedup_copy(warm_batches)
        raw_ingest.binary_copy(warm_batches)
        previous = warm_bodies
        wal = {"bare_dedup": 0, "raw_dedup": 0, "api": 0}  # bytes of WAL each arm wrote
        # The CPU each arm's rounds cost PostgreSQL's processes (by backend_type) and the web
        # workers, and the events they stored (tests/bench/cpu.py).
        spent: dict[str, list] = {arm: [] for arm in wal}
        stored: dict[str, list] = {arm: [] for arm in wal}
        monitor = psycopg.connect(self.base, autocommit=True)
        meters = {
            "database": cpu.ChildrenCPU(
                cpu.parent(monitor.info.backend_pid), kinds=backend_types(monitor)
            ),
            "web": cpu.ChildrenCPU(server.process.pid),
        }

        def measured(arm, write, *args, **kwargs):
            lsn = raw_ingest.wal_lsn()
            for meter in meters.values():
                meter.start()
            result = write(*args, **kwargs)
            spent[arm].append({name: meter.stop() for name, meter in meters.items()})
            wal[arm] += raw_ingest.wal_lsn() - lsn
            stored[arm].append(result["accepted"] if arm == "api" else per_round)
            return result

        loads = []  # the machine's 1-minute load average at each round's start
        paces = []  # and how fast its cores ran then (cpu.machine_pace)
        for r in range(self.sizes.rounds):
            bodies, batches = round_events(r)
            loads.append(os.getloadavg()[0])
            paces.append(cpu.machine_pace())
            seconds = measured("bare_dedup", raw_ingest.bare_dedup_copy, batches)
            arms["bare_dedup"].append(per_round / seconds)
            seconds = measured("raw_dedup", raw_ingest.dedup_copy, batches)
            arms["raw_dedup"].append(per_round / seconds)
            api = measured(
                "api", web.post_batches, port=server.port, token=ids["token"], bodies=bodies,
                threads=4, expect="accepted",
            )  # fmt: skip
            arms["api"].append(per_round / api["seconds"])
            latencies["api"] += api["latencies"]
            arms["raw_binary"].append(per_round / raw_ingest.binary_copy(batches))
            replay = web.post_batches(
                port=server.port,
                token=ids["token"],
                bodies=previous,
                threads=4,
                expect="duplicates",
            )
            arms["replay"].append(len(previous) * 1000 / replay["seconds"])
            latencies["replay"] += replay["latencies"]
            previous = bodies
            log(
                "  round {}: bare dedup {:,.0f}/s, schema dedup {:,.0f}/s, API {:,.0f}/s, "
                "raw binary {:,.0f}/s, replay {:,.0f}/s; client backends' CPU {:.2f} s bare, "
                "{:.2f} s API, web workers' {:.2f} s; load average {:.1f}".format(
                    r + 1,
                    arms["bare_dedup"][-1],
                    arms["raw_dedup"][-1],
                    arms["api"][-1],
                    arms["raw_binary"][-1],
                    arms["replay"][-1],
                    cpu.total([spent["bare_dedup"][-1]["database"]], CLIENT_BACKENDS),
                    cpu.total([spent["api"][-1]["database"]], CLIENT_BACKENDS),
                    cpu.total([spent["api"][-1]["web"]], ["child"]),
                    loads[-1],
                )
            )
        raw_ingest.close()
        monitor.close()
        server.stop()
        med = {k: statistics.median(v) for k, v in arms.items()}
        self.results["ingestion"] = {
            "events_per_round": per_round,
            "batch": 1000,
            "client_threads": 4,
            "events_per_second": arms,
            "median": med,
            "request_p95_ms": {k: p95(v) * 1000 for k, v in latencies.items()},
        }
        events = per_round * self.sizes.rounds
        self.results["ingestion"]["wal_bytes_per_event"] = {k: v / events for k, v in wal.items()}
        self.ingestion_cpu(spent, stored, loads, paces)
        ratio = med["api"] / med["bare_dedup"]
        self.add(
            "-",
            "API vs bare dedup COPY, wall clock (events/s, median; info)",
            f"{med['api']:,.0f}/s",
            f"{med['bare_dedup']:,.0f}/s",
            ratio,
            "-",
            "info",
        )
        # Its spread within this run: each round's API rate against its own bare.
        rounds = sorted(a / b for a, b in zip(arms["api"], arms["bare_dedup"], strict=True))
        self.results["ingestion"]["round_ratios"] = rounds
        self.add_spread("wall-clock", rounds)
        self.add(
            "-",
            "API vs dedup COPY into the project's tables (schema baseline, info)",
            f"{med['api']:,.0f}/s",
            f"{med['raw_dedup']:,.0f}/s",
            med["api"] / med["raw_dedup"],
            "-",
            "info",
        )
        self.add(
            "-",
            "bare dedup COPY vs raw binary COPY, no dedup (info)",
            f"{med['bare_dedup']:,.0f}/s",
            f"{med['raw_binary']:,.0f}/s",
            med["bare_dedup"] / med["raw_binary"],
            "-",
            "info",
        )
        for arm, label in (("bare_dedup", "bare dedup COPY"), ("raw_dedup", "schema baseline")):
            self.add(
                "-",
                f"WAL bytes an event: API vs {label} (info)",
                f"{wal['api'] / events:,.0f} B",
                f"{wal[arm] / events:,.0f} B",
                wal["api"] / wal[arm],
                "-",
                "info",
            )
        replay_ratio = med["replay"] / med["api"]
        self.add(
            "2",
            "replay of stored events vs fresh insert, API (events/s)",
            f"{med['replay']:,.0f}/s",
            f"{med['api']:,.0f}/s",
            replay_ratio,
            "≥ 1.0",
            verdict(replay_ratio, 1.0, True),
        )
        profile = self.agents["large"].call(
            "profile_ingest", seq0=PROFILE_SEQ, batches=20, token=ids["token"]
        )
        (config.OUT_DIR / "profile-ingest.txt").write_text(profile.pop("profile"))
        self.results["ingestion"]["in_process_profile"] = profile

    def ingestion_cpu(
        self,
        spent: dict[str, list],
        stored: dict[str, list],
        loads: list[float],
        paces: list[float],
    ) -> None:
        """Goal 1 from the CPU each arm's rounds cost (tests/bench/cpu.py), which the two
        cores' sharing moves far less than their wall-clock rates: (a) PostgreSQL's client
        backends' CPU an event stored, the bare dedup COPY's against the API's, ≥ 0.8; (b)
        the gunicorn workers' CPU an event stored through the API, ≤ 15 µs."""

        def us(figures: list[dict], events: int, kinds: tuple[str, ...] | None) -> float:
            """µs of CPU an event stored: of `kinds`, or of every kind but the client
            backends' and the bench's monitor."""
            if kinds is None:
                kinds = tuple({k for f in figures for k in f} - {*CLIENT_BACKENDS, MONITOR})
            return cpu.total(figures, kinds) * 1e6 / events

        def arm_us(arm: str, tier: str, kinds: tuple[str, ...] | None) -> float:
            return us([r[tier] for r in spent[arm]], sum(stored[arm]), kinds)

        arms = ("bare_dedup", "raw_dedup", "api")
        clients = {arm: arm_us(arm, "database", CLIENT_BACKENDS) for arm in arms}
        others = {arm: arm_us(arm, "database", None) for arm in arms}
        web_us = arm_us("api", "web", ("child",))
        # The spread within this run: each round's bare figure against its API round's.
        rounds = sorted(
            us([b["database"]], b_n, CLIENT_BACKENDS) / us([a["database"]], a_n, CLIENT_BACKENDS)
            for b, b_n, a, a_n in zip(
                spent["bare_dedup"], stored["bare_dedup"], spent["api"], stored["api"], strict=True
            )
        )
        self.results["ingestion"]["cpu"] = {
            "seconds_per_round": spent,
            "events_stored_per_round": stored,
            "client_backends_us_per_event": clients,
            "other_postgresql_processes_us_per_event": others,
            "web_workers_us_per_event": web_us,
            "database_round_ratios": rounds,
            "load_average": loads,
            "machine_pace_seconds": paces,
        }
        ratio = clients["bare_dedup"] / clients["api"]
        self.add(
            "1",
            "database CPU an event (client backends): bare dedup COPY vs API",
            f"{clients['bare_dedup']:.1f} µs",
            f"{clients['api']:.1f} µs",
            ratio,
            "≥ 0.8",
            verdict(ratio, 0.8, True),
        )
        self.add_spread("CPU", rounds)
        self.add(
            "1",
            "web tier CPU an event (gunicorn workers, API rounds) vs 15 µs",
            f"{web_us:.1f} µs",
            "15 µs",
            web_us / 15,
            "≤ 1",
            verdict(web_us / 15, 1, False),
        )
        self.add(
            "-",
            "  the cores' pace at the rounds' start, a fixed loop's CPU: fastest, slowest (info)",
            f"{min(paces) * 1000:.0f} ms",
            f"{max(paces) * 1000:.0f} ms",
            max(paces) / min(paces),
            "-",
            "info",
        )
        self.add(
            "-",
            "  load average at the rounds' start: lowest, highest (info)",
            f"{min(loads):.1f}",
            f"{max(loads):.1f}",
            float("nan"),
            "-",
            "info",
        )
        self.add(
            "-",
            "database CPU an event: API vs schema baseline (info)",
            f"{clients['api']:.1f} µs",
            f"{clients['raw_dedup']:.1f} µs",
            clients["api"] / clients["raw_dedup"],
            "-",
            "info",
        )
        self.add(
            "-",
            "PostgreSQL's other processes' CPU an event: API vs bare (info)",
            f"{others['api']:.1f} µs",
            f"{others['bare_dedup']:.1f} µs",
            others["api"] / others["bare_dedup"] if others["bare_dedup"] else float("nan"),
            "-",
            "info",
        )

    def baseline(self) -> None:
        """Goal 10: API ingestion of this tree vs the baseline revision (config.baseline()),
        each served by its own gunicorn from its own tree, in interleaved rounds of fresh
        events (the order alternating each round); events without token classes, which both
        accept. An arm of this tree with events that carry classes is reported beside it
        (info). A baseline with this tree's migrations ingests into the large dataset's
        database beside this tree; one whose migrations differ into a database of its own,
        migrated by its own manage.py and set up by its own bench code, and this tree then
        into another of its own set up by this tree's (the same tenants, models and prices,
        the same empty ingestion month)."""
        revision = config.baseline()
        differs = config.baseline_schema_differs(revision)
        log(f"goal 10: ingestion, this tree vs {revision} (interleaved"
            + (", each on a database of its own: the migrations differ)" if differs else ")"))  # fmt: skip
        tree = self.tmp / "baseline"
        tree.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(config.ROOT), "archive", revision], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        roots = {"this": config.ROOT, "baseline": tree}
        if differs:
            envs, tokens = {}, {}
            for arm, root in roots.items():
                envs[arm] = self.own_database(config.BASELINE_DATABASES[arm], root=root)
                agent = Agent(f"goal 10 {arm}", envs[arm], root=root)
                tokens[arm] = agent.call("setup", events=self.sizes.large)["token"]
                agent.close()
            log(f"  migrated and set up {config.BASELINE_DATABASES} by their own trees")
        else:
            envs = {arm: self.env("large") for arm in roots}
            tokens = dict.fromkeys(roots, self.ids["large"]["token"])
        servers = {
            arm: web.Server(env=envs[arm], log=self.tmp / f"gunicorn-{arm}.log", root=root)
            for arm, root in roots.items()
        }
        self.servers.extend(servers.values())
        servers["classes"], tokens["classes"] = servers["this"], tokens["this"]
        generator = EventGenerator()
        per_round = self.sizes.ingest_events
        encoder = msgspec.json.Encoder()
        arms: dict[str, list[float]] = {arm: [] for arm in ("this", "baseline", "classes")}
        # The CPU each arm's rounds cost its gunicorn workers and PostgreSQL's client backends
        # (one arm ingests at a time), which the machine's other work moves far less than the
        # wall clock.
        monitor = psycopg.connect(self.base, autocommit=True)
        meters = {
            "database": cpu.ChildrenCPU(
                cpu.parent(monitor.info.backend_pid), kinds=backend_types(monitor)
            ),
            **{arm: cpu.ChildrenCPU(servers[arm].process.pid) for arm in roots},
        }
        spent: dict[str, list[dict[str, float]]] = {arm: [] for arm in arms}

        def bodies(slot: int, *, classes: bool) -> list[bytes]:
            hour = config.INGEST_START + timedelta(days=10, hours=slot)
            rows = sorted(
                generator.rows(
                    seq0=BASELINE_SEQ + slot * per_round, count=per_round, start=hour, days=1,
                    hours=1,
                ),
                key=lambda row: row.time,
            )  # fmt: skip
            items = [generator.item(row) for row in rows]
            if classes:  # half the uncached input written to the cache, a third reasoning
                for item in items:
                    uncached = item["input_tokens"] - item["cached_tokens"]
                    item["cache_write_tokens"] = uncached // 2
                    item["reasoning_tokens"] = item["output_tokens"] // 3
            return [encoder.encode(items[i : i + 1000]) for i in range(0, per_round, 1000)]

        # On one database each arm's events are of an hour of their own (fresh keys); on
        # databases of their own this tree and the baseline ingest the same events, fresh in
        # each.
        for arm in ("this", "baseline"):  # warm-up, not measured
            web.post_batches(port=servers[arm].port, token=tokens[arm],
                             bodies=bodies(len(arms) * self.sizes.rounds
                                           + (arm == "this" and not differs), classes=False),
                             threads=4, expect="accepted")  # fmt: skip
        for r in range(self.sizes.rounds):
            order = (
                ("this", "baseline", "classes") if r % 2 == 0 else ("classes", "baseline", "this")
            )
            for arm in order:
                same = "this" if differs and arm == "baseline" else arm
                slot = r * len(arms) + order.index(same)
                sent = bodies(slot, classes=arm == "classes")
                tiers = (meters["database"], meters["baseline" if arm == "baseline" else "this"])
                for meter in tiers:
                    meter.start()
                result = web.post_batches(
                    port=servers[arm].port, token=tokens[arm], bodies=sent, threads=4,
                    expect="accepted",
                )  # fmt: skip
                database, workers = (meter.stop() for meter in tiers)
                spent[arm].append({"web": cpu.total([workers], ("child",)),
                                   "database": cpu.total([database], CLIENT_BACKENDS)})  # fmt: skip
                arms[arm].append(per_round / result["seconds"])
            log("  round {}: this {:,.0f}/s, {} {:,.0f}/s, this with classes {:,.0f}/s; CPU "
                "an event (web + database) {:.1f} + {:.1f}, {:.1f} + {:.1f}, {:.1f} + {:.1f} µs; "
                "load average {:.1f}".format(
                    r + 1, arms["this"][-1], revision, arms["baseline"][-1], arms["classes"][-1],
                    *(spent[arm][-1][tier] * 1e6 / per_round for arm in arms
                      for tier in ("web", "database")),
                    os.getloadavg()[0]))  # fmt: skip
        monitor.close()
        servers["this"].stop()
        servers["baseline"].stop()
        med = {arm: statistics.median(values) for arm, values in arms.items()}
        us = {
            arm: {
                tier: sum(r[tier] for r in rounds) * 1e6 / (per_round * len(rounds))
                for tier in ("web", "database")
            }
            for arm, rounds in spent.items()
        }
        self.results["baseline"] = {
            "revision": revision,
            "databases": config.BASELINE_DATABASES if differs else "bench_large",
            "events_per_round": per_round,
            "events_per_second": arms,
            "median": med,
            "cpu_seconds_per_round": spent,
            "cpu_us_per_event": us,
        }
        ratio = med["this"] / med["baseline"]
        self.add(
            "10",
            f"API ingestion, this tree vs {revision} (events/s, interleaved)",
            f"{med['this']:,.0f}/s",
            f"{med['baseline']:,.0f}/s",
            ratio,
            "≥ 0.9",
            verdict(ratio, 0.9, True),
        )
        for tier, label in (("web", "gunicorn workers"), ("database", "client backends")):
            self.add(
                "-",
                f"  CPU an event, {label}: this tree vs {revision} (info)",
                f"{us['this'][tier]:.1f} µs",
                f"{us['baseline'][tier]:.1f} µs",
                us["this"][tier] / us["baseline"][tier],
                "-",
                "info",
            )
        self.add(
            "-",
            "API ingestion, events with token classes vs without (info)",
            f"{med['classes']:,.0f}/s",
            f"{med['this']:,.0f}/s",
            med["classes"] / med["this"],
            "-",
            "info",
        )

    def otlp(self) -> None:
        """Goals 11 and 12: OTLP/HTTP protobuf exports of 1,000 GenAI spans per request vs
        native JSON batches of 1,000 events, interleaved rounds of fresh events (4 client
        threads); then the peak RSS of a fresh web worker ingesting 10,000-span exports."""
        log("goals 11-12: OTLP protobuf spans vs native JSON events; RSS at 10,000 spans")
        ids = self.ids["large"]
        server = self.server("large", "otlp")
        generator = EventGenerator()
        per_round = self.sizes.ingest_events
        encoder = msgspec.json.Encoder()
        arms: dict[str, list[float]] = {"otlp": [], "json": []}

        def rows(slot: int, count: int) -> list:
            hour = config.INGEST_START + timedelta(days=14, hours=slot)
            generated = generator.rows(
                seq0=OTLP_SEQ + slot * per_round, count=count, start=hour, days=1, hours=1
            )
            return sorted(generated, key=lambda row: row.time)

        def bodies(arm: str, slot: int) -> list[bytes]:
            events = rows(slot, per_round)
            chunks = [events[i : i + 1000] for i in range(0, per_round, 1000)]
            if arm == "otlp":
                return [generator.otlp_body(chunk) for chunk in chunks]
            return [encoder.encode([generator.item(row) for row in chunk]) for chunk in chunks]

        def post(arm: str, sent: list[bytes]) -> dict:
            path = web.OTLP_TRACES if arm == "otlp" else "/api/v1/usage/events"
            return web.post_batches(port=server.port, token=ids["token"], bodies=sent,
                                    threads=4, expect="accepted", path=path)  # fmt: skip

        slots = iter(range(1000))
        for arm in arms:  # warm-up, not measured
            post(arm, bodies(arm, next(slots)))
        for r in range(self.sizes.rounds):
            for arm in ("otlp", "json") if r % 2 == 0 else ("json", "otlp"):
                result = post(arm, bodies(arm, next(slots)))
                arms[arm].append(per_round / result["seconds"])
            log(f"  round {r + 1}: OTLP {arms['otlp'][-1]:,.0f}/s, JSON {arms['json'][-1]:,.0f}/s")
        server.stop()
        med = {arm: statistics.median(values) for arm, values in arms.items()}
        ratio = med["otlp"] / med["json"]
        self.add(
            "11",
            "OTLP protobuf spans vs native JSON events, 1,000 a request (events/s)",
            f"{med['otlp']:,.0f}/s",
            f"{med['json']:,.0f}/s",
            ratio,
            "≥ 0.5",
            verdict(ratio, 0.5, True),
        )

        fresh = self.server("large", "otlp-memory")
        batches = 6 if self.sizes.quick else 20
        exports = [generator.otlp_body(rows(next(slots), 10_000)) for _ in range(batches)]
        pids = fresh.worker_pids()
        web.post_batches(port=fresh.port, token=ids["token"], bodies=exports, threads=2,
                         expect="accepted", path=web.OTLP_TRACES)  # fmt: skip
        peak_mb = max(web.memory_kib(pid)["VmHWM"] for pid in pids) / 1024
        fresh.stop()
        self.results["otlp"] = {
            "events_per_round": per_round,
            "events_per_second": arms,
            "median": med,
            "memory": {"batches": batches, "spans_per_batch": 10_000,
                       "body_bytes": len(exports[0]), "peak_mb": peak_mb},
        }  # fmt: skip
        self.add(
            "12",
            "peak RSS of a web worker, 10,000-span OTLP exports (VmHWM)",
            f"{peak_mb:.0f} MB",
            "300 MB",
            peak_mb / 300,
            "< 1.0",
            "pass" if peak_mb < 300 else "MISS",
        )

    def embedded(self) -> None:
        """Goal 7 (tests/bench/sustained.py): the embedded default under 5,000 events a
        second for 5 minutes (quick: 60 s), native batches of 1,000: accepted event →
        /api/v1/kpis p95 ≤ 60 s during and after the feed, no "database is locked" (the
        server's and the worker's log, the answers), Overview's p95 ≤ 1 s meanwhile. Then,
        as information, flat-out ingestion against production settings (gunicorn,
        PostgreSQL, Redis) on a database of its own with the same factory: interleaved
        rounds of fresh events, 1,000 a request, 4 client threads a side."""
        seconds = 60 if self.sizes.quick else 300
        log(f"goal 7: the embedded default under {sustained.RATE:,} events/s for {seconds} s")
        var = self.tmp / "embedded"
        var.mkdir()
        env = web.embedded_env(var_dir=var)
        if manage(env, "migrate", "--noinput", "--skip-checks").wait() != 0:
            raise RuntimeError("migrate of the embedded database failed")
        agent = Agent("embedded", env)
        prepared = agent.call("setup", events=self.sizes.small)
        agent.close()
        serve_log = self.tmp / "serve-embedded.log"
        embedded = web.Embedded(env=env, log=serve_log)
        try:
            fed = sustained.measure(
                port=embedded.port, token=prepared["token"], session=prepared["session"],
                seconds=seconds, seq0=EMBEDDED_SEQ,
            )  # fmt: skip
            self.embedded_rows(fed, serve_log.read_text(errors="replace"))
            log("  flat out, embedded vs production settings (info)")
            production_env = self.own_database("bench_production", served=True)
            agent = Agent("production", production_env)
            production_token = agent.call("setup", events=self.sizes.small)["token"]
            agent.close()
            production = web.Server(
                env=production_env, log=self.tmp / "gunicorn-production-vs-embedded.log"
            )
            self.servers.append(production)
            arms = self.embedded_flat_out(
                {
                    "embedded": (embedded.port, prepared["token"]),
                    "production": (production.port, production_token),
                }
            )
            production.stop()
        finally:
            embedded.stop()
        med = {side: statistics.median(values) for side, values in arms.items()}
        self.results["embedded"]["flat_out_events_per_second"] = arms
        self.add(
            "-",
            "API ingestion flat out, embedded vs production settings (info)",
            f"{med['embedded']:,.0f}/s",
            f"{med['production']:,.0f}/s",
            med["embedded"] / med["production"],
            "-",
            "info",
        )

    def embedded_flat_out(self, targets: dict[str, tuple[int, str]]) -> dict[str, list[float]]:
        """Interleaved rounds of fresh events as fast as 4 client threads send them: each
        side's events a second, round by round."""
        generator = EventGenerator()
        encoder = msgspec.json.Encoder()
        per_round = min(self.sizes.ingest_events, 20_000)
        arms: dict[str, list[float]] = {side: [] for side in targets}
        for r in range(self.sizes.rounds):
            for s, (side, (port, token)) in enumerate(targets.items()):
                rows = sorted(
                    generator.rows(
                        seq0=EMBEDDED_SEQ + (2 * r + s + 1) * per_round, count=per_round,
                        start=config.INGEST_START + timedelta(days=2, hours=r), days=1, hours=1,
                    ),
                    key=lambda x: x.time,
                )  # fmt: skip
                items = [generator.item(x) for x in rows]
                bodies = [encoder.encode(items[i : i + 1000]) for i in range(0, per_round, 1000)]
                posted = web.post_batches(
                    port=port, token=token, bodies=bodies, threads=4, expect="accepted"
                )
                arms[side].append(per_round / posted["seconds"])
            log(
                "  round {}: {}".format(
                    r + 1, ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in arms.items())
                )
            )
        return arms

    def embedded_rows(self, fed: dict, serve_log: str) -> None:
        """Goal 7's figures and rows from the sustained feed (sustained.measure)."""
        waits = [sustained.CATCH_UP if w is None else w for w in fed["waits"]]
        unseen = sum(w is None for w in fed["waits"])
        in_logs = serve_log.count(sustained.LOCKED)
        rate = fed["answer_rate"]
        page = fed["page_seconds"]
        tasks = sustained.worker_tasks(serve_log)
        self.results["embedded"] = {**fed, "locked_in_logs": in_logs, "worker_tasks": tasks}
        log(
            f"  {fed['events_accepted']:,} of {fed['events_sent']:,} events accepted in "
            f"{fed['feed_seconds']:.0f} s ({rate:,.0f}/s, answers p95 {p95(fed['lags']):.2f} s "
            f"after their due time); KPIs: p50 {statistics.median(waits):.1f} s, p95 "
            f"{p95(waits):.1f} s, {unseen} batches never seen, {fed['kpi_reads']} reads; "
            f"Overview p95 {p95(page) * 1000:.0f} ms ({len(page)} reads); "
            f"'{sustained.LOCKED}': {in_logs} in the logs, {fed['locked_answers']} answers; "
            f"{len(fed['failures'])} failed answers; the worker's tasks {tasks}"
        )
        feed = f"{sustained.RATE:,}/s for {fed['seconds']:.0f} s"
        self.add(
            "7",
            f"embedded, {feed}: events accepted a second (answers)",
            f"{rate:,.0f}/s",
            f"{sustained.RATE:,}/s",
            rate / sustained.RATE,
            "≥ 0.98",
            verdict(rate / sustained.RATE, 0.98, at_least=True),
        )
        self.add(
            "7",
            f"embedded, {feed}: accepted event → /api/v1/kpis p95",
            f"{p95(waits):.1f} s",
            "60 s",
            p95(waits) / 60,
            "≤ 1",
            verdict(p95(waits) / 60, 1, at_least=False) if not unseen else "MISS",
        )
        after = fed["last_seen_after_feed"]
        self.add(
            "-",
            "  the last batch seen in the KPIs after the feed's end (info)",
            "never" if after is None else f"{after:.1f} s",
            f"{len(waits):,} batches",
            float("nan"),
            "-",
            "info",
        )
        for name in ("metering.fold", "billing.rate", "flywheel.measure"):
            task = tasks.get(name, {"runs": 0, "seconds": 0.0, "slowest": 0.0})
            self.add(
                "-",
                f"  the worker's {name}: runs; seconds, slowest (info)",
                f"{task['runs']}",
                f"{task['seconds']:.0f} s, {task['slowest']:.0f}",
                float("nan"),
                "-",
                "info",
            )
        locked = in_logs + fed["locked_answers"]
        self.add(
            "7",
            f"embedded, {feed}: '{sustained.LOCKED}', logs + answers",
            f"{in_logs} + {fed['locked_answers']}",
            "0",
            float("nan"),
            "0",
            "pass" if locked == 0 else "MISS",
        )
        self.add(
            "-",
            "  failed answers: ingestion, KPIs, Overview (info)",
            str(len(fed["failures"])),
            "0",
            float("nan"),
            "-",
            "info",
        )
        self.add(
            "7",
            f"embedded, {feed}: Overview p95 ({len(page)} reads)",
            f"{p95(page) * 1000:.0f} ms",
            "1000 ms",
            p95(page),
            "≤ 1",
            verdict(p95(page), 1, at_least=False),
        )

    def freshness(self) -> None:
        """Goal 9 (tests/bench/fresh.py): an accepted event of the current hour → the usage
        API, the KPIs and the budget read, in the embedded default and in production
        settings, each serving the demo under a gateway's feed."""
        seconds = 60 if self.sizes.quick else 180
        self.results["freshness"] = {"feed_seconds": seconds}
        for mode in ("embedded", "production"):
            var = self.tmp / f"fresh-{mode}"
            var.mkdir()
            if mode == "embedded":
                env = web.embedded_env(var_dir=var)
            else:
                with psycopg.connect(self.base, autocommit=True) as conn:
                    conn.execute("DROP DATABASE IF EXISTS bench_fresh")
                    conn.execute("CREATE DATABASE bench_fresh")
                env = web.server_env(
                    database_url=database_url(self.base, "bench_fresh"), var_dir=var
                )
            log(f"goal 9: the demo in the {mode} mode, then {seconds:.0f} s of a gateway's feed")
            started = time.perf_counter()
            server, others, token = fresh.demo_serve(mode=mode, env=env, tmp=self.tmp)
            log(f"  the demo built and served in {time.perf_counter() - started:.0f} s")
            try:
                figures = fresh.measure(port=server.port, token=token, seconds=seconds)
            finally:
                server.stop()
                for process in others:
                    process.terminate()
                    process.wait(timeout=60)
            self.results["freshness"][mode] = figures
            waits = [fresh.CATCH_UP if w is None else w for w in figures["waits"]]
            log(
                f"  {figures['batches']} batches: p50 {statistics.median(waits):.1f} s, p95"
                f" {p95(waits):.1f} s, slowest {max(waits):.1f} s,"
                f" {sum(w is None for w in figures['waits'])} never read"
            )
            self.add(
                "9",
                f"accepted event → usage API, KPIs and budget, {mode}: p95",
                f"{p95(waits):.1f} s",
                "60 s",
                p95(waits) / 60,
                "≤ 1",
                verdict(p95(waits) / 60, 1, False),
            )

    def memory(self) -> None:
        """Goal 6: peak RSS of a fresh web worker ingesting 10,000-event batches."""
        log("goal 6: peak RSS of gunicorn workers ingesting 10,000-event batches")
        ids = self.ids["large"]
        server = self.server("large", "memory")
        generator = EventGenerator()
        batches = 6 if self.sizes.quick else 20
        encoder = msgspec.json.Encoder()
        bodies = []
        for b in range(batches):
            rows = sorted(
                generator.rows(
                    seq0=MEMORY_SEQ + b * 10_000,
                    count=10_000,
                    start=config.INGEST_START + timedelta(days=10, hours=b),
                    days=1,
                    hours=1,
                ),
                key=lambda x: x.time,
            )
            bodies.append(encoder.encode([generator.item(x) for x in rows]))
        pids = server.worker_pids()
        before = {pid: web.memory_kib(pid) for pid in pids}
        result = web.post_batches(
            port=server.port, token=ids["token"], bodies=bodies, threads=2, expect="accepted"
        )
        after = {pid: web.memory_kib(pid) for pid in pids}
        server.stop()
        peak_mb = max(m["VmHWM"] for m in after.values()) / 1024
        self.results["memory"] = {
            "batches": batches,
            "events_per_batch": 10_000,
            "body_bytes": len(bodies[0]),
            "before_kib": before,
            "after_kib": after,
            "peak_mb": peak_mb,
            "events_per_second": batches * 10_000 / result["seconds"],
        }
        self.add(
            "6",
            "peak RSS of a web worker, 10,000-event batches (VmHWM)",
            f"{peak_mb:.0f} MB",
            "300 MB",
            peak_mb / 300,
            "< 1.0",
            "pass" if peak_mb < 300 else "MISS",
        )

    def replica(self) -> None:
        """Goal 22: the read replica as production runs it. A hot standby of the bench's
        cluster (pg_basebackup, streaming its WAL, the primary's memory settings) and a
        gunicorn with DATABASE_REPLICA_URL: Overview and the usage API of the large
        dataset's month read through it vs on the primary alone (interleaved), p95 ≤ 1.2 ×,
        and the standby answered them (its transactions counted)."""
        from types import SimpleNamespace

        from tests.servers import PrivatePostgres

        log("goal 22: Overview and the usage API read from a streaming standby")
        started = time.perf_counter()
        primary = SimpleNamespace(port=urlsplit(self.base).port)
        standby = PrivatePostgres(primary=primary, options=config.PG_OPTIONS)
        log(f"  standby made and streaming in {time.perf_counter() - started:.0f} s")
        replica_url = database_url(standby.url, "bench_large")
        env = {**self.env("large"), "DATABASE_REPLICA_URL": replica_url}
        server = web.Server(env=env, log=self.tmp / "gunicorn-replica.log")
        self.servers.append(server)
        month = f"from={config.MONTH_START:%Y-%m-%d}&to={config.MONTH_END:%Y-%m-%d}"
        ids = self.ids["large"]
        targets = {
            "overview": (f"/?{month}", {"Cookie": f"sessionid={ids['session']}"}),
            "usage API": (f"/api/v1/usage?{month}", {"Authorization": f"Bearer {ids['token']}"}),
        }
        committed = "SELECT xact_commit FROM pg_stat_database WHERE datname = 'bench_large'"
        samples = 2 * self.sizes.rounds * 10
        times: dict[str, dict[str, list[float]]] = {}
        try:
            with psycopg.connect(replica_url, autocommit=True) as conn:
                before = conn.execute(committed).fetchone()[0]
                for name, (path, headers) in targets.items():
                    getters = {
                        "primary": web.Getter(self.web["large"].port, headers),
                        "replica": web.Getter(server.port, headers),
                    }
                    for getter in getters.values():  # warm up
                        for _ in range(3):
                            getter.get(path)
                    times[name] = {"primary": [], "replica": []}
                    for _ in range(samples):
                        for where, getter in getters.items():
                            times[name][where].append(getter.get(path))
                time.sleep(1)  # the statistics collector's report
                answered = conn.execute(committed).fetchone()[0] - before
        finally:
            server.stop()
            self.servers.remove(server)
            standby.close()
        reads = samples * len(targets)
        self.results["replica"] = {
            "seconds": times,
            "standby_transactions": answered,
            "reads": reads,
        }
        ms = lambda s: f"{s * 1000:.0f} ms"  # noqa: E731
        for name, by_where in times.items():
            replica, alone = p95(by_where["replica"]), p95(by_where["primary"])
            self.add("22", f"{name} p95 read from the standby vs the primary", ms(replica),
                     ms(alone), replica / alone, "≤ 1.2", verdict(replica / alone, 1.2, False))  # fmt: skip
        self.add("22", "transactions the standby answered vs reads sent to it", f"{answered:,}",
                 f"{reads:,}", answered / reads, "≥ 1", verdict(answered / reads, 1, True))  # fmt: skip

    def storage(self) -> None:
        """Goal 1's database side alone: each design of the event store (tests/bench/storage)
        against the bare deduplicating insert, one connection, durable commits (info)."""
        log("goal 1, database side: designs of the event store vs the bare dedup insert")
        name = "bench_storage"
        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"CREATE DATABASE {name}")
        self.durability(durable=True)
        rates = storage.compare(database_url(self.base, name), rounds=self.sizes.rounds, log=log)
        med = storage.medians(rates)
        self.results["storage"] = {"events_per_second": rates, "median": med}
        for key, (label, _) in storage.DESIGNS.items():
            if key != "bare":
                self.add(
                    "-",
                    f"storing a batch: {label} vs bare (info)",
                    f"{med[key]:,.0f}/s",
                    f"{med['bare']:,.0f}/s",
                    med[key] / med["bare"],
                    "-",
                    "info",
                )

    def forecast(self) -> None:
        """Goal 23: one run of the forecast job's work (read every daily series, fit and
        backtest each, store them) over 200 models and pools, each model on one deployment,
        120 closed days: at most 60 s. On a database of its own."""
        pools, models, days = 20, 180, 120
        log(f"goal 23: the forecast job, {pools} pools and {models} models, {days} days")
        env = self.own_database("bench_forecast")
        agent = Agent("forecast", env)
        self.agents["forecast"] = agent
        made = agent.call("forecast_setup", pools=pools, models=models, days=days)
        log(f"  {made['rows']:,} rollup rows loaded, rated in {made['rating_seconds']:.1f} s")
        runs = [agent.call("forecast_timed") for _ in range(2)]  # the first imports statsmodels
        profile = agent.call("forecast_timed", profile=True)
        (config.OUT_DIR / "profile-forecast.txt").write_text(profile.pop("profile"))
        slowest = max(run["seconds"] for run in runs)
        self.results["forecast"] = {"dataset": made, "runs": runs, "profiled": profile}
        self.add(
            "23",
            f"forecast job, {runs[0]['series']} series ({pools} pools, {models} models, "
            f"{runs[0]['days']} days): slowest of 2",
            f"{slowest:.1f} s",
            "60 s",
            slowest / 60,
            "≤ 1",
            verdict(slowest / 60, 1, False),
        )
        cpu = max(run["cpu_seconds"] for run in runs)
        loads = [load for run in runs for load in run["load_average"]]
        self.add(
            "23",
            f"  its CPU time (info: load average {min(loads):.1f}-{max(loads):.1f}, "
            f"{os.cpu_count()} CPUs)",
            f"{cpu:.1f} s",
            "60 s",
            cpu / 60,
            "-",
            "info",
        )
        self.add(
            "23",
            "  of which reading every series (info)",
            f"{max(run['read_seconds'] for run in runs):.2f} s",
            "-",
            float("nan"),
            "-",
            "info",
        )

    def plan(self) -> None:
        """Goal 25: one run of the capacity plan (the forecast job's last step) over 50 models
        and 20 pools for 12 months: at most 10 s. On a database of its own."""
        pools, models = 20, 50
        log(f"goal 25: the capacity plan, {models} models x {pools} pools x 12 months")
        env = self.own_database("bench_plan")
        agent = Agent("plan", env)
        self.agents["plan"] = agent
        made = agent.call("plan_setup", pools=pools, models=models)
        runs = [agent.call("plan_timed") for _ in range(2)]  # the first imports scipy
        contended = agent.call("plan_contend")
        tight = [agent.call("plan_timed") for _ in range(2)]
        self.results["plan"] = {"dataset": made, "runs": runs, "contended": contended,
                                "contended_runs": tight}  # fmt: skip
        for label, timed in (("room to spare", runs), (f"{contended['gpus']} GPUs", tight)):
            slowest = max(run["seconds"] for run in timed)
            self.add(
                "25",
                f"capacity plan, {models} models x {pools} pools x 12 months, {label} "
                f"({timed[0]['months_within_a_gap']} months within a gap, "
                f"{timed[0]['added']} GPUs added): slowest of 2",
                f"{slowest:.1f} s",
                "10 s",
                slowest / 10,
                "≤ 1",
                verdict(slowest / 10, 1, False),
            )

    def delivery(self) -> None:
        """Goal 13: bursts of events raised to 10 webhook endpoints, one of which never
        answers: the 9 others' delivery times (event created → 2xx), p95 ≤ 5 s; the operator
        dashboard read without pause through windows at rest and during the bursts,
        interleaved (R B R B R B R): its web workers' CPU a request during the bursts ≤ 1.1 ×
        at rest (tests/bench/cpu.py), and no lock wait of its statements (pg_stat_activity
        sampled every 20 ms, tests/bench/waits.py); its wall-clock p95 as information. On a
        database of its own, with gunicorn and one Celery worker on the notify queue
        (production settings)."""
        log("goal 13: webhook deliveries under bursts, one endpoint hanging; the page's CPU")
        name = "bench_notify"
        env = self.own_database(
            name, served=True, WEBHOOK_ALLOW_LOOPBACK="1", WEBHOOK_TIMEOUT_SECONDS="15"
        )
        dsn = database_url(self.base, name)
        receivers = [hooks.Receiver(hang=(i == 0)) for i in range(10)]
        agent = Agent("notify", env)
        self.agents["notify"] = agent
        ids = agent.call("hooks_setup", urls=[r.url for r in receivers])
        live = ids["endpoints"][1:]
        # The page's gunicorn names its sessions (libpq's PGAPPNAME): its backends are told
        # apart in pg_stat_activity, for their waits and their CPU.
        server = web.Server(
            env={**env, "PGAPPNAME": waits.PAGE_APP}, log=self.tmp / "gunicorn-notify.log"
        )
        self.servers.append(server)
        worker = hooks.Worker(env=env, log=self.tmp / "worker-notify.log")
        worker.wait_ready()
        events = 1_000 if self.sizes.quick else 10_000
        bursts, rest_reads = 3, 300
        page = "/"  # the operator's dashboard
        getter = web.Getter(server.port, {"Cookie": f"sessionid={ids['session']}"})
        kinds_conn = psycopg.connect(dsn, autocommit=True)
        progress = psycopg.connect(dsn, autocommit=True)
        sampler = waits.ActivitySampler(dsn, waits.PAGE_APP, every=0.02)
        meters = {
            "web": cpu.ChildrenCPU(server.process.pid),
            "database": cpu.ChildrenCPU(
                cpu.parent(kinds_conn.info.backend_pid),
                kinds=waits.app_kinds(kinds_conn, waits.PAGE_APP, "page"),
            ),
        }
        windows: dict[str, list[dict]] = {"rest": [], "burst": []}
        timeline: list[tuple[float, int, int]] = []  # (s, events raised, delivered)
        delivered_sql = (
            "SELECT count(*) FROM portal_delivery WHERE state = 'delivered' "
            "AND endpoint_id = ANY(%s)"
        )
        started = time.monotonic()

        def window(kind: str, read) -> None:
            """Read the page until `read` says stop; its CPU, samples and latencies."""
            latencies: list[float] = []
            sampler.start()
            for meter in meters.values():
                meter.start()
            while read(latencies):
                latencies.append(getter.get(page))
            spent = {tier: meter.stop() for tier, meter in meters.items()}
            rows = sampler.stop()
            windows[kind].append({
                "requests": len(latencies),
                "web_seconds": cpu.total([spent["web"]], ["child"]),
                "page_backends_seconds": cpu.total([spent["database"]], ["page"]),
                "cpu": spent,
                "samples": sampler.samples,
                "page_rows": len(rows),
                "lock_waits": waits.lock_waits(rows),
                "wait_events": waits.wait_events(rows),
                "locked": [r._asdict() for r in rows if r.wait_event_type == "Lock"][:20],
                "latencies": latencies,
            })  # fmt: skip

        def at_rest(latencies: list[float]) -> bool:
            return len(latencies) < rest_reads

        try:
            for _ in range(5):
                getter.get(page)  # warm
            window("rest", at_rest)
            for b in range(bursts):
                raised: dict = {}
                raiser = threading.Thread(
                    target=lambda into=raised: into.update(
                        agent.call("raise_events", count=events, batch=100)
                    )
                )
                # the agent is busy raising: progress is read here, once a second
                until = (events * (b + 1) * len(live), time.monotonic() + 900)
                polled = [0.0]

                def bursting(latencies: list[float], until=until, polled=polled) -> bool:
                    elapsed = time.monotonic() - started
                    if elapsed - polled[0] < 1:
                        return True
                    polled[0] = elapsed
                    delivered = progress.execute(delivered_sql, [live]).fetchone()[0]
                    if not timeline or elapsed - timeline[-1][0] >= 5:
                        made = progress.execute("SELECT count(*) FROM portal_event").fetchone()
                        timeline.append((round(elapsed, 1), made[0], delivered))
                    return delivered < until[0] and time.monotonic() < until[1]

                raiser.start()
                window("burst", bursting)
                raiser.join()
                windows["burst"][-1]["raise_seconds"] = raised.get("seconds")
                window("rest", at_rest)  # at rest again, the burst's data in
                burst = windows["burst"][-1]
                log(
                    f"  burst {b + 1}: {burst['requests']} reads, web CPU "
                    f"{burst['web_seconds'] / burst['requests'] * 1000:.2f} ms a read (at rest "
                    f"{windows['rest'][-2]['web_seconds'] / rest_reads * 1000:.2f}, "
                    f"{windows['rest'][-1]['web_seconds'] / rest_reads * 1000:.2f}), "
                    f"{burst['lock_waits']} lock waits in {burst['samples']} samples"
                )
            done = agent.call("delivery_figures", endpoint_ids=live)
        finally:
            worker.stop()
            for receiver in receivers:
                receiver.close()
            sampler.close()
            kinds_conn.close()
            progress.close()
        self.delivery_rows(done, windows, events=events, live=len(live), timeline=timeline)

    def delivery_rows(
        self, done: dict, windows: dict[str, list[dict]], *, events: int, live: int, timeline
    ) -> None:
        """Goal 13's figures and rows from the delivery stage's windows."""
        bursts = len(windows["burst"])
        expected = events * bursts * live
        deliveries = done["waits"]
        wait95 = p95(deliveries) if deliveries else float("nan")

        def per_read(kind: str, tier: str) -> list[float]:
            return [w[f"{tier}_seconds"] / w["requests"] for w in windows[kind]]

        def overall(kind: str, tier: str) -> float:
            return sum(w[f"{tier}_seconds"] for w in windows[kind]) / sum(
                w["requests"] for w in windows[kind]
            )

        latency = {k: [x for w in windows[k] for x in w["latencies"]] for k in windows}
        lock_waits = sum(w["lock_waits"] for w in windows["burst"])
        samples = sum(w["samples"] for w in windows["burst"])
        running = sum(sum(w["wait_events"].values()) for w in windows["burst"])
        rounds = sorted(cpu.between(per_read("rest", "web"), per_read("burst", "web")))
        self.results["delivery"] = {
            "events_per_burst": events,
            "bursts": bursts,
            "endpoints": live + 1,
            "delivered": done["delivered"],
            "expected": expected,
            "wait_p50": statistics.median(deliveries) if deliveries else None,
            "wait_p95": wait95,
            "wait_max": max(deliveries) if deliveries else None,
            "web_ms_per_read": {k: overall(k, "web") * 1000 for k in windows},
            "page_backends_ms_per_read": {k: overall(k, "page_backends") * 1000 for k in windows},
            "web_round_ratios": rounds,
            "page_p50_ms": {k: statistics.median(v) * 1000 for k, v in latency.items()},
            "page_p95_ms": {k: p95(v) * 1000 for k, v in latency.items()},
            "lock_waits_burst": lock_waits,
            "samples_burst": samples,
            "samples_running_burst": running,
            "lock_waits_rest": sum(w["lock_waits"] for w in windows["rest"]),
            "windows": windows,
            "timeline": timeline,
        }
        self.add(
            "13",
            f"webhook delivery, {bursts} x {events:,} events x 9 live + 1 hanging: p95",
            f"{wait95:.2f} s",
            f"{done['delivered']:,}/{expected:,}",
            float("nan"),
            "<= 5 s",
            "pass" if done["delivered"] == expected and wait95 <= 5 else "MISS",
        )
        web_ratio = overall("burst", "web") / overall("rest", "web")
        self.add(
            "13",
            "dashboard's web CPU a read (gunicorn workers): bursts vs rest",
            f"{overall('burst', 'web') * 1000:.2f} ms",
            f"{overall('rest', 'web') * 1000:.2f} ms",
            web_ratio,
            "≤ 1.1",
            verdict(web_ratio, 1.1, at_least=False),
        )
        self.add_spread("web CPU", rounds)
        self.add(
            "13",
            f"lock waits of the dashboard, bursts: {running:,} of {samples:,} samples running",
            f"{lock_waits}",
            "0",
            float("nan"),
            "0",
            "pass" if lock_waits == 0 else "MISS",
        )
        backends = {k: overall(k, "page_backends") for k in windows}
        self.add(
            "-",
            "dashboard's database CPU a read (backends): bursts vs rest (info)",
            f"{backends['burst'] * 1000:.2f} ms",
            f"{backends['rest'] * 1000:.2f} ms",
            backends["burst"] / backends["rest"] if backends["rest"] else float("nan"),
            "-",
            "info",
        )
        self.add(
            "-",
            "operator dashboard p95, wall clock: bursts vs rest (info)",
            f"{p95(latency['burst']) * 1000:.0f} ms",
            f"{p95(latency['rest']) * 1000:.0f} ms",
            p95(latency["burst"]) / p95(latency["rest"]),
            "-",
            "info",
        )

    def alerts(self) -> None:
        """Goal 14, on the large dataset: the budget read a gateway calls per request (GET
        /api/v1/tenants/<slug>/budget over HTTP), p95 ≤ 20 ms; one run of the alerts job
        evaluating every rule of 200 tenants (a budget, an SLO burn and uptime below tier
        each) and the factory's (one of every other kind) ≤ 5 s, in as many queries as for
        20 tenants."""
        log("goal 14: the budget read, and the alerts job for 20 and 200 tenants' rules")
        agent = self.agents["large"]
        prepared = agent.call("alerts_prepare")
        log(
            f"  5-minute buckets of the month's last 8 days: {prepared['five_minute_rows']:,} "
            f"rows (refold {prepared['refold_seconds']:.0f} s, rate {prepared['rate_seconds']:.0f} s)"
        )
        runs: dict[int, dict] = {}
        for tenants in (20, config.TENANTS):
            rules = agent.call("alerts_rules", tenants=tenants)["rules"]
            first = agent.call("alerts_evaluate_timed")
            steady = [agent.call("alerts_evaluate_timed") for _ in range(5)]
            runs[tenants] = {"rules": rules, "first": first, "steady": steady}
            profiled = agent.call("alerts_evaluate_timed", profile=True)
            (config.OUT_DIR / f"profile-alerts-{tenants}.txt").write_text(
                f"alerts job, {tenants} tenants' rules: {profiled['seconds']:.2f} s, "
                f"{profiled['queries']} queries\n\nslowest queries:\n"
                + "\n".join(profiled["slowest_queries"])
                + f"\n\n{profiled['profile']}"
            )
            log(
                f"  {tenants} tenants, {rules} rules: first run {first['seconds']:.2f} s "
                f"({first['fired']} fired, {first['queries']} queries), then "
                f"{max(r['seconds'] for r in steady):.2f} s at most ({steady[0]['queries']} queries)"
            )
        reads = self.budget_reads(prepared, f"/api/v1/tenants/{prepared['tenant']}/budget")
        self.results["alerts"] = {"prepared": prepared, "runs": runs, "budget_read": reads}
        self.budget_row(prepared, "", reads)
        big, small = runs[config.TENANTS], runs[20]
        slowest = max(r["seconds"] for r in [big["first"], *big["steady"]])
        self.add(
            "14",
            f"alerts job, every rule of {config.TENANTS} tenants ({big['rules']} rules): slowest run",
            f"{slowest:.2f} s",
            f"first {big['first']['seconds']:.2f} s",
            float("nan"),
            "<= 5 s",
            "pass" if slowest <= 5 else "MISS",
        )
        queries = big["steady"][0]["queries"] / small["steady"][0]["queries"]
        self.add(
            "14",
            f"alerts job queries: {config.TENANTS} tenants' rules vs 20 tenants'",
            str(big["steady"][0]["queries"]),
            str(small["steady"][0]["queries"]),
            queries,
            "= 1",
            "pass" if queries == 1 else "MISS",
        )

    def chargeback(self) -> None:
        """Goal 26 and goal 14's read of a project, on the large dataset (config.PROJECTS
        projects a tenant, its events spread over them and none), the month rated whole: the
        month's chargeback of every tenant (`GET /api/v1/chargeback`, JSON) over HTTP as an
        operator (its API token), on the invoice basis and at cost, interleaved, p95 of 7
        reads each after one to warm ≤ 2 s; the budget read of a project (`?project=p01`, its
        hard token quota; a member's read token) p95 of 200 reads ≤ 20 ms; a cProfile of the
        slower basis's read in the agent (profile-chargeback.txt)."""
        log("goal 26: the month's chargeback, both bases; goal 14: the budget read of a project")
        agent = self.agents["large"]
        prepared = agent.call("chargeback_prepare", whole=not self.rated_whole)
        prepared["rated_by"] = "goal 8's last run" if self.rated_whole else "this stage"
        rated = "rated whole" if not self.rated_whole else "rated by goal 8, what was pending"
        log(
            f"  the month {rated} in {prepared['rate_seconds']:.0f} s: "
            f"{prepared['rated_rows']:,} rated usage rows of {prepared['rated_projects']:,} "
            f"tenants' projects and (none)s ({prepared['projects']:,} projects)"
        )
        token = self.ids["large"]["token"]
        operator = web.Getter(self.web["large"].port, {"Authorization": f"Bearer {token}"})
        month = f"{config.MONTH_START:%Y-%m}"
        paths = {basis: f"/api/v1/chargeback?month={month}&basis={basis}" for basis in ("invoice", "cost")}  # fmt: skip
        reads: dict[str, list[float]] = {basis: [] for basis in paths}
        for path in paths.values():
            operator.get(path)  # warm
        for _ in range(7):
            for basis, path in paths.items():
                reads[basis].append(operator.get(path))
        budget = self.budget_reads(
            prepared, f"/api/v1/tenants/{prepared['tenant']}/budget?project={prepared['project']}"
        )
        slower = max(paths, key=lambda basis: p95(reads[basis]))
        profile = agent.call("profile_read", path=paths[slower], token=token)
        (config.OUT_DIR / "profile-chargeback.txt").write_text(
            f"GET {paths[slower]}: median {profile['median']:.2f} s, profiled "
            f"{profile['seconds']:.2f} s\n{profile['profile']}"
        )
        self.results["chargeback"] = {"prepared": prepared, "reads": reads, "budget_read": budget}
        self.budget_row(prepared, f"?project={prepared['project']}", budget)
        for basis, seconds in reads.items():
            read95 = p95(seconds)
            self.add(
                "26",
                f"chargeback of the month, {basis} basis, {config.TENANTS} tenants x "
                f"{config.PROJECTS} projects: p95 (7 reads)",
                f"{read95:.2f} s",
                f"p50 {statistics.median(seconds):.2f} s",
                float("nan"),
                "<= 2 s",
                "pass" if read95 <= 2 else "MISS",
            )

    def metrics(self) -> None:
        """Goal 24: GET /metrics (Prometheus's scrape: the KPI gauges and every counter, per
        tenant too) of a factory of 1,000 tenants with 13 months of history, p95 of 200
        scrapes ≤ 300 ms through gunicorn (production settings); the measure stage's counters
        step timed (info). On a database of its own (tests/bench/counters.py)."""
        log("goal 24: GET /metrics with 1,000 tenants and 13 months of history")
        env = self.own_database("bench_metrics", served=True)
        agent = Agent("metrics", env)
        self.agents["metrics"] = agent
        built = agent.call("metrics_setup", tenants=1_000, months=13)
        log(
            f"  {built['hourly_rows']:,} hourly rollup rows, {built['series']:,} counter series; "
            f"rated in {built['rate_seconds']:.0f} s, measured in {built['measure_seconds']:.0f} s"
        )
        steps = [agent.call("metrics_counters_step")["seconds"] for _ in range(5)]
        server = web.Server(env=env, log=self.tmp / "gunicorn-metrics.log")
        self.servers.append(server)
        getter = web.Getter(server.port, {"Authorization": f"Bearer {built['token']}"})
        for _ in range(10):
            getter.get("/metrics")  # warm both workers
        scrapes = [getter.get("/metrics") for _ in range(200)]
        self.results["metrics"] = {"built": built, "counters_steps": steps, "scrapes": scrapes}
        scrape95 = p95(scrapes)
        self.add(
            "24",
            f"GET /metrics p95, 1,000 tenants, 13 months ({built['series']:,} counter series)",
            f"{scrape95 * 1000:.1f} ms",
            f"p50 {statistics.median(scrapes) * 1000:.1f} ms",
            float("nan"),
            "<= 300 ms",
            "pass" if scrape95 <= 0.300 else "MISS",
        )
        self.add(
            "24",
            "measure stage: the counters' step (this month again, every series raised)",
            f"{max(steps):.2f} s",
            f"median {statistics.median(steps):.2f} s",
            float("nan"),
            "-",
            "info",
        )

    # -- report -----------------------------------------------------------------------

    def report(self) -> str:
        head = (
            f"sizes: small {self.sizes.small:,} / large {self.sizes.large:,} events; "
            f"{self.sizes.rounds} rounds; {os.cpu_count()} CPUs"
        )
        run = f"run {RUN}, code {self.results['code']}, stages {','.join(self.results['stages'])}"
        lines = [head, run, ""]
        widths = (4, 66, 12, 12, 7, 7, 5)
        header = ("goal", "comparison (A vs B)", "A", "B", "A/B", "target", "")
        fmt = "  ".join(f"{{:{'<' if i < 2 else '>'}{w}}}" for i, w in enumerate(widths))
        lines.append(fmt.format(*header))
        for goal, what, a, b, ratio, limit, result in self.rows:
            shown = "-" if ratio != ratio else f"{ratio:.3f}"  # NaN
            lines.append(fmt.format(goal, what[:66], a, b, shown, limit, result))
        return "\n".join(lines)

    def save(self) -> None:
        config.OUT_DIR.mkdir(parents=True, exist_ok=True)
        self.results["table"] = [
            dict(
                zip(("goal", "comparison", "a", "b", "ratio", "target", "result"), row, strict=True)
            )
            for row in self.rows
        ]
        self.results["total_seconds"] = time.perf_counter() - STARTED
        for key in (
            "kpis", "reads", "pages", "crowd", "replica", "rollup", "ingestion", "storage",
            "baseline", "otlp", "memory", "embedded", "delivery", "freshness", "forecast",
            "metrics",
        ):  # fmt: skip
            if key in self.results:
                (config.OUT_DIR / f"{key}.json").write_text(
                    json.dumps(self.results[key], indent=1, default=str)
                )
        (config.OUT_DIR / "results.json").write_text(
            json.dumps(self.results, indent=1, default=str)
        )
        table = self.report() + "\n"
        (config.OUT_DIR / "table.txt").write_text(table)
        runs = config.OUT_DIR / "runs"  # every run's table, kept
        runs.mkdir(exist_ok=True)
        (runs / f"table-{RUN}.txt").write_text(table)

    def close(self) -> None:
        for server in self.servers:
            server.stop()
        for agent in self.agents.values():
            agent.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


STAGES = (
    "kpis", "reads", "pages", "crowd", "replica", "widest", "rollups", "rating", "ingestion",
    "storage", "baseline", "otlp", "embedded", "freshness", "memory", "delivery", "alerts",
    "chargeback", "forecast", "metrics", "plan",
)  # fmt: skip
# Stages on a database of their own: BENCH_ONLY naming only these loads no dataset.
STANDALONE = {"storage", "embedded", "delivery", "freshness", "forecast", "metrics", "plan"}


def main() -> int:
    """Every stage, or those BENCH_ONLY names (comma-separated; "reads" needs "kpis")."""
    only = [s for s in os.environ.get("BENCH_ONLY", "").split(",") if s] or list(STAGES)
    unknown = set(only) - set(STAGES)
    if unknown:
        raise SystemExit(f"BENCH_ONLY: unknown stage(s) {sorted(unknown)}; choose from {STAGES}")
    bench = Bench()
    bench.results["stages"] = [stage for stage in STAGES if stage in only]
    bench.results["code"] = subprocess.run(
        ["git", "-C", str(config.ROOT), "describe", "--always", "--dirty"],
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    config.OUT_DIR.mkdir(parents=True, exist_ok=True)
    try:
        if not set(only) <= STANDALONE:
            bench.prepare()
            bench.start_servers()
        for stage in STAGES:
            if stage in only:
                getattr(bench, stage)()
    finally:
        bench.save()
        bench.close()
    print()
    print(bench.report())
    log(f"figures in {config.OUT_DIR}/*.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
