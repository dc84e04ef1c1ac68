"""The launch options the lists read, as columns of the run (repeats, limit, filter and the
agent.yaml's case count), filled from each run's ``options`` JSON.

The JSON keys are read as SQL JSON paths (text on PostgreSQL, numbers on SQLite), never the
whole JSON (it holds the run's case list); ``RunOptions.stored`` reads them as runs do (an
unreadable value is the field's default), so ``repeats`` is normalised in one place.
"""

from typing import Any

from django.db import migrations, models
from django.db.models.fields.json import KT

from runs.core.runoptions import RunOptions

BATCH = 500
KEYS = ("limit", "case_filter", "config_cases", "repeats")


def option_columns(limit: Any, case_filter: Any, config_cases: Any, repeats: Any) -> dict[str, Any]:
    """The columns of a run whose JSON holds these values at KEYS (as a query reads them)."""
    read = {"limit": limit, "case_filter": case_filter, "config_cases": config_cases}
    options = RunOptions.stored(
        {key: value for key, value in read.items() if value is not None} | {"repeats": repeats}
    )
    return options.columns()


def fill_option_columns(apps: Any, schema_editor: Any) -> None:
    """Each run whose JSON says other than the defaults gets its columns, BATCH runs at a time
    (each batch read whole before it is written)."""
    Run = apps.get_model("runs", "Run")
    runs = Run.objects.using(schema_editor.connection.alias).order_by("pk")
    paths = [KT(f"options__{key}") for key in KEYS]
    defaults = option_columns(None, None, None, None)
    last = 0
    while batch := list(runs.filter(pk__gt=last).values_list("pk", *paths)[:BATCH]):
        last = batch[-1][0]
        changed = [(pk, option_columns(*values)) for pk, *values in batch]
        runs.bulk_update(
            [Run(pk=pk, **columns) for pk, columns in changed if columns != defaults],
            list(defaults),
        )


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0016_transcripts_reruns_subjects"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="repeats",
            field=models.IntegerField(default=1),
        ),
        migrations.AddField(
            model_name="run",
            name="case_limit",
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="case_filter",
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name="run",
            name="config_cases",
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.RunPython(fill_option_columns, migrations.RunPython.noop),
    ]
