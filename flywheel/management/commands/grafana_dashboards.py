from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from flywheel.api.kpis import metrics_published
from flywheel.domain.dashboards import dashboards
from flywheel.domain.grafana import grafana_files, panels_unpublished


class Command(BaseCommand):
    help = (
        "Write the Grafana dashboards (factory, tenants and SLA, finance) and their "
        "provisioning files to deploy/grafana/, generated from flywheel.domain.dashboards. "
        "--check writes nothing and fails when a file is stale or a panel queries a metric "
        "/metrics does not publish."
    )

    def add_arguments(self, parser):
        parser.add_argument("--check", action="store_true", help="fail on stale files")
        parser.add_argument(
            "--dir", type=Path, default=settings.BASE_DIR / "deploy" / "grafana", help="where"
        )

    def handle(self, *args, **options):
        currency = settings.FACTORY_CURRENCY
        boards = dashboards(currency=currency)
        missing = panels_unpublished(boards, published=metrics_published())
        if missing:
            raise CommandError(
                "panels query metrics /metrics does not publish: "
                + "; ".join(f"{file} '{panel}': {metric}" for file, panel, metric in missing)
            )
        root: Path = options["dir"]
        files = grafana_files(boards)
        if options["check"]:
            stale = [
                name
                for name, text in files.items()
                if not (root / name).is_file() or (root / name).read_text() != text
            ]
            if stale:
                raise CommandError(
                    f"stale in {root}: {', '.join(stale)} (run manage.py grafana_dashboards)"
                )
            self.stdout.write(f"{len(files)} files in {root} are current.")
            return
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        self.stdout.write(f"Wrote {len(files)} files to {root}.")
