"""One counter column per case verdict: ``failed_cases`` counts failed cases only (it counted
errored ones too), beside the new ``errored_cases`` and ``cancelled_cases``; every run's
counters are recounted from its case rows (the truth), in one UPDATE per column."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models
from django.db.models import Count, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

# The stored verdict of each counter (runs.models.CASE_COUNTERS, as it was written).
COUNTERS = {
    "passed_cases": "passed",
    "failed_cases": "failed",
    "errored_cases": "error",
    "not_graded_cases": "not_graded",
    "cancelled_cases": "cancelled",
}


def recount(apps: Any, schema_editor: Any) -> None:
    run_model = apps.get_model("runs", "Run")
    case_model = apps.get_model("runs", "CaseResult")
    for column, outcome in COUNTERS.items():
        counted = (
            case_model.objects.filter(run=OuterRef("pk"), outcome=outcome)
            .order_by()
            .values("run")
            .annotate(n=Count("pk"))
            .values("n")
        )
        run_model.objects.update(
            **{column: Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))}
        )


class Migration(migrations.Migration):
    dependencies = [("runs", "0018_idempotency_scope")]

    operations = [
        migrations.AddField(
            model_name="run", name="errored_cases", field=models.IntegerField(default=0)
        ),
        migrations.AddField(
            model_name="run", name="cancelled_cases", field=models.IntegerField(default=0)
        ),
        migrations.RunPython(recount, migrations.RunPython.noop, elidable=True),
    ]
