"""Indexes for pages that read many rows: the compare page's turn verdicts and a live summary's
turn and metric counts (covering: read from the index alone), each project's latest run (the
home page)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0012_case_session_start")]

    operations = [
        migrations.AddIndex(
            model_name="metricresult",
            index=models.Index(
                fields=[
                    "run",
                    "metric_name",
                    "kind",
                    "outcome",
                    "score",
                    "evaluation_time_ms",
                    "judge_cost_usd",
                ],
                name="metric_summary_cover",
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["project", "-created_at", "-id"], name="run_project_latest"),
        ),
        migrations.AddIndex(
            model_name="turnresult",
            index=models.Index(
                fields=["run", "case", "index", "outcome", "kind_outcomes", "execution_time_ms"],
                name="turn_verdicts_cover",
            ),
        ),
        migrations.AddIndex(
            model_name="turnresult",
            index=models.Index(fields=["run", "outcome"], name="turn_run_outcome"),
        ),
    ]
