import time

from django.core.management.base import BaseCommand

from portal.demo import DEMO_LOGINS, demo_run, demo_steps


class Command(BaseCommand):
    help = (
        "Load the demo factory (idempotent: a second run skips what is loaded): tenants, "
        "logins, and every app's demo data. Figures from shared/design/demo-factory.md: R_ref "
        "from the TensorRT-LLM perf overview with MLPerf server/offline derates, SLO tiers "
        "from MLPerf Inference server limits, traffic 3:1 input:output with half of the input "
        "from the prefix cache, request sizes from real traces. Two closed months and this "
        "month up to the current hour, fixed seed; the last whole day at request level (about "
        "70,000 events, each standing for 10,000 requests)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--list",
            dest="list_steps",
            action="store_true",
            help="print the steps in the order they run; run none",
        )

    def handle(self, *args, list_steps=False, **options):
        if list_steps:
            for number, step in enumerate(demo_steps(), start=1):
                self.stdout.write(f"{number:>2}. {step.name}")
            return
        started = time.monotonic()
        demo_run(stdout=self.stdout)
        self.stdout.write(self.style.SUCCESS(f"Demo ready in {time.monotonic() - started:.0f} s."))
        self.stdout.write("Demo logins (username / password → role):")
        for username, password, role, tenant in DEMO_LOGINS:
            suffix = f" of tenant {tenant}" if tenant else ""
            self.stdout.write(f"  {username:<10} / {password:<15} → {role.label}{suffix}")
