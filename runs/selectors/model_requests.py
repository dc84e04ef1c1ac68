"""A model call's full request, as sent: put back together from the parts its case's
transcripts stored (``runs.core.wire.requests``), read only when a person opens it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.http import Http404

from runs.core.wire.requests import RequestBook
from runs.models import TurnRow


@dataclass(frozen=True)
class ModelRequest:
    """Call ``call`` (from 0) of turn ``turn_index``: its request body and response."""

    turn_index: int
    call: int
    fmt: str
    body: dict[str, Any]
    response: Any
    new_parts: int  # the parts this call sent first (what it stored)

    @property
    def as_json(self) -> str:
        return json.dumps(self.body, indent=2, ensure_ascii=False)

    @property
    def size_bytes(self) -> int:
        return len(json.dumps(self.body, ensure_ascii=False).encode())


def model_requests_of_turn(*, run_id: int, case_id: int, index: int) -> list[ModelRequest]:
    """Every model call of the case's turn ``index`` that kept its request (one query: the
    case's transcripts up to that turn); 404 when the case has no such turn."""
    rows = list(
        TurnRow.objects.filter(case_id=case_id, case__run_id=run_id, index__lte=index)
        .order_by("index")
        .values_list("index", "transcript__events")
    )
    if not rows or rows[-1][0] != index:
        raise Http404(f"case {case_id} of run {run_id} has no turn {index}")
    book = RequestBook(event for _, events in rows for event in (events or []))
    calls = [e for e in rows[-1][1] or [] if e.get("type") == "model_call"]
    return [
        ModelRequest(
            turn_index=index,
            call=position,
            fmt=str(call["request"].get("format") or ""),
            body=book.body(call["request"]),
            response=call.get("response"),
            new_parts=len(call["request"].get("parts") or {}),
        )
        for position, call in enumerate(calls)
        if isinstance(call.get("request"), dict)
    ]


def model_request_get(*, run_id: int, case_id: int, index: int, call: int) -> ModelRequest:
    """Model call ``call`` of the turn; 404 when it has none or kept no request."""
    for found in model_requests_of_turn(run_id=run_id, case_id=case_id, index=index):
        if found.call == call:
            return found
    raise Http404(f"turn {index} of case {case_id} kept no request of model call {call}")
