"""Three runs of one project for the compare tests (pages and browser): made one after the
other, every case named the same in each, with a metric that drops and a response to search.

- ``oldest``: case 1 fails (its turn 2), the others pass;
- ``middle``: case 2 fails; case 5's first response says the parcel was "LOST in transit";
- ``newest``: cases 1 and 3 fail; case 4's rouge falls to 0.10 on every turn (from 0.82).

So, in commit order, case 1 is fixed at ``middle`` and regresses again at ``newest`` (it changed
back and forth), case 2 regresses at ``middle`` and is fixed at ``newest``, and case 4 has the
largest rouge drop, at ``newest``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from runs.models import AgentProject, CaseRow, MetricRow, Run, TurnRow
from tests.web.factories import RunSpec, build_run

LOST = "Your parcel was LOST in transit, so the refund is 42.00 EUR."
LOW_ROUGE = 0.10


@dataclass(frozen=True)
class ThreeRuns:
    oldest: Run
    middle: Run
    newest: Run

    @property
    def ids(self) -> str:
        return f"{self.oldest.pk},{self.middle.pk},{self.newest.pk}"


def three_runs(project: AgentProject, *, cases: int = 6, turns: int = 3) -> ThreeRuns:
    start = timezone.now() - timedelta(hours=3)
    made = [
        build_run(
            project,
            RunSpec(cases=cases, turns=turns, failing=failing, git_commit=commit * 40),
            created_at=start + timedelta(hours=hour),
        )
        for hour, (failing, commit) in enumerate((((1,), "a"), ((2,), "b"), ((1, 3), "c")))
    ]
    for case in CaseRow.objects.filter(run__in=made, name__startswith="failing "):
        CaseRow.objects.filter(pk=case.pk).update(name=case.name.removeprefix("failing "))
    oldest, middle, newest = made
    TurnRow.objects.filter(run=middle, case__index=5, index=0).update(response=LOST)
    MetricRow.objects.filter(run=newest, turn__case__index=4, metric_name="rouge").update(
        score=LOW_ROUGE
    )
    return ThreeRuns(oldest, middle, newest)
