import time

from django.core.management.base import BaseCommand

from portal.demo import DEMO_LOGINS, demo_run


class Command(BaseCommand):
    help = "Load the demo factory (idempotent): tenants, logins, and every app's demo data."

    def handle(self, *args, **options):
        started = time.monotonic()
        demo_run(stdout=self.stdout)
        self.stdout.write(self.style.SUCCESS(f"Demo ready in {time.monotonic() - started:.0f} s."))
        self.stdout.write("Demo logins (username / password → role):")
        for username, password, role, tenant in DEMO_LOGINS:
            suffix = f" of tenant {tenant}" if tenant else ""
            self.stdout.write(f"  {username:<10} / {password:<15} → {role.label}{suffix}")
