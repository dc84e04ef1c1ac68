"""Runs store their summary (runs.core.verdicts.summary.RunSummary: cases, turns and per-turn metric
counts, not graded apart) and count their not-graded cases; the pass rate leaves not-graded
cases out and is NULL when nothing was graded. Existing runs are summarised from their rows."""

from django.db import migrations, models

from runs.core.verdicts.summary import MetricMark, summarize


def summarise_runs(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    CaseResult = apps.get_model("runs", "CaseResult")
    TurnResult = apps.get_model("runs", "TurnResult")
    MetricResult = apps.get_model("runs", "MetricResult")
    for run in Run.objects.all().only("pk").iterator():
        # A case with no verdict column yet but settled as an error is an errored case.
        cases = [
            outcome or ("error" if status == "error" else "")
            for outcome, status in CaseResult.objects.filter(run_id=run.pk).values_list(
                "outcome", "status"
            )
        ]
        summary = summarize(
            case_outcomes=cases,
            turn_outcomes=TurnResult.objects.filter(run_id=run.pk).values_list(
                "outcome", flat=True
            ),
            metrics=[
                MetricMark(*values)
                for values in MetricResult.objects.filter(run_id=run.pk).values_list(
                    "metric_name", "kind", "outcome", "score"
                )
            ],
        )
        counts = summary.cases
        Run.objects.filter(pk=run.pk).update(
            summary=summary.model_dump(mode="json"),
            passed_cases=counts.passed,
            failed_cases=counts.failed + counts.error,
            not_graded_cases=counts.not_graded,
            pass_rate=summary.pass_rate,
        )
    CaseResult.objects.filter(status="error", outcome="").update(outcome="error")


class Migration(migrations.Migration):
    dependencies = [("runs", "0006_regrades")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="not_graded_cases",
            field=models.IntegerField(default=0),
        ),
        migrations.RunPython(summarise_runs, migrations.RunPython.noop),
    ]
