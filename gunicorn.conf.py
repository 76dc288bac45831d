"""gunicorn's settings for the portal, read from the directory gunicorn starts in.

The portal answers a URL that is too long itself (portal.middleware.RequestLimitsMiddleware,
settings.MAX_URL_BYTES = 4096), in the API's JSON shape under /api/: gunicorn's own limit
on the request line is set above it, to the most gunicorn allows. What gunicorn still
refuses before the portal sees it (a line beyond that, a malformed request, headers too
large) is answered in the API's JSON shape too, instead of gunicorn's HTML: such a request
never reached a page, and API clients read the shape.

Each worker listens on a socket of its own (`reuse_port`, SO_REUSEPORT), so the kernel
spreads new connections over the workers. On one shared socket, a gthread worker takes a
burst of keep-alive connections (a proxy's pool, 50 clients at once) and keeps them: one
worker served all 50 of `make bench`'s goal 21 on one CPU while the other stood idle
(docs/performance.md, "One worker took every connection").

The workers are the machine's cores, gthread workers of one thread each: keep-alive
connections (a TLS proxy's pool) stay open in the worker's poller, and a worker serves one
request at a time. A second thread a worker, to run while the first waits on the database,
cost more than it gained. On 2 cores, 2 workers × 2 threads against 2 × 1 in back-to-back
pairs: the web workers' CPU an event of ingestion's batches 16.1 → 13.5 and 19.9 → 15.1 µs,
PostgreSQL's 21.8 → 16.6 µs (the bare insert beside it 18.6 µs both times) and 21.1 → 17.5
(a busier machine: the bare insert's 23.7 → 19.9), the rate higher; 50 clients' pages kept
their p95 (docs/performance.md, "One thread a worker"). 4 sync workers on 2 cores gave 0.567
of the goal 1 rate 2 gthread workers gave (no keep-alive). This is what `make bench`
measures every goal with.
"""

import json
import os

from gunicorn import util

workers = os.cpu_count() or 2
worker_class = "gthread"
threads = 1

limit_request_line = 8190  # the most gunicorn allows; the portal's limit is below
limit_request_field_size = 8190
reuse_port = True  # a listening socket a worker: the kernel balances connections


def _write_json_error(sock, status_int, reason, mesg):
    body = json.dumps({"errors": [{"field": "", "message": mesg or reason}]}).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + body)


util.write_error = _write_json_error  # the workers' refusals, as gunicorn writes them
