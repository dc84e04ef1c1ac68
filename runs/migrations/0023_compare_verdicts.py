"""Compare at 100,000 cases (issue 43): each case's compare key, turn verdicts and their digest
stored on its row when its run ends, with the index a compare tallies two runs from; the runs
that ended before are backfilled here (their columns and ``list_counts["compare"]``), so they
compare as the runs that end after."""

from django.db import migrations, models, transaction

from runs.selectors.compare_store import compare_columns_store, compare_values

# Created in SQL (not in the model's state): CaseResult's Meta is at the module's size limit.
# The case's id is the last column so a pair tally reads the index alone.
INDEX = "case_compare_key"


def backfill(apps, schema_editor):  # type: ignore[no-untyped-def]
    Run = apps.get_model("runs", "Run")
    ended = Run.objects.exclude(status__in=("queued", "running")).order_by("pk")
    for run in ended.only("pk", "list_counts"):
        with transaction.atomic():  # a run's columns and values together
            compare_columns_store(run.pk)
            run.list_counts = {**(run.list_counts or {}), "compare": compare_values(run_id=run.pk)}
            run.save(update_fields=["list_counts"])


class Migration(migrations.Migration):
    # Not one transaction: PostgreSQL builds no index on a table with updates pending in it,
    # and 100,000-case runs are backfilled one at a time.
    atomic = False
    dependencies = [("runs", "0022_list_counts")]

    operations = [
        migrations.AddField(
            model_name="caseresult",
            name="compare_key",
            field=models.CharField(blank=True, max_length=600, null=True),
        ),
        migrations.AddField(
            model_name="caseresult",
            name="verdicts",
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="caseresult",
            name="verdicts_digest",
            field=models.CharField(blank=True, max_length=16, null=True),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.RunSQL(
            f"CREATE INDEX {INDEX} ON runs_caseresult (run_id, compare_key, verdicts_digest, id)",
            reverse_sql=f"DROP INDEX {INDEX}",
        ),
    ]
