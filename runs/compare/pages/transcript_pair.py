"""Two runs' transcripts of the same turn side by side: ``/compare/transcript/?a=<case>&b=<case>
&turn=N``, the two cases' turn N aligned event by event (``runs.compare.pages.transcripts``),
with what changed in what the model was given and, when both kept it, in what its first model
call was sent (``runs.web.model_requests.request_diff``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from runs.compare.pages.transcripts import EventPair, SeenDiff, aligned, seen_diffs
from runs.selectors.model_requests import model_requests_of_turn
from runs.selectors.transcript_turns import (
    TurnTranscriptPage,
    transcript_cases,
    turn_transcript_get,
)
from runs.shared.transcript_events import Timeline
from runs.web.model_requests import RequestDiff, request_diff
from runs.web.params import int_param
from runs.web.transcripts import timeline_context, turn_param

if TYPE_CHECKING:
    from runs.models import CaseRow


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
    index = turn_param(request, required=False)
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
    found = timeline_context(page, "")
    return Side(case, case_url, page, found["timeline"], found["source_url"])
