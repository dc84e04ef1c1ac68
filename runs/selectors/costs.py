"""What a run, a case and a turn cost (``runs.core.pricing.prices``), read from their stored tokens.

The agent's tokens are priced at the run's agent model (its config snapshot's ``model.name``),
each judge's at the model it recorded. Fixed queries whatever the size of the run: the run's
cost is its cases' roll-up usage and its judge metrics summed by the database (three queries,
none again for a finished run); a turn's reads the rows a case page already holds.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from django.db.models import BigIntegerField, Case, Count, F, Q, QuerySet, Sum, When
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce
from django.db.models.lookups import GreaterThan

from runs.core.pricing.prices import (
    Cost,
    PriceFileError,
    PriceTable,
    SplitCost,
    UsageSums,
    agent_model_name,
    judge_cost,
    price_table,
    price_table_key,
    summed_usage_cost,
    total,
    unpriced_models,
    usage_cost,
    warn_unpriced,
)
from runs.models import CaseRow, MetricRow, Run, TurnRow
from runs.selectors.runs import MODEL_NAME


@dataclass(frozen=True)
class Priced:
    """A cost, or why there is none: the price file cannot be read (its error names it).
    ``prices`` names the price table, its date and source (``PriceTable.source``)."""

    cost: SplitCost | None
    error: str | None = None
    prices: str = ""

    @property
    def note(self) -> str:
        """What a page shows beside a cost some of whose models have no price ("" if none)."""
        unpriced = self.cost.both.unpriced if self.cost is not None else ()
        if not unpriced:
            return ""
        return f"no price for {', '.join(unpriced)}: its part of the cost is unknown"


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
    """The run's cost, agent and judge apart (three queries; none for a finished run priced
    with the same price table before in this process: its rows no longer change)."""
    if run.is_live:
        return runs_costs(run_ids=[run.pk])[run.pk]
    key = (run.uid, *price_table_key())
    with _finished_lock:
        cached = _finished_costs.get(key)
    if cached is not None:
        return cached
    priced = runs_costs(run_ids=[run.pk])[run.pk]
    with _finished_lock:
        if len(_finished_costs) >= FINISHED_COSTS_KEPT:
            _finished_costs.pop(next(iter(_finished_costs)))
        _finished_costs[key] = priced
    return priced


# Finished runs' costs, by (run uid, price table): a run page is opened again and again.
FINISHED_COSTS_KEPT = 256
_finished_costs: dict[tuple[uuid.UUID, str, int], Priced] = {}
_finished_lock = threading.Lock()


def runs_costs(*, run_ids: list[int]) -> dict[int, Priced]:
    """Each run's cost, agent and judge apart: each sum of its usages priced as the sum of their
    costs (``runs.core.pricing.prices``). The sums are a finished run's stored ones
    (``Run.list_counts["cost"]``, counted when it ended); the others' are summed by the
    database, two queries for all of them whatever their size."""
    table = prices()
    if isinstance(table, str):
        return {run_id: Priced(None, table) for run_id in run_ids}
    models, sums = _stored_cost_sums(run_ids)
    counting = [run_id for run_id in run_ids if run_id not in sums]
    if counting:
        sums |= cost_sums_count(run_ids=counting)
    priced = {}
    for run_id in run_ids:
        model = models.get(run_id) or None
        agent = [summed_usage_cost(_sums(row), model, table) for row in sums[run_id]["agent"]]
        judge = [_judge_group_cost(row, table) for row in sums[run_id]["judge"]]
        priced[run_id] = Priced(SplitCost(total(agent), total(judge)), prices=table.source)
    return priced


CostSums = dict[str, list[dict[str, Any]]]


def _stored_cost_sums(run_ids: list[int]) -> tuple[dict[int, str | None], dict[int, CostSums]]:
    """Each run's agent model, and the stored cost sums of those that have ended (one query)."""
    models: dict[int, str | None] = {}
    sums: dict[int, CostSums] = {}
    runs = (
        Run.objects.filter(pk__in=run_ids)
        .only("id", "status", "cases_done", "total_cases", "list_counts")
        .annotate(model=KT(MODEL_NAME))
    )
    for run in runs:
        models[run.pk] = run.model  # type: ignore[attr-defined]
        stored = run.list_counts
        found = stored.get("cost") if isinstance(stored, dict) and not run.is_live else None
        if isinstance(found, dict) and {"agent", "judge"} <= found.keys():
            sums[run.pk] = found
    return models, sums


