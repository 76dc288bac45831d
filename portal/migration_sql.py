"""Database guards that only PostgreSQL enforces (triggers, functions), as one migration
operation. The other databases rely on the services and the models: architecture.md makes
these guarantees PostgreSQL-only."""

from django.db import migrations


def postgresql_only(forward: str, backward: str) -> migrations.RunPython:
    """Run `forward` when migrating and `backward` when unapplying, on PostgreSQL only."""

    def run(sql: str):
        def apply(apps, schema_editor):
            if schema_editor.connection.vendor == "postgresql":
                schema_editor.execute(sql, params=None)

        return apply

    return migrations.RunPython(run(forward), run(backward))
