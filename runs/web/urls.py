from __future__ import annotations

from django.urls import path

from runs.web import (
    compare,
    compare_export,
    imports,
    projects,
    regrade,
    reruns,
    snapshots,
    tokens,
    transcripts,
    trends,
    views,
)

urlpatterns = [
    path("", views.home, name="home"),
    path("projects/new/", projects.project_new, name="project_new"),
    path("projects/<int:project_id>/", projects.project_detail, name="project_detail"),
    path("projects/<int:project_id>/edit/", projects.project_edit, name="project_edit"),
    path("projects/<int:project_id>/remove/", projects.project_remove, name="project_remove"),
    path("projects/<int:project_id>/launch/", views.project_launch, name="project_launch"),
    path("runs/", views.run_list, name="run_list"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/progress/", views.run_progress, name="run_progress"),
    path("runs/<int:run_id>/export.json", views.run_export, name="run_export"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/keep/", views.run_keep, name="run_keep"),
    path("runs/<int:run_id>/snapshot/", snapshots.run_snapshot, name="run_snapshot"),
    path(
        "runs/<int:run_id>/snapshot/<path:path>",
        snapshots.run_snapshot_file,
        name="run_snapshot_file",
    ),
    path("runs/<int:run_id>/snapshot.zip", snapshots.run_snapshot_zip, name="run_snapshot_zip"),
    path("runs/<int:run_id>/regrade/", regrade.run_regrade, name="run_regrade"),
    path("runs/<int:run_id>/rerun/", reruns.run_rerun, name="run_rerun"),
    path("runs/<int:run_id>/cases/<int:case_id>/", views.case_detail, name="case_detail"),
    path("runs/<int:run_id>/cases/<int:case_id>/turns/", views.case_turns, name="case_turns"),
    path(
        "runs/<int:run_id>/cases/<int:case_id>/transcript/",
        transcripts.case_transcript,
        name="case_transcript",
    ),
    path("compare/", compare.compare, name="compare"),
    path("compare/case/", compare.compare_case, name="compare_case"),
    path("compare/config/", compare.compare_config, name="compare_config"),
    path("compare/export.csv", compare_export.compare_csv, name="compare_csv"),
    path("compare/transcript/", transcripts.compare_transcript, name="compare_transcript"),
    path("trends/", trends.trends, name="trends"),
    path("tokens/", tokens.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", tokens.token_revoke, name="token_revoke"),
    path("import/", imports.import_results, name="import_results"),
]
