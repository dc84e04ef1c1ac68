"""The result rows are named as rows (``CaseRow``, ``TurnRow``, ``MetricRow``), apart from the
wire models of the same results (``runs.core.wire.models``). Their tables keep their names: the
tables are pinned first, so each rename changes the model's name alone and no table."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("runs", "0024_transcript_search_text")]

    operations = [
        migrations.AlterModelTable(name="caseresult", table="runs_caseresult"),
        migrations.AlterModelTable(name="turnresult", table="runs_turnresult"),
        migrations.AlterModelTable(name="metricresult", table="runs_metricresult"),
        migrations.RenameModel(old_name="CaseResult", new_name="CaseRow"),
        migrations.RenameModel(old_name="TurnResult", new_name="TurnRow"),
        migrations.RenameModel(old_name="MetricResult", new_name="MetricRow"),
    ]
