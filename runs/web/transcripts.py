"""What the agent saw: a turn's transcript as a timeline, and two runs' transcripts of the same
turn side by side.

- ``case_transcript``: the fragment an opened "Transcript" section of a turn loads (the case
  page, an expanded case row, the compare page's columns). Transcripts live in their own
  table and are read only here, one turn at a time: the run and case pages never load them.
- ``compare_transcript``: ``/compare/transcript/?a=<case>&b=<case>&turn=N``, the two cases'
  turn N aligned event by event, with what changed in what the model was given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from runs.compare.pages.transcripts import EventPair, SeenDiff, aligned, seen_diffs
from runs.core.wire.transcripts import EDITED_PROMPT_SOURCE
from runs.selectors.model_requests import model_requests_of_turn
from runs.selectors.transcript_turns import (
    TurnTranscriptPage,
    transcript_cases,
    turn_transcript_get,
)
from runs.web.model_requests import RequestDiff, request_diff
from runs.web.params import int_param, text_param
from runs.web.transcript_events import Timeline, timeline

if TYPE_CHECKING:
    from runs.models import CaseRow

MAX_TURN = 10_000
# The anchor prefix of the turn the fragment is drawn in (``case-12-``, ``run-3-``, none).
_PREFIX = re.compile(r"[a-z0-9-]{0,40}")


@login_required
@require_GET
def case_transcript(request: HttpRequest, run_id: int, case_id: int) -> HttpResponse:
    """Turn ``?turn=N`` of the case: its transcript's timeline; ``?prefix=``: the anchor prefix
    of the turn on the page (its tool calls link to their arg-match diffs there)."""
    index = _turn_param(request, required=True)
    prefix = text_param(request, "prefix", max_length=40)
    if not _PREFIX.fullmatch(prefix):
        raise BadRequest("?prefix= is a turn's anchor prefix: lower-case letters, digits, -")
    page = turn_transcript_get(run_id=run_id, case_id=case_id, index=index)
    context = {
        "page": page,
        "search_label": f"in the transcript of turn {index + 1}",
        "diff_base": "",  # its tool calls' arg-match diffs are in the same turn
        **_timeline_context(page, prefix),
    }
    return render(request, "runs/_transcript.html#transcript", context)


def _turn_param(request: HttpRequest, *, required: bool) -> int:
    index = int_param(request, "turn", maximum=MAX_TURN)
    if index is None:
        if required:
            raise BadRequest("?turn= is the turn's index: 0 for the first")
        return 0
    return index


def _timeline_context(page: TurnTranscriptPage, prefix: str) -> dict[str, Any]:
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


# --- two runs side by side -------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One run's column: its case, and its turn's transcript (None: the case has no such turn;
    ``page.events`` None: the turn has no transcript)."""

    case: CaseRow
    case_url: str
    page: TurnTranscriptPage | None
    timeline: Timeline | None
    source_url: str | None

    @property
    def recorded(self) -> bool:
        return self.timeline is not None


@login_required
@require_GET
def compare_transcript(request: HttpRequest) -> HttpResponse:
    """The two cases' (``a``, ``b``: case ids, usually the same case in two runs) turn
    ``turn`` (default 0) side by side: events aligned, what the model was given diffed."""
    ids = (_case_param(request, "a"), _case_param(request, "b"))
    index = _turn_param(request, required=False)
    cases = transcript_cases(case_ids=ids)
    left, right = (_side(case, index) for case in cases)
    if left.page is None and right.page is None:
        raise Http404(f"neither case has a turn {index}")
    shown = [side.timeline.events if side.timeline else [] for side in (left, right)]
    names = (f"#{cases[0].run_id}", f"#{cases[1].run_id}")
    rows: list[EventPair] = aligned(shown[0], shown[1], names)
    both = left.recorded and right.recorded
    seen: list[SeenDiff] = seen_diffs(shown[0], shown[1]) if both else []
    sent = _request_change(cases, index) if both else None
    count = max(cases[0].turn_count, cases[1].turn_count, index + 1)
    context = {
        "left": left,
        "right": right,
        "sides": [left, right],
        "index": index,
        "turn_total": count,
        "turn_links": [(n, _pair_query(ids, n), n == index) for n in range(count)],
        "swap_query": _pair_query((ids[1], ids[0]), index),
        "rows": rows,
        "seen": seen,
        "changed": sum(not row.same for row in rows),
        "sent": sent,
    }
    return render(request, "runs/compare_transcript.html", context)


def _request_change(cases: tuple[CaseRow, CaseRow], index: int) -> RequestDiff | None:
    """What the turn's first model call was sent differently, when both runs kept it."""
    first = []
    for case in cases:
        found = model_requests_of_turn(run_id=case.run_id, case_id=case.pk, index=index)
        if not found:
            return None
        first.append(found[0].body)
    return request_diff(first[0], first[1])


def _case_param(request: HttpRequest, name: str) -> int:
    value = int_param(request, name, minimum=1)
    if value is None:
        raise BadRequest(f"?{name}= is a case's id: ?a=<case>&b=<case> (the same case, two runs)")
    return value


def _pair_query(ids: tuple[int, int], index: int) -> str:
    return urlencode({"a": ids[0], "b": ids[1], "turn": index})


def _side(case: CaseRow, index: int) -> Side:
    """The column of ``case``: its tool calls link to their arg-match diffs on the case page."""
    case_url = reverse("case_detail", args=[case.run_id, case.pk])
    try:
        page = turn_transcript_get(run_id=case.run_id, case_id=case.pk, index=index)
    except Http404:
        return Side(case, case_url, None, None, None)
    found = _timeline_context(page, "")
    return Side(case, case_url, page, found["timeline"], found["source_url"])
