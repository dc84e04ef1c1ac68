"""What-if replay: some cases of a settled run run again with changes (the system prompt, the
model or its parameters, the commit) while their tools answer from the run's recording."""

from typing import TYPE_CHECKING, Literal

from django.http import HttpRequest
from django.urls import reverse
from ninja import Field, Router, Schema
from pydantic import ValidationError

from runs import selectors
from runs.api.auth import role_only
from runs.api.reruns import run_again_response
from runs.api.runs import IDEMPOTENCY_KEY, RunOut
from runs.api.schemas import Id, responses
from runs.core.queryvalues import MAX_INT
from runs.core.reviewing.vocabulary import Role
from runs.core.runoptions.replay import POLICY_TEXTS, Policy, ReplayChanges, ReplayParams
from runs.services.replay import run_replay as replay

if TYPE_CHECKING:
    from runs.models import Run

router = Router(tags=["runs"])

_POLICIES = "; ".join(f"`{name}`: {text}" for name, text in POLICY_TEXTS.items())


class ReplayIn(Schema):
    """Which cases to replay, with what changes, and how their tools answer."""

    cases: Literal["failed"] | list[int] = Field(
        description='"failed": every case that failed or errored; or a list of case indices '
        "(as `GET /runs/{id}/cases` lists them)",
        min_length=1,
    )
    tools: Policy = Field(default="recorded-only", description=f"the tool policy: {_POLICIES}")
    prompt_text: str | None = Field(
        default=None,
        max_length=200_000,
        description="the whole system prompt to run instead of the run's",
    )
    prompt_file: str | None = Field(
        default=None,
        max_length=500,
        description="a file of the agent's directory (relative to its agent.yaml) read as the "
        "system prompt",
    )
    model: str | None = Field(default=None, max_length=200, description="another model name")
    params: ReplayParams = Field(
        default=ReplayParams(), description="model parameters to change (temperature, ...)"
    )
    commit: str = Field(
        default="",
        max_length=200,
        description="a git ref of the run's project: the agent at that commit is replayed",
    )


class ReplayOut(RunOut):
    """The replay's run (queued), what it changed, and its side by side with the original."""

    replay_of: int = Field(description="the run whose recording its tools answer from")
    tools: str = Field(description="its tool policy")
    changes: list[str] = Field(description="what it changed, one phrase each")
    compare_url: str = Field(description="the compare page of the original and the replay")

    @staticmethod
    def resolve_replay_of(run: "Run") -> int:
        pick = run.run_options.replay
        return pick.of if pick is not None else 0

    @staticmethod
    def resolve_tools(run: "Run") -> str:
        pick = run.run_options.replay
        return pick.policy if pick is not None else ""

    @staticmethod
    def resolve_changes(run: "Run") -> list[str]:
        pick = run.run_options.replay
        return pick.changes() if pick is not None else []

    @staticmethod
    def resolve_compare_url(run: "Run") -> str:
        pick = run.run_options.replay
        return f"{reverse('compare')}?runs={pick.of if pick else ''},{run.pk}"


@router.post(
    "/runs/{run_id}/replay",
    response=responses({200: ReplayOut, 201: ReplayOut}, 403, 404, 409, 422),
    summary="Replay some of a run's cases with changes, their tools answering from the recording",
)
def run_replay(
    request: HttpRequest, run_id: Id, payload: ReplayIn, idempotency_key: str = IDEMPOTENCY_KEY
) -> object:
    """A new run (``rerun_of`` this one) of the chosen cases with the changes asked, where each
    tool call that matches the recorded turn's (by name and arguments) returns the recorded
    result and any other follows ``tools``. 409 while the run is live, or when it has no
    snapshot, is a re-grade, has no failed case, or a change cannot be made (a prompt file
    not in the agent, an unknown commit); 404 for a case it does not have; 422 for a bad
    agent.yaml at the commit asked. The runner role in its project (or staff)."""

    original = selectors.run_row(run_id=run_id)
    role_only(request, project_id=original.project_id, needed=Role.RUNNER, action="replay runs")
    key, user = idempotency_key.strip(), request.auth  # type: ignore[attr-defined]
    for index in payload.cases if isinstance(payload.cases, list) else []:
        if not 0 <= index <= MAX_INT:
            return 422, {"detail": [{"loc": ["body", "cases"], "msg": "a case index is >= 0"}]}
    try:
        changes = ReplayChanges(
            prompt_text=payload.prompt_text,
            prompt_file=payload.prompt_file,
            model=payload.model,
            params=payload.params,
            commit=payload.commit,
        )
    except ValidationError as exc:
        problems = [
            {"loc": ["body", *map(str, error["loc"])], "msg": error["msg"]}
            for error in exc.errors()
        ]
        return 422, {"detail": problems}
    return run_again_response(
        lambda: replay(
            original=original,
            cases=payload.cases,
            changes=changes,
            policy=payload.tools,
            user=user,
            idempotency_key=key,
        )
    )
