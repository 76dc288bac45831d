"""Database guards that only PostgreSQL enforces (triggers, functions), as one migration
operation. The other databases rely on the services and the models: architecture.md makes
these guarantees PostgreSQL-only."""

from django.db import migrations


class PostgreSQLOnly(migrations.RunSQL):
    """RunSQL on PostgreSQL only, each script sent whole. Unlike RunPython it needs no
    rendered models: `migrate` renders none for it (a fresh database's costly part)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


def postgresql_only(forward: str, backward: str) -> PostgreSQLOnly:
    """Run `forward` when migrating and `backward` when unapplying, on PostgreSQL only."""
    return PostgreSQLOnly([forward], [backward])
