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

The workers are the machine's cores, each with 2 threads (gthread): keep-alive connections
(a TLS proxy's pool) stay open, and a worker's second thread runs while the first waits on
the database. This is what `make bench` measures the read and ingestion goals with; 4 sync
workers on 2 cores gave 0.567 of the goal 1 rate the 2 × 2 gave (docs/performance.md).
"""

import json
import os

from gunicorn import util

workers = os.cpu_count() or 2
worker_class = "gthread"
threads = 2

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
