"""A re-grade records its two sources apart (Run.regrade_sources, runs.core.verdicts.regrades): the
run and snapshot its transcripts come from, and the agent.yaml it was graded with. Its git fields
become its transcripts' (the original run's), so no page counts it among the grading commit's
runs; the re-grades recorded before keep their grading commit in regrade_sources.grading."""

from typing import Any

from django.db import migrations, models

GIT_FIELDS = ("git_ref", "git_commit", "git_branch", "git_dirty")


def record_sources(apps: Any, schema_editor: Any) -> None:
    Run = apps.get_model("runs", "Run")
    AgentSnapshot = apps.get_model("runs", "AgentSnapshot")
    digests = dict(AgentSnapshot.objects.values_list("id", "digest"))
    columns = ("id", "source", "regrade_of_id", "options", "agent_config_path", "snapshot_id")
    regrades = list(Run.objects.filter(source="regrade").values(*columns, *GIT_FIELDS))
    originals = {row["regrade_of_id"] for row in regrades} - {row["id"] for row in regrades}
    rows = {
        row["id"]: row
        for row in [*regrades, *Run.objects.filter(pk__in=originals).values(*columns, *GIT_FIELDS)]
    }
    done: dict[int, dict[str, Any]] = {}
    # Oldest first: a re-grade of a re-grade takes the transcripts of the one before.
    for run_id in sorted(rows):
        row = rows[run_id]
        if row["source"] != "regrade":
            continue
        of = row["regrade_of_id"] or (row["options"] or {}).get("regrade_of")
        original = rows.get(of) if of is not None else None
        if original is None:
            transcripts = {"run": of or 0, "commit": "", "branch": "", "snapshot": ""}
            identity = {"git_ref": "", "git_commit": "", "git_branch": "", "git_dirty": False}
        elif original["id"] in done:
            transcripts = done[original["id"]]["transcripts"]
            identity = {field: original[field] for field in GIT_FIELDS}
        else:
            transcripts = {
                "run": original["id"],
                "commit": original["git_commit"],
                "branch": original["git_branch"],
                "snapshot": digests.get(original["snapshot_id"], ""),
            }
            identity = {field: original[field] for field in GIT_FIELDS}
        sources = {
            "of": of or 0,
            "transcripts": transcripts,
            "grading": {
                "ref": row["git_ref"],
                "commit": row["git_commit"],
                "branch": row["git_branch"],
                "dirty": row["git_dirty"],
                "agent_path": row["agent_config_path"],
                "snapshot": digests.get(row["snapshot_id"], ""),
            },
        }
        done[run_id] = sources
        # The new git fields are read by the next re-grade of this one.
        row.update(identity)
        Run.objects.filter(pk=run_id).update(regrade_sources=sources, **identity)


def forget_sources(apps: Any, schema_editor: Any) -> None:
    """Back to the grading commit as the re-grade's git fields (the field itself is dropped)."""
    Run = apps.get_model("runs", "Run")
    for run_id, sources in Run.objects.exclude(regrade_sources={}).values_list(
        "id", "regrade_sources"
    ):
        grading = sources.get("grading") or {}
        Run.objects.filter(pk=run_id).update(
            git_ref=grading.get("ref", ""),
            git_commit=grading.get("commit", ""),
            git_branch=grading.get("branch", ""),
            git_dirty=bool(grading.get("dirty")),
        )


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0009_agent_snapshot"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="regrade_sources",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(record_sources, forget_sources),
    ]
