"""What a compare reads of a finished run instead of its turns and metric rows, stored when the
run ends (``compare_store``, through ``runs.selectors.case_counts.list_counts_count``, which the
recorder calls as it stores the run's summary, ``Run.list_counts["compare"]``):

- on every case row, its compare key, its turns' verdicts as one text and their digest
  (``runs.case_columns.CompareColumns``);
- for the run, its agent time (the turns' ``execution_time_ms``), per kind of metric its
  judge time and judge cost, and a hash of its digests' counts.

A run without ``list_counts["compare"]`` (live, or ended before these were stored and not
backfilled) is compared from its rows (``runs.selectors.compare_cases``).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.db.models import (
    Case,
    CharField,
    Count,
    F,
    OuterRef,
    Q,
    StringAgg,
    Subquery,
    Sum,
    TextField,
    Value,
    When,
)
from django.db.models.functions import MD5, Cast, Coalesce, Concat, Left

from runs.core.comparison.matrix import keys_of
from runs.core.verdicts.kinds import JUDGE_KINDS, TOOLS_KIND
from runs.models import CaseRow, MetricRow, TurnRow
from runs.selectors.compare_cases import TURN_LINE, TURNS_SEPARATOR

if TYPE_CHECKING:
    from runs.models import Run

COMPARE_VERSION = 1  # the shape of ``list_counts["compare"]``; another is not read


def compare_store(*, run: Run) -> dict[str, Any]:
    """Store the compare columns of ``run``'s case rows and return its per-run values (what
    ``list_counts["compare"]`` holds): four UPDATEs over its case rows (one more where a name is
    repeated) and two aggregates."""
    compare_columns_store(run.pk)
    return compare_values(run_id=run.pk)


def compare_columns_store(run_id: int) -> None:
    """Every case row of the run: its compare key, its turns' verdicts and their digest."""
    cases = CaseRow.objects.filter(run_id=run_id)
    verdicts = (
        TurnRow.objects.filter(case_id=OuterRef("pk"))
        .order_by()
        .values("case_id")
        .annotate(text=StringAgg(TURN_LINE, Value(TURNS_SEPARATOR), order_by=_by_index()))
        .values("text")
    )
    cases.update(
        compare_key=Case(
            When(name="", then=Concat(Value("#"), Cast("index", TextField()))),
            default=F("name"),
            output_field=CharField(),
        ),
        verdicts=Coalesce(Subquery(verdicts), Value(""), output_field=TextField()),
    )
    cases.update(verdicts_digest=DIGEST)
    _repeated_keys_fix(run_id)


def _by_index() -> str | None:
    """The turns' lines in index order where the database can order an aggregate (SQLite
    cannot: its lines come in the index's order, and a reader sorts them anyway)."""
    return "index" if connection.features.supports_aggregate_order_by_clause else None


# What makes two cases decided alike: their state, verdict, verdicts by kind and turn verdicts.
DIGEST = Left(
    MD5(
        Concat(
            "status",
            Value("|"),
            "outcome",
            Value("|"),
            Coalesce(Cast("kind_outcomes", TextField()), Value(""), output_field=TextField()),
            Value("|"),
            "verdicts",
            output_field=TextField(),
        )
    ),
    16,
)


def _repeated_keys_fix(run_id: int) -> None:
    """Where two cases of the run share a name (or a name is another's ``#index``), every key
    as the matrix makes them (``keys_of``): " (2)", " (3)" in index order."""
    cases = CaseRow.objects.filter(run_id=run_id, repetition=0)
    if cases.values("compare_key").order_by().distinct().count() == cases.count():
        return
    named = list(cases.order_by("index").values_list("index", "compare_key"))
    for (index, default), key in zip(named, keys_of(k or "" for _, k in named), strict=True):
        if key != default:
            CaseRow.objects.filter(run_id=run_id, index=index).update(compare_key=key)


def compare_values(*, run_id: int) -> dict[str, Any]:
    """The run's agent time and, per kind of metric, [judge time, judge cost or None]."""
    agent = TurnRow.objects.filter(run_id=run_id).aggregate(ms=Sum("execution_time_ms"))
    judge = (
        MetricRow.objects.filter(run_id=run_id)
        .order_by()
        .values("kind")
        .annotate(
            ms=Sum("evaluation_time_ms", filter=Q(kind__in=sorted(JUDGE_KINDS))),
            cost=Sum("judge_cost_usd"),
        )
    )
    return {
        "version": COMPARE_VERSION,
        "agent_ms": agent["ms"] or 0,
        "judge": {row["kind"]: [row["ms"] or 0, row["cost"]] for row in judge},
        "digests": digests_fingerprint(run_id),
    }


def digests_fingerprint(run_id: int) -> str:
    """A hash of how many of the run's cases have each digest: a run ended again with other
    verdicts stores another (what a compare keeps per process is keyed by it)."""
    tally = (
        CaseRow.objects.filter(run_id=run_id)
        .order_by("verdicts_digest")
        .values("verdicts_digest")
        .annotate(n=Count("id"))
        .values_list("verdicts_digest", "n")
    )
    text = ";".join(f"{digest}:{n}" for digest, n in tally)
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def stored_values(run: Run) -> dict[str, Any] | None:
    """``run``'s stored compare values, None when it has none (live, or ended before)."""
    found = (run.list_counts or {}).get("compare")
    if not isinstance(found, dict) or found.get("version") != COMPARE_VERSION:
        return None
    return found


def judge_of(judge: dict[str, list[Any]], kinds: list[str]) -> tuple[int, float | None]:
    """(judge milliseconds, judge cost) over the selected kinds (every kind without a filter),
    from the stored per-kind values, as ``runs.compare.reads.comparison._judge_sums`` sums them."""
    chosen = [kind for kind in judge if not kinds or (kind in kinds and kind != TOOLS_KIND)]
    costs = [judge[kind][1] for kind in chosen if judge[kind][1] is not None]
    judge_ms = sum(judge[kind][0] for kind in chosen if kind in JUDGE_KINDS)
    return judge_ms, (sum(costs) if costs else None)
