import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0015_case_repetitions"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="rerun_of",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="reruns",
                to="runs.run",
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="git_subject",
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.CreateModel(
            name="TurnTranscript",
            fields=[
                (
                    "turn",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="transcript",
                        serialize=False,
                        to="runs.turnresult",
                    ),
                ),
                ("events", models.JSONField(default=list)),
                ("size_bytes", models.IntegerField(default=0)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="transcript_rows",
                        to="runs.run",
                    ),
                ),
            ],
        ),
    ]
