"""PostgreSQL: the usage event table keeps block-range (BRIN) indexes only, one over
(id, time), instead of its primary key (id, time), the (tenant, deployment, time) B-tree
and a BRIN index on time.

Events are inserted in id order, a batch's ids from one block, and roughly in time order, so
a block range's ids and times are narrow: the fold's reads of a run (ids between its first
and last, times within its bounds), a month's archive and the refold's and rating's reads of
an hour find their pages through it. Each insert then updates no B-tree: the keys' unique
(source, id) index is what makes an event unique, and an event's id is its key's. Measured:
`make bench`, docs/performance.md, goal 1. `autosummarize` summarizes each block range as it
fills, so reads of the newest events do not scan the unsummarized tail.

SQLite (the embedded default) keeps the model's primary key and usage_cell_idx."""

from django.db import migrations

FORWARD = """
ALTER TABLE metering_usageevent DROP CONSTRAINT IF EXISTS metering_usageevent_pkey;
DROP INDEX IF EXISTS usage_cell_idx;
DROP INDEX IF EXISTS usage_time_brin;
CREATE INDEX usage_id_time_brin ON metering_usageevent USING brin (id, time)
    WITH (autosummarize = on);
"""

BACKWARD = """
DROP INDEX IF EXISTS usage_id_time_brin;
CREATE INDEX usage_time_brin ON metering_usageevent USING brin (time);
CREATE INDEX usage_cell_idx ON metering_usageevent (tenant_id, deployment_id, time);
ALTER TABLE metering_usageevent ADD PRIMARY KEY (id, time);
"""


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD)


class Migration(migrations.Migration):
    dependencies = [
        ("metering", "0012_usagechange_capacity_pool"),
    ]

    operations = [migrations.RunPython(forward, backward)]
