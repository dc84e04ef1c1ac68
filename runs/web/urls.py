from __future__ import annotations

from django.urls import URLPattern, URLResolver, include, path

from runs.web import (
    audit,
    calibration,
    cases,
    home,
    imports,
    launch,
    model_requests,
    project_roles,
    projects,
    regrade,
    replays,
    reruns,
    review_queue,
    reviews,
    run_list,
    run_page,
    snapshots,
    tokens,
    transcripts,
    trends,
)

# A project's pages, under projects/<project_id>/.
project_routes: list[URLPattern | URLResolver] = [
    path("", projects.project_detail, name="project_detail"),
    path("edit/", projects.project_edit, name="project_edit"),
    path("remove/", projects.project_remove, name="project_remove"),
    path("launch/", launch.project_launch, name="project_launch"),
    path("review/", review_queue.review_queue, name="review_queue"),
    path("review/turns/<int:turn_id>/", review_queue.queue_triage, name="queue_triage"),
    path("review/turns/<int:turn_id>/confirm/", review_queue.queue_confirm, name="queue_confirm"),
    path("review/turns/<int:turn_id>/assign/", review_queue.queue_assign, name="queue_assign"),
    path("roles/", project_roles.project_roles, name="project_roles"),
    path("roles/set/", project_roles.project_role_set, name="project_role_set"),
    path("categories/", project_roles.project_category_save, name="project_category_save"),
    path("calibration/", calibration.calibration, name="project_calibration"),
    path("calibration/<path:metric>/", calibration.calibration, name="project_calibration_metric"),
]

# A case's pages, under runs/<run_id>/cases/<case_id>/.
case_routes: list[URLPattern | URLResolver] = [
    path("", cases.case_detail, name="case_detail"),
    path("turns/", cases.case_turns, name="case_turns"),
    path("transcript/", transcripts.case_transcript, name="case_transcript"),
    path("request/", model_requests.model_call_request, name="model_call_request"),
    path("review/", reviews.case_review, name="case_review"),
    path("turns/<int:turn_id>/review/", reviews.turn_review, name="turn_review"),
    path(
        "turns/<int:turn_id>/review/confirm/",
        reviews.turn_review_confirm,
        name="turn_review_confirm",
    ),
    path(
        "turns/<int:turn_id>/review/reopen/", reviews.turn_review_reopen, name="turn_review_reopen"
    ),
]

# A run's pages, under runs/<run_id>/.
run_routes: list[URLPattern | URLResolver] = [
    path("", run_page.run_detail, name="run_detail"),
    path("progress/", run_page.run_progress, name="run_progress"),
    path("export.json", run_page.run_export, name="run_export"),
    path("cancel/", run_page.run_cancel, name="run_cancel"),
    path("keep/", run_page.run_keep, name="run_keep"),
    path("snapshot/", snapshots.run_snapshot, name="run_snapshot"),
    path("snapshot/<path:path>", snapshots.run_snapshot_file, name="run_snapshot_file"),
    path("snapshot.zip", snapshots.run_snapshot_zip, name="run_snapshot_zip"),
    path("regrade/", regrade.run_regrade, name="run_regrade"),
    path("rerun/", reruns.run_rerun, name="run_rerun"),
    path("replay/", replays.run_replay, name="run_replay"),
    path("reviews/tile/", reviews.run_review_tile, name="run_review_tile"),
    path("cases/<int:case_id>/", include(case_routes)),
]

urlpatterns = [
    path("", home.home, name="home"),
    path("projects/new/", projects.project_new, name="project_new"),
    path("projects/<int:project_id>/", include(project_routes)),
    path("runs/", run_list.run_list, name="run_list"),
    path("runs/<int:run_id>/", include(run_routes)),
    path("trends/", trends.trends, name="trends"),
    path("tokens/", tokens.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", tokens.token_revoke, name="token_revoke"),
    path("import/", imports.import_results, name="import_results"),
    path("audit/", audit.audit_log, name="audit"),
]
