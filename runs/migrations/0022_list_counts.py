"""The run page at 100,000 cases: each run's case-list counts stored when it ends, and indexes
that hold each list filter's rows in the list's order (issue 43)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0021_text_search")]

    operations = [
        migrations.AddField(
            model_name="metricresult",
            name="case_index",
            field=models.IntegerField(blank=True, null=True),
        ),
        # Every metric row written before: its turn's case's index.
        migrations.RunSQL(
            'UPDATE runs_metricresult SET case_index = (SELECT c."index" FROM runs_turnresult t'
            " JOIN runs_caseresult c ON c.id = t.case_id WHERE t.id = runs_metricresult.turn_id)",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AddIndex(
            model_name="metricresult",
            index=models.Index(
                condition=models.Q(("outcome", "failed")),
                fields=["run", "metric_name", "case_index"],
                name="metric_failures_by_case",
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="list_counts",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.RemoveIndex(model_name="caseresult", name="runs_casere_run_id_d8d761_idx"),
        migrations.AddIndex(
            model_name="caseresult",
            index=models.Index(
                fields=["run", "outcome", "index", "repetition"], name="case_run_outcome_order"
            ),
        ),
        migrations.AddIndex(
            model_name="caseresult",
            index=models.Index(
                condition=models.Q(("outcome__in", ("error", "failed"))),
                fields=["run", "index", "repetition"],
                name="case_run_failures",
            ),
        ),
        migrations.AddIndex(
            model_name="caseresult",
            index=models.Index(
                condition=models.Q(("kind_outcomes__tools", "failed")),
                fields=["run", "index", "repetition"],
                name="case_run_tools_failed",
            ),
        ),
    ]
