"""Alert rule kinds are the apps' (portal.alert_kinds): the kind column lists no choices,
and "a tenant holds one budget" becomes "one rule per tenant of a kind that says so"."""

from django.db import migrations, models


def budgets_one_per_tenant(apps, schema_editor):
    # The one kind registered with one_per_tenant when this migration was written.
    apps.get_model("portal", "AlertRule").objects.filter(kind="budget").update(one_per_tenant=True)


class Migration(migrations.Migration):
    dependencies = [
        ("portal", "0007_alert_rules"),
    ]

    operations = [
        migrations.AddField(
            model_name="alertrule",
            name="one_per_tenant",
            field=models.BooleanField(default=False, editable=False),
        ),
        migrations.RunPython(budgets_one_per_tenant, migrations.RunPython.noop, elidable=True),
        migrations.RemoveConstraint(
            model_name="alertrule",
            name="one_budget_per_tenant",
        ),
        migrations.AddConstraint(
            model_name="alertrule",
            constraint=models.UniqueConstraint(
                condition=models.Q(("one_per_tenant", True)),
                fields=("tenant", "kind"),
                name="alert_rule_one_per_tenant",
            ),
        ),
        migrations.AlterField(
            model_name="alertrule",
            name="kind",
            field=models.CharField(max_length=32),
        ),
    ]
