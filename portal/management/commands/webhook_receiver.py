"""`manage.py webhook_receiver`: a receiver for the portal's own webhooks on loopback, as a
customer would write one (the demo's factory endpoint points at it; `make demo` starts it):
each POST is verified with `standardwebhooks` against the secrets of the endpoints whose URL
points here, printed, and answered 204, or 401 when no secret verifies it."""

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.core.management.base import BaseCommand
from django.db import close_old_connections
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from portal.models import WebhookEndpoint


class Command(BaseCommand):
    help = "Receive and verify the portal's webhooks on loopback (for the demo and trials)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8009)

    def handle(self, *args, host: str, port: int, **options):
        base = f"http://{host}:{port}/"
        write = self.stdout.write

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                close_old_connections()
                endpoints = WebhookEndpoint.objects.filter(url__startswith=base)
                secrets = [s for e in endpoints for s in (e.secret, e.previous_secret) if s]
                for secret in secrets:
                    try:
                        payload = Webhook(secret).verify(body, headers)
                    except WebhookVerificationError:
                        continue
                    write(f"verified {payload['type']} {headers['webhook-id']}: "
                          f"{payload['data'].get('link', '')}")  # fmt: skip
                    self.send_response(204)
                    self.end_headers()
                    return
                write(f"refused {headers.get('webhook-id', '?')}: no secret verifies it")
                self.send_response(401)
                self.end_headers()

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer((host, port), Handler)
        write(f"Receiving webhooks on {base}")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
