from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("portal", "0009_audit_credentials_redacted"),
    ]

    operations = [
        migrations.AddField(
            model_name="cursor",
            name="until",
            field=models.DateTimeField(null=True),
        ),
    ]
