"""Re-run a settled run's failed cases, or one of its cases, as a new run at its snapshot."""

from collections.abc import Callable
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Field, Router, Schema
from pydantic import model_validator

from runs import selectors
from runs.api.auth import role_only
from runs.api.runs import IDEMPOTENCY_KEY, RunOut
from runs.api.schemas import Id, config_problems, responses
from runs.core.agentconfig.errors import ConfigError
from runs.core.queryvalues import MAX_INT
from runs.core.reviewing.vocabulary import Role
from runs.services.launch import LaunchError
from runs.services.rerun import RerunCaseNotFound, RerunCases, RerunError
from runs.services.rerun import run_rerun as rerun

router = Router(tags=["runs"])


class RunRerunIn(Schema):
    """Which cases to run again: `{"cases": "failed"}` or `{"case": <index>}`."""

    cases: Literal["failed"] | None = Field(
        default=None,
        description='"failed": every case that failed or errored (with repeats: any of whose '
        "repetitions did), each run as many times as the original ran it",
    )
    case: int | None = Field(
        default=None,
        ge=0,
        le=MAX_INT,
        strict=True,
        description="one case, by its `index` (as `GET /runs/{id}/cases` lists it)",
    )

    @model_validator(mode="after")
    def _one_choice(self) -> "RunRerunIn":
        if (self.cases is None) == (self.case is None):
            raise ValueError('give either "cases": "failed" or "case": <index>, not both')
        return self


@router.post(
    "/runs/{run_id}/rerun",
    response=responses({200: RunOut, 201: RunOut}, 403, 404, 409, 422),
    summary="Re-run a run's failed cases, or one case, at its snapshot",
)
def run_rerun(
    request: HttpRequest, run_id: Id, payload: RunRerunIn, idempotency_key: str = IDEMPOTENCY_KEY
) -> object:
    """A new run (``rerun_of`` this one) of the chosen cases, with the files this run ran (its
    snapshot), its git identity and launch options (parallel, repeats). 409 while the run is
    live, or when it has no snapshot (an imported or older run), is a re-grade, or has no
    failed case; 404 for a case it does not have. The runner role in its project (or
    staff)."""

    original = selectors.run_row(run_id=run_id)
    role_only(request, project_id=original.project_id, needed=Role.RUNNER, action="re-run runs")
    key, user = idempotency_key.strip(), request.auth  # type: ignore[attr-defined]
    cases: RerunCases = "failed" if payload.case is None else payload.case
    return run_again_response(
        lambda: rerun(original=original, cases=cases, user=user, idempotency_key=key)
    )


def run_again_response(start: Callable[[], Any]) -> tuple[int, Any]:
    """(status, body) of a re-run or a replay: the run ``start`` opened (201; 200 when an
    idempotency key named one opened before), else why it was refused (404: no such case; 409:
    the run cannot be run again so; 422: a bad agent.yaml or idempotency key)."""

    try:
        run = start()
    except RerunCaseNotFound as exc:
        return 404, {"detail": str(exc)}
    except RerunError as exc:
        return 409, {"detail": str(exc)}
    except ConfigError as exc:
        return 422, config_problems(exc)
    except LaunchError as exc:  # a malformed idempotency key, or one sent with another request
        return 422, {"detail": [{"loc": ["header", "Idempotency-Key"], "msg": str(exc)}]}
    return (200 if run.replayed else 201), run
