"""What a run, a case and a turn cost (``runs.report.prices``), read from their stored tokens.

The agent's tokens are priced at the run's agent model (its config snapshot's ``model.name``),
each judge's at the model it recorded. Fixed queries whatever the size of the run: the run's
cost reads its cases' roll-up usage and its judge metrics (three queries); a turn's reads the
rows a case page already holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Q
from django.db.models.fields.json import KT

from runs.models import CaseResult, MetricResult, Run, TurnResult
from runs.report.prices import (
    Cost,
    PriceFileError,
    PriceTable,
    SplitCost,
    judge_cost,
    price_table,
    total,
    usage_cost,
)
from runs.selectors.runs import MODEL_NAME


@dataclass(frozen=True)
class Priced:
    """A cost, or why there is none: the price file cannot be read (its error names it)."""

    cost: SplitCost | None
    error: str | None = None


@dataclass(frozen=True)
class Pricing:
    """What a case page prices its turns with: the run's agent model and the price table (None
    with ``error`` when the price file cannot be read)."""

    model: str | None
    table: PriceTable | None
    error: str | None = None


def pricing_for(*, run_id: int) -> Pricing:
    """The run's pricing (one query)."""
    table = prices()
    if isinstance(table, str):
        return Pricing(None, None, table)
    return Pricing(agent_model(run_id=run_id), table)


def agent_model(*, run_id: int) -> str | None:
    """The run's agent model name (one query, the snapshot's one key)."""
    name = Run.objects.filter(pk=run_id).values_list(KT(MODEL_NAME), flat=True).first()
    return name or None


def prices() -> PriceTable | str:
    """The price table, or the price file's error."""
    try:
        return price_table()
    except PriceFileError as exc:
        return str(exc)


def run_cost(*, run: Run) -> Priced:
    """The run's cost, agent and judge apart (three queries)."""
    return runs_costs(run_ids=[run.pk])[run.pk]


def runs_costs(*, run_ids: list[int]) -> dict[int, Priced]:
    """Each run's cost, agent and judge apart (three queries for all of them)."""
    table = prices()
    if isinstance(table, str):
        return {run_id: Priced(None, table) for run_id in run_ids}
    models = dict(Run.objects.filter(pk__in=run_ids).values_list("pk", KT(MODEL_NAME)))
    agent: dict[int, list[Cost]] = {run_id: [] for run_id in run_ids}
    usages = CaseResult.objects.filter(run_id__in=run_ids, token_usage__isnull=False)
    for run_id, usage in usages.values_list("run_id", "token_usage"):
        agent[run_id].append(usage_cost(usage, models.get(run_id) or None, table))
    judge: dict[int, list[Cost]] = {run_id: [] for run_id in run_ids}
    judged = MetricResult.objects.filter(run_id__in=run_ids).filter(
        Q(judge_usage__isnull=False) | Q(judge_cost_usd__isnull=False)
    )
    fields = ("run_id", "judge_usage", "model_used", "judge_cost_usd")
    for run_id, usage, used, usd in judged.values_list(*fields):
        judge[run_id].append(judge_cost(usage, used, usd, table))
    return {
        run_id: Priced(SplitCost(total(agent[run_id]), total(judge[run_id]))) for run_id in run_ids
    }


def turn_row_cost(turn: TurnResult, model: str | None, table: PriceTable) -> SplitCost:
    """One stored turn (its metrics prefetched)."""
    return SplitCost(
        usage_cost(turn.token_usage, model, table),
        total(
            judge_cost(m.judge_usage, m.model_used, m.judge_cost_usd, table)
            for m in turn.metrics.all()
        ),
    )


def case_row_cost(turns: Iterable[TurnResult], model: str | None, table: PriceTable) -> SplitCost:
    costs = [turn_row_cost(turn, model, table) for turn in turns]
    return SplitCost(total(c.agent for c in costs), total(c.judge for c in costs))


__all__ = [
    "Cost",
    "Priced",
    "Pricing",
    "agent_model",
    "case_row_cost",
    "prices",
    "pricing_for",
    "run_cost",
    "runs_costs",
    "turn_row_cost",
]
