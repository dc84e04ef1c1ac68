"""Runs get an identity (``Run.uid``) that their exports carry. Existing runs each get their
own: a field added with a callable default would give every existing row the same value, so
the column is added nullable, filled row by row, then made unique and required."""

import uuid

from django.db import migrations, models


def fill_uids(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    for pk in Run.objects.filter(uid__isnull=True).values_list("pk", flat=True).iterator():
        Run.objects.filter(pk=pk).update(uid=uuid.uuid4())


class Migration(migrations.Migration):
    dependencies = [("runs", "0007_run_summary")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="uid",
            field=models.UUIDField(null=True, editable=False),
        ),
        migrations.RunPython(fill_uids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="run",
            name="uid",
            field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
        ),
    ]
