from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0011_drop_run_metric_summary")]

    operations = [
        migrations.AddField(
            model_name="caseresult",
            name="session_start_ms",
            field=models.IntegerField(blank=True, null=True),
        ),
    ]
