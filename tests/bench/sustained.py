"""Goal 7: the embedded default (`manage.py serve`: Django's server, SQLite in WAL mode, one
Celery worker with the beat on the filesystem broker) under a sustained feed, as its users
run it: RATE events a second in native batches of BATCH, each batch sent at its time on the
schedule (from SENDERS keep-alive connections, so one slow answer does not hold the next
batch), its events timed at the moment it is sent (the current hour); meanwhile one reader
polls `GET /api/v1/kpis?period=this_month` every KPI_EVERY s and one browser reads Overview
every PAGE_EVERY s. A batch is visible at the first KPI answer, taken after it was accepted,
whose output tokens hold it and every batch accepted before it (fresh.visible, as goal 9);
the reader goes on after the feed until the last batch is visible or CATCH_UP passes.
Answers that are not 2xx are kept, and those saying "database is locked" counted.
"""

from __future__ import annotations

import http.client
import json
import queue
import re
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import msgspec

from tests.bench import config, fresh
from tests.bench.events import EventGenerator

RATE = 5_000  # events a second
BATCH = 1_000  # events a request
SENDERS = 8  # connections the batches are sent from
KPI_EVERY = 1.0  # seconds between KPI reads
PAGE_EVERY = 3.0  # seconds between Overview reads
CATCH_UP = 300.0  # seconds the KPI reader waits after the feed for the last batches
TEMPLATES = 20  # batches of generated events, sent again with new ids and times
KPIS = "/api/v1/kpis?period=this_month"
PAGE = "/"
LOCKED = "database is locked"


@dataclass
class Sent:
    """One batch: when it was due, when its answer came, and what it said."""

    number: int
    due: float
    answered: float = 0.0
    status: int = 0
    accepted: int = 0
    output_tokens: int = 0
    error: str = ""


def templates(seq0: int) -> list[tuple[list[dict], int]]:
    """TEMPLATES batches of the bench's events (one hour's mix of tenants, models, sizes):
    (the items, their output tokens)."""
    generator = EventGenerator()
    start = config.INGEST_START + timedelta(days=config.INGEST_DAYS - 1)
    rows = list(generator.rows(seq0=seq0, count=TEMPLATES * BATCH, start=start, days=1, hours=1))
    batches = []
    for i in range(0, len(rows), BATCH):
        items = [generator.item(row) for row in rows[i : i + BATCH]]
        batches.append((items, sum(item["output_tokens"] for item in items)))
    return batches


class _Client:
    def __init__(self, port: int, headers: dict) -> None:
        self.port = port
        self.headers = headers
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """(status, body); a connection the server dropped is opened again once."""
        for attempt in range(2):
            try:
                self.conn.request(method, path, body, self.headers)
                response = self.conn.getresponse()
                return response.status, response.read()
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.conn.close()


