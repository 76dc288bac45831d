from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("portal", "0007_alert_rules"),
    ]

    operations = [
        migrations.AddField(
            model_name="cursor",
            name="until",
            field=models.DateTimeField(null=True),
        ),
    ]
