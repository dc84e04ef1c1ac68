"""The per-case metric list gives way to the one stored summary (Run.summary, a RunSummary with
per-turn metric counts, filled for every run by 0007_run_summary)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("runs", "0010_run_regrade_sources")]

    operations = [migrations.RemoveField(model_name="run", name="metric_summary")]