def measure(*, port: int, token: str, session: str, seconds: float, seq0: int) -> dict:
    """Feed RATE events a second for `seconds` and read; the batches, each batch's wait to
    the KPIs (None: never seen), the KPI reads and Overview's latencies, every failed answer."""
    api = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    browser = {"Cookie": f"sessionid={session}"}
    batches = templates(seq0)
    encoder = msgspec.json.Encoder()
    reader = _Client(port, api)
    status, body = reader.call("GET", KPIS)
    if status != 200:
        raise RuntimeError(f"GET {KPIS}: {status} {body[:300]!r}")
    baseline = json.loads(body)["output_tokens"] or 0
    due: queue.Queue[Sent | None] = queue.Queue()
    sent: list[Sent] = []
    failures: list[dict] = []  # every answer that was not 2xx, or no answer
    readings: list[tuple[float, int]] = []
    page: list[float] = []
    lock = threading.Lock()
    fed, stop = threading.Event(), threading.Event()
    expected = [0]  # output tokens of every batch accepted, once the feed is over

    def failed(what: str, status: int, text: str) -> None:
        with lock:
            failures.append({"what": what, "status": status, "body": text[:300]})

    def send() -> None:
        client = _Client(port, api)
        while (batch := due.get()) is not None:
            items, output = batches[batch.number % TEMPLATES]
            now = datetime.now(UTC).isoformat(timespec="microseconds")  # noqa: TID251 (a gateway's clock)
            body = encoder.encode([
                {**item, "id": f"sus-{batch.number:06d}-{i:04d}", "time": now}
                for i, item in enumerate(items)
            ])  # fmt: skip
            try:
                status, answer = client.call("POST", "/api/v1/usage/events", body)
            except OSError as error:
                status, answer = 0, repr(error).encode()
            batch.answered, batch.status = time.perf_counter(), status
            if status == 200:
                batch.accepted = json.loads(answer)["accepted"]
                batch.output_tokens = output
            else:
                batch.error = answer[:300].decode(errors="replace")
                failed("ingest", status, batch.error)
        client.close()

    def read_kpis() -> None:
        while not stop.is_set():
            status, body = reader.call("GET", KPIS)
            if status == 200:
                value = json.loads(body)["output_tokens"] or 0
                readings.append((time.perf_counter(), value))
                if fed.is_set() and value >= baseline + expected[0]:
                    return
            else:
                failed("kpis", status, body.decode(errors="replace"))
            stop.wait(KPI_EVERY)

    def read_page() -> None:
        client = _Client(port, browser)
        while not fed.is_set():
            started = time.perf_counter()
            status, body = client.call("GET", PAGE)
            page.append(time.perf_counter() - started)
            if status != 200:
                failed("page", status, body.decode(errors="replace"))
            fed.wait(PAGE_EVERY)
        client.close()

    senders = [threading.Thread(target=send) for _ in range(SENDERS)]
    readers = [threading.Thread(target=read_kpis), threading.Thread(target=read_page)]
    for thread in senders + readers:
        thread.start()
    started = time.perf_counter()
    every = BATCH / RATE
    number = 0
    while (at := started + number * every) < started + seconds:
        time.sleep(max(0.0, at - time.perf_counter()))
        sent.append(Sent(number, at))
        due.put(sent[-1])
        number += 1
    for _ in senders:
        due.put(None)
    for thread in senders:
        thread.join()
    ended = time.perf_counter()
    accepted = sorted((b for b in sent if b.status == 200), key=lambda b: b.answered)
    totals, running = [], 0
    for batch in accepted:
        running += batch.output_tokens
        totals.append(running)
    expected[0] = running
    fed.set()
    readers[0].join(timeout=CATCH_UP)
    stop.set()
    for thread in readers:
        thread.join()
    reader.close()
    waits = fresh.visible(
        [b.answered for b in accepted], totals, readings, baseline=baseline
    )  # fmt: skip
    return {
        "rate": RATE,
        "batch": BATCH,
        "seconds": seconds,
        "feed_seconds": ended - started,
        "events_accepted": sum(b.accepted for b in accepted),
        "answer_rate": answer_rate([b.answered for b in accepted]),
        "events_sent": len(sent) * BATCH,
        "lags": [b.answered - b.due for b in accepted],  # answer after its due time
        "waits": waits,
        # when the last batch was seen, after the feed's end (None: never)
        "last_seen_after_feed": None
        if not waits or waits[-1] is None
        else accepted[-1].answered + waits[-1] - ended,
        "kpi_reads": len(readings),
        "kpis_final": readings[-1][1] - baseline if readings else None,
        "kpis_expected": running,
        "page_seconds": page,
        "failures": failures,
        "locked_answers": sum(LOCKED in f["body"] for f in failures),
    }


def answer_rate(answered: list[float]) -> float:
    """Events a second the server accepted, from its answers' times: the batches after the
    first over the time from the first answer to the last (a server that keeps pace answers
    a batch every BATCH / RATE s; one that cannot falls further behind with every batch)."""
    if len(answered) < 2:
        return 0.0
    ordered = sorted(answered)
    return (len(ordered) - 1) * BATCH / (ordered[-1] - ordered[0])


TASK = re.compile(r"Task ([\w.]+)\[[^\]]*\] succeeded in ([0-9.]+)s")


def worker_tasks(log: str) -> dict[str, dict]:
    """The Celery worker's tasks that succeeded, from its log: by task name, how many ran,
    their seconds and the slowest's, the busiest first."""
    tasks: dict[str, dict] = {}
    for name, seconds in TASK.findall(log):
        task = tasks.setdefault(name, {"runs": 0, "seconds": 0.0, "slowest": 0.0})
        task["runs"] += 1
        task["seconds"] += float(seconds)
        task["slowest"] = max(task["slowest"], float(seconds))
    return dict(sorted(tasks.items(), key=lambda kv: -kv[1]["seconds"]))
