"""What the agent saw: a turn's transcript as a timeline (``case_transcript``: the fragment an
opened "Transcript" section of a turn loads on the case page, an expanded case row, the compare
page's columns). Transcripts live in their own table and are read one turn at a time: the run
and case pages never load them. Two runs' transcripts side by side are compare's
(``runs.compare.pages.transcript_pair``)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from runs.core.wire.transcripts import EDITED_PROMPT_SOURCE
from runs.selectors.transcript_turns import (
    TurnTranscriptPage,
    turn_transcript_get,
)
from runs.shared.transcript_events import Timeline, timeline
from runs.web.params import int_param, text_param

MAX_TURN = 10_000
# The anchor prefix of the turn the fragment is drawn in (``case-12-``, ``run-3-``, none).
_PREFIX = re.compile(r"[a-z0-9-]{0,40}")


@login_required
@require_GET
def case_transcript(request: HttpRequest, run_id: int, case_id: int) -> HttpResponse:
    """Turn ``?turn=N`` of the case: its transcript's timeline; ``?prefix=``: the anchor prefix
    of the turn on the page (its tool calls link to their arg-match diffs there)."""
    index = turn_param(request, required=True)
    prefix = text_param(request, "prefix", max_length=40)
    if not _PREFIX.fullmatch(prefix):
        raise BadRequest("?prefix= is a turn's anchor prefix: lower-case letters, digits, -")
    page = turn_transcript_get(run_id=run_id, case_id=case_id, index=index)
    context = {
        "page": page,
        "search_label": f"in the transcript of turn {index + 1}",
        "diff_base": "",  # its tool calls' arg-match diffs are in the same turn
        **timeline_context(page, prefix),
    }
    return render(request, "runs/_transcript.html#transcript", context)


def turn_param(request: HttpRequest, *, required: bool) -> int:
    index = int_param(request, "turn", maximum=MAX_TURN)
    if index is None:
        if required:
            raise BadRequest("?turn= is the turn's index: 0 for the first")
        return 0
    return index


def timeline_context(page: TurnTranscriptPage, prefix: str) -> dict[str, Any]:
    """The timeline, and where its system prompt came from (a link into the run's snapshot)."""
    if page.events is None:
        return {"timeline": None, "source_url": None}
    drawn = timeline(
        page.events,
        turn_index=page.turn_index,
        turn_ms=page.execution_time_ms,
        details=page.arg_match_details,
        prefix=prefix,
    )
    drawn = _with_request_urls(drawn, page)
    return {"timeline": drawn, "source_url": _source_url(page, drawn)}


def _with_request_urls(drawn: Timeline, page: TurnTranscriptPage) -> Timeline:
    """Each model call that kept its request links to it (runs.web.model_requests)."""
    base = reverse("model_call_request", args=[page.run_id, page.case_id])
    views = [
        replace(view, request_url=f"{base}?{urlencode({'turn': page.turn_index, 'call': n})}")
        if (n := view.model_call) is not None and isinstance(view.event.get("request"), dict)
        else view
        for view in drawn.events
    ]
    return replace(drawn, events=views)


def _source_url(page: TurnTranscriptPage, drawn: Timeline) -> str | None:
    """The snapshot file the system prompt came from, when the run has a snapshot."""
    if page.snapshot_id is None:
        return None
    for view in drawn.events:
        source = view.event.get("source") if view.kind == "system" else None
        if isinstance(source, str) and source.strip() and source != EDITED_PROMPT_SOURCE:
            path = source.strip().removeprefix("./")
            return reverse("run_snapshot_file", args=[page.run_id, path])
    return None
