"""Sealed agent snapshots: the files a run ran, stored once per distinct tree (AgentSnapshot),
and the run's link to its snapshot (null for imported runs and runs launched before)."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0008_run_uid"),
    ]

    operations = [
        migrations.CreateModel(
            name="AgentSnapshot",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("digest", models.CharField(max_length=64, unique=True)),
                ("archive", models.BinaryField()),
                ("manifest", models.JSONField(default=list)),
                ("file_count", models.IntegerField()),
                ("total_bytes", models.BigIntegerField()),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
        ),
        migrations.AddField(
            model_name="run",
            name="snapshot",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="runs",
                to="runs.agentsnapshot",
            ),
        ),
    ]
