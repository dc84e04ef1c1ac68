"""What an idempotency key was first sent with: its endpoint and target (``idempotency_scope``,
"launch:project:3", "re-run:run:12", "re-grade:run:12") and a digest of the request's options
(``idempotency_fingerprint``), so a key answers only the request it was first sent with.

The runs keyed before this get their scope from what they are (a re-grade's, a re-run's
original, a launch's project); their options were not recorded, so their fingerprint stays
empty and only their scope is compared.
"""

from typing import Any

from django.db import migrations, models
from django.db.models.functions import Cast, Concat


def fill_scopes(apps: Any, schema_editor: Any) -> None:
    Run = apps.get_model("runs", "Run")
    keyed = Run.objects.using(schema_editor.connection.alias).exclude(idempotency_key="")
    regrades = keyed.filter(regrade_of__isnull=False)
    regrades.update(idempotency_scope=_scope("re-grade:run:", "regrade_of_id"))
    reruns = keyed.filter(regrade_of__isnull=True, rerun_of__isnull=False)
    reruns.update(idempotency_scope=_scope("re-run:run:", "rerun_of_id"))
    launches = keyed.filter(regrade_of__isnull=True, rerun_of__isnull=True, project__isnull=False)
    launches.update(idempotency_scope=_scope("launch:project:", "project_id"))


def _scope(prefix: str, column: str) -> Concat:
    return Concat(
        models.Value(prefix),
        Cast(column, models.CharField(max_length=20)),
        output_field=models.CharField(max_length=100),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0017_run_option_columns"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="idempotency_scope",
            field=models.CharField(blank=True, max_length=100),
        ),
        migrations.AddField(
            model_name="run",
            name="idempotency_fingerprint",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.RunPython(fill_scopes, migrations.RunPython.noop),
    ]