def cost_sums_count(*, run_ids: list[int]) -> dict[int, CostSums]:
    """Each run's token sums as its cost prices them, counted by the database (two queries):
    ``agent``, its cases' roll-up usage; ``judge``, its metrics' by judge model, with or without
    tokens. Plain JSON values: what ``run_finish`` stores in ``Run.list_counts["cost"]``."""
    found: dict[int, CostSums] = {run_id: {"agent": [], "judge": []} for run_id in run_ids}
    cases = _with_tokens(
        CaseRow.objects.filter(run_id__in=run_ids, token_usage__isnull=False), "token_usage"
    )
    for row in cases.filter(has_tokens=1).values("run_id").annotate(**_SUMS):
        found[row.pop("run_id")]["agent"].append(_plain(row))
    judged = _with_tokens(
        MetricRow.objects.filter(run_id__in=run_ids).filter(
            Q(judge_usage__isnull=False) | Q(judge_cost_usd__isnull=False)
        ),
        "judge_usage",
    )
    groups = judged.values("run_id", "model_used", "has_tokens").annotate(
        **_SUMS,
        unrecorded=Sum(Case(When(judge_cost_usd__isnull=True, then=1), default=0)),
        recorded=Sum(Coalesce("judge_cost_usd", 0.0)),
        nonzero=Sum(Case(When(judge_cost_usd__gt=0, then=1), default=0)),
    )
    for row in groups:
        found[row.pop("run_id")]["judge"].append(_plain(row))
    return found


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row of sums as JSON stores it: whole numbers as int (PostgreSQL sums to Decimal), the
    recorded cost as float."""
    return {
        key: value if value is None or isinstance(value, str)
        else float(value) if key == "recorded" else int(value)
        for key, value in row.items()
    }  # fmt: skip


def run_prices_warn(*, run: Run, when: Literal["opened", "finished"]) -> tuple[str, ...]:
    """Log a warning when the run has a model without a price, and return those models: its
    agent model when it opens; when it finishes, every model whose tokens it recorded (agent
    and judges, as its cost reads them). Nothing for an unreadable price file: every cost
    shows that error instead."""
    table = prices()
    if isinstance(table, str):
        return ()
    if when == "opened":
        models = unpriced_models([agent_model_name(run.config_snapshot)], table)
    else:
        cost = runs_costs(run_ids=[run.pk])[run.pk].cost
        models = cost.both.unpriced if cost is not None else ()
    warn_unpriced(models, run_id=run.pk, when=when, table=table)
    return models


_TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "cache_creation_tokens", "cache_read_tokens")
_SUMS = {
    "prompt": Sum("t_prompt_tokens"),
    "completion": Sum("t_completion_tokens"),
    "cache_write": Sum("t_cache_creation_tokens"),
    "cache_read": Sum("t_cache_read_tokens"),
    "billable_prompt": Sum("t_billable"),
    "rows": Count("pk"),
}


def _with_tokens(rows: QuerySet[Any], column: str) -> QuerySet[Any]:
    """``rows`` with their usage's token counts (0 where none), ``has_tokens`` (1 when any is
    not 0: a usage of no tokens costs nothing) and the prompt less its cache reads."""
    counts = {
        f"t_{name}": Coalesce(Cast(KT(f"{column}__{name}"), BigIntegerField()), 0)
        for name in _TOKEN_FIELDS
    }
    rows = rows.order_by().annotate(**counts)
    any_tokens = (
        F("t_prompt_tokens")
        + F("t_completion_tokens")
        + F("t_cache_creation_tokens")
        + F("t_cache_read_tokens")
    )
    return rows.annotate(
        has_tokens=Case(When(GreaterThan(any_tokens, 0), then=1), default=0),
        t_billable=Case(
            When(t_prompt_tokens__gt=F("t_cache_read_tokens"),
                 then=F("t_prompt_tokens") - F("t_cache_read_tokens")),
            default=0,
        ),
    )  # fmt: skip


def _sums(row: dict[str, Any]) -> UsageSums:
    return UsageSums(
        prompt=row["prompt"] or 0,
        completion=row["completion"] or 0,
        cache_write=row["cache_write"] or 0,
        cache_read=row["cache_read"] or 0,
        billable_prompt=row["billable_prompt"] or 0,
        rows=row["rows"],
    )


def _judge_group_cost(row: dict[str, Any], table: PriceTable) -> Cost:
    """One run's judge grades by one judge model, with or without tokens, priced as
    ``judge_cost`` prices each: tokens at the model's price; else the cost the judge library
    recorded; else unknown (a model without a price) or nothing (no tokens, nothing recorded)."""
    model = row["model_used"]
    if not row["has_tokens"]:
        return Cost(row["recorded"], counted=True) if row["nonzero"] else Cost()
    if table.price_of(model) is not None:
        return summed_usage_cost(_sums(row), model, table)
    recorded = row["rows"] - row["unrecorded"]
    cost = Cost(row["recorded"], counted=True) if recorded else Cost()
    if row["unrecorded"]:
        cost = cost + Cost(unpriced=(model or "unknown model",), counted=True)
    return cost


def turn_row_cost(turn: TurnRow, model: str | None, table: PriceTable) -> SplitCost:
    """One stored turn (its metrics prefetched)."""
    return SplitCost(
        usage_cost(turn.token_usage, model, table),
        total(
            judge_cost(m.judge_usage, m.model_used, m.judge_cost_usd, table)
            for m in turn.metrics.all()
        ),
    )


def case_row_cost(turns: Iterable[TurnRow], model: str | None, table: PriceTable) -> SplitCost:
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
    "run_prices_warn",
    "runs_costs",
    "turn_row_cost",
]
