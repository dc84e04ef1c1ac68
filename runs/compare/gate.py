"""The CI gate: compare a run with its baseline and say whether it may merge.

``gate_run`` and ``gate_baseline`` find the two runs (a ``GateError`` when they cannot);
``gate_evaluate`` compares them with the compare page's code and checks the thresholds, and
returns a ``GateResult`` (``runs.core.writers.gate_markdown``) with its reasons and a Markdown
summary fit for a pull-request comment.

The pass rate, the case and turn counts and the metric summaries (counted per turn) are the
runs' stored summaries (what their run pages show); regressions and fixes are counted over the
selected kinds only, and only the metrics of those kinds are listed (every kind by default).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from django.conf import settings

from runs.compare.reads.comparison import (
    FINISHED,
    Baseline,
    Comparison,
    baseline_choose,
    compare_runs,
    runs_for_compare,
)
from runs.core.attributes import of_attributes
from runs.core.comparison.matrix import REGRESSION, Row, change_of
from runs.core.stats.significance import NO_EVIDENCE, SIGNIFICANTLY_WORSE
from runs.core.verdicts.kinds import kind_order, kinds_parse
from runs.core.verdicts.numbers import (
    format_rate,
    format_score,
    format_score_change,
    ordinal,
    pass_rate_of,
)
from runs.core.verdicts.outcomes import BAD, Outcome
from runs.core.verdicts.summary import MetricSummary, RunSummary
from runs.core.writers.gate_markdown import (
    GateOptions,
    GateResult,
    GateRun,
    GateSignificance,
    MetricChange,
    NoisyTurn,
    RegressedCase,
    TriagedTurn,
    gate_markdown,
    plural,
)
from runs.models import Run
from runs.selectors.costs import run_cost
from runs.selectors.review_marks import Failure, run_failures
from runs.selectors.reviews import project_categories
from runs.selectors.significance import runs_significance, same_commit_runs, turn_key_parse

PARENT_COMMIT = "parent-commit"
LATEST = "latest:"
MAX_ID = 2**63 - 1  # beyond it an id is no row's (and would overflow the database's integer)


class GateError(Exception):
    """Input the gate cannot work with: ``status`` 404 (no such run) or 422 (anything else)."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


# --- input ------------------------------------------------------------------------------------


def gate_run(run_id: int) -> Run:
    """The run to gate: it must exist and have finished."""
    found = runs_for_compare([run_id]) if 0 < run_id <= MAX_ID else []
    if not found:
        raise GateError(f"no run #{run_id}", status=404)
    run = found[0]
    if run.status in Run.ACTIVE:
        raise GateError(f"run #{run.pk} is still {run.status}: gate it once it has finished")
    return run


def gate_baseline(run: Run, spec: str | int) -> Baseline:
    """The baseline named by ``spec``: a run id, ``parent-commit`` (the compare page's rule) or
    ``latest:<branch>`` (the latest finished run of that branch of the run's project)."""
    rule, value = baseline_spec_parse(spec)
    if rule == "id":
        return _baseline_by_id(run, int(value))
    if rule == PARENT_COMMIT:
        return _baseline_by_rule(run)
    return _baseline_latest(run, value)


def baseline_spec_parse(spec: str | int) -> tuple[str, str]:
    """("id", "12"), ("parent-commit", "") or ("latest", branch); else a ``GateError``."""
    text = str(spec).strip()
    # ASCII digits: int() reads "٣" as 3 and cannot read "²", which isdigit() (nor a number
    # of thousands of digits); beyond 64 bits it is no baseline run (_baseline_by_id).
    if text.isascii() and text.isdigit() and len(text) <= 100 and int(text) > 0:
        return "id", text
    if text == PARENT_COMMIT:
        return PARENT_COMMIT, ""
    branch = text.removeprefix(LATEST).strip()
    if text.startswith(LATEST) and branch:
        return "latest", branch
    raise GateError(f"baseline {text!r}: use a run id, {PARENT_COMMIT!r} or 'latest:<branch>'")


def _baseline_by_id(run: Run, baseline_id: int) -> Baseline:
    if baseline_id == run.pk:
        raise GateError(f"run #{run.pk} cannot be its own baseline")
    found = runs_for_compare([baseline_id]) if baseline_id <= MAX_ID else []
    if not found:
        raise GateError(f"no baseline run #{baseline_id}", status=404)
    if found[0].status in Run.ACTIVE:
        raise GateError(f"baseline run #{baseline_id} is still {found[0].status}")
    return Baseline(found[0], "chosen by you", added=True)


def _baseline_by_rule(run: Run) -> Baseline:
    baseline = baseline_choose([run])
    if baseline is None:
        branch = run.git_branch or "no branch"
        raise GateError(
            f"no baseline for run #{run.pk}: the parent-commit rule found no finished run of "
            f"the parent commit, no earlier finished run of {branch} and no run before it in "
            f"{_project_name(run)}; name the baseline: a run id or latest:<branch>"
        )
    return baseline


def _baseline_latest(run: Run, branch: str) -> Baseline:
    runs = Run.objects.filter(git_branch=branch, status__in=FINISHED).exclude(pk=run.pk)
    if run.project_id:
        runs = runs.filter(project_id=run.project_id)
    else:
        runs = runs.filter(project__isnull=True, agent_name=run.agent_name)
    latest = runs.order_by("-created_at", "-id").values_list("pk", flat=True).first()
    if latest is None:
        raise GateError(
            f"no baseline for run #{run.pk}: latest:{branch} found no finished run of branch "
            f"{branch} in {_project_name(run)} other than run #{run.pk}"
        )
    return Baseline(
        runs_for_compare([latest])[0], f"the latest finished run of {branch}", added=True
    )


def _project_name(run: Run) -> str:
    return f"project {run.project.name}" if run.project else f"agent {run.agent_name}"


def gate_kinds(text: str) -> tuple[str, ...]:
    """``standard,code`` -> ("standard", "code") (``runs.core.verdicts.kinds.kinds_parse``); an
    unknown kind is a ``GateError``."""
    try:
        return kinds_parse(text)
    except ValueError as exc:
        raise GateError(str(exc)) from None


def metric_drops_parse(values: list[str]) -> dict[str, float]:
    """``["answer_numeric=0.05"]`` -> {"answer_numeric": 0.05}; anything else is a ``GateError``."""
    limits: dict[str, float] = {}
    for value in values:
        name, _, limit = value.partition("=")
        try:
            number = float(limit)
        except ValueError:
            number = -1.0
        if not name.strip() or not number >= 0 or number == float("inf"):
            raise GateError(f"--max-metric-drop {value!r}: use NAME=DROP, e.g. rouge=0.05")
        limits[name.strip()] = number
    return limits


def public_url(fallback: str = "") -> str:
    """The dashboard's base URL for links: the setting ``HOLODECK_PUBLIC_URL`` (from the
    environment, else the first ``CSRF_TRUSTED_ORIGINS`` entry), else ``fallback`` ("": none,
    the links are paths)."""
    return (settings.HOLODECK_PUBLIC_URL or fallback).rstrip("/")


def ignore_triaged_parse(texts: Sequence[str], *, commas: bool = True) -> tuple[str, ...]:
    """``["ground truth wrong,grader wrong"]`` -> the category names, spaces tidied, in order
    (``commas=False``: each text one name, as the API's list gives them)."""
    names = [part for text in texts for part in (text.split(",") if commas else [text])]
    tidied = (" ".join(name.split()) for name in names)
    return tuple(dict.fromkeys(name for name in tidied if name))


# --- the verdict ------------------------------------------------------------------------------


def gate_evaluate(run: Run, baseline: Baseline, options: GateOptions) -> GateResult:
    """Compare ``run`` with ``baseline`` and check ``options``' thresholds (3 queries, 6 when
    a run has no stored summary)."""
    before = baseline.run
    comparison = compare_runs([before, run], before, list(options.kinds))
    regressions, fixes = comparison.matrix.totals(run.pk)
    base_url = options.base_url.rstrip("/")
    headlines = {headline.run.pk: headline for headline in comparison.headlines}
    changes = _metric_changes(
        headlines[before.pk].metrics, headlines[run.pk].metrics, options.max_metric_drop
    )
    result = GateResult(
        passed=False,
        reasons=[],
        run=_gate_run(run, headlines[run.pk].summary),
        baseline=_gate_run(before, headlines[before.pk].summary),
        baseline_rule=baseline.rule,
        regressions=regressions,
        fixes=fixes,
        regressed=_regressed_cases(comparison, run, base_url, options.kinds),
        metric_changes=changes,
        compare_url=_compare_url(base_url, before, run, options.kinds),
        significance=(
            _significance(comparison, run, options) if options.significant_only else None
        ),
    )
    if options.ignore_triaged:
        _triage_apply(result, run, _CaseLink(base_url, before.pk, run.pk, options.kinds), options)
    result.reasons = _reasons(result, options)
    result.passed = not result.reasons
    result.markdown = gate_markdown(result, options)
    return result


def _significance(comparison: Comparison, run: Run, options: GateOptions) -> GateSignificance:
    """The turns' changes tested over the repetitions of both runs and the other finished runs
    of their commits (``runs.selectors.significance``): how many, and which."""
    before = comparison.baseline
    found = runs_significance(same_commit_runs(before), same_commit_runs(run), alpha=options.alpha)
    rate = found.pass_rate
    order = {row.key: position for position, row in enumerate(comparison.matrix.rows)}
    units = sorted(
        ((turn_key_parse(key), unit) for key, unit in found.turns.units.items()),
        key=lambda item: (order.get(item[0][0], len(order)), item[0][0], item[0][1]),
    )
    link = _CaseLink(options.base_url.rstrip("/"), before.pk, run.pk, options.kinds)
    worse: dict[str, list[int]] = {}
    noise: list[NoisyTurn] = []
    for (key, turn), unit in units:
        if unit.classification == SIGNIFICANTLY_WORSE:
            worse.setdefault(key, []).append(turn)
        elif unit.changed and unit.classification == NO_EVIDENCE:
            noise.append(
                NoisyTurn(
                    key,
                    turn,
                    unit.passed_before,
                    unit.n_before,
                    unit.passed_after,
                    unit.n_after,
                    link.url(key, turn),
                )
            )
    return GateSignificance(
        worse=found.turns.worse,
        better=found.turns.better,
        noise=found.turns.noise,
        text=found.turns.text,
        difference=rate.difference,
        ci_low=rate.ci_low,
        ci_high=rate.ci_high,
        confidence=rate.confidence,
        before_runs=found.before_runs,
        after_runs=found.after_runs,
        regressed=tuple(
            RegressedCase(key, turns, link.url(key, turns[0])) for key, turns in worse.items()
        ),
        noise_turns=tuple(noise),
    )


def _gate_run(run: Run, summary: RunSummary) -> GateRun:
    priced = run_cost(run=run)
    return of_attributes(GateRun, run, summary=summary, cost=priced.cost, cost_error=priced.error)


def _reasons(result: GateResult, options: GateOptions) -> list[str]:
    reasons = []
    if result.run.status in (Run.Status.ERROR, Run.Status.CANCELLED):
        reasons.append(f"run #{result.run.id} ended {result.run.status}")
    found = result.significance
    if found is not None:  # --significant-only: the regressions within noise do not count
        if found.worse > options.max_regressions:
            reasons.append(
                f"{plural(found.worse, 'significantly regressed turn')} "
                f"(at most {options.max_regressions} allowed; {found.noise} "
                f"change{'' if found.noise == 1 else 's'} within noise)"
            )
    elif (counted := result.regressions - len(result.triaged)) > options.max_regressions:
        triaged = f"; {len(result.triaged)} more triaged, ignored" if result.triaged else ""
        reasons.append(
            f"{plural(counted, 'regressed turn')} "
            f"(at most {options.max_regressions} allowed{triaged})"
        )
    if options.min_pass_rate is not None:
        minimum = format_rate(options.min_pass_rate)
        if result.gated_pass_rate is None:
            reasons.append(
                f"run #{result.run.id} has no pass rate (no case was graded: none passed, "
                f"failed or errored), so it cannot reach the minimum pass rate {minimum}"
            )
        elif result.gated_pass_rate < options.min_pass_rate:
            without = " (without the triaged cases)" if result.triaged_cases else ""
            reasons.append(
                f"pass rate {format_rate(result.gated_pass_rate)}{without} is below {minimum}"
            )
    for change in result.metric_changes:
        if change.over_limit:
            reasons.append(_drop_reason(change))
    return reasons


def _drop_reason(change: MetricChange) -> str:
    if change.after is None:
        return f"{change.name} has no average in the run (it was {format_score(change.before)})"
    return (
        f"{change.name} dropped by {format_score_change(change.drop).removeprefix('+')} "
        f"({format_score(change.before)} → {format_score(change.after)}; "
        f"at most {change.limit:g} allowed)"
    )


def _regressed_cases(
    comparison: Comparison, run: Run, base_url: str, kinds: tuple[str, ...]
) -> list[RegressedCase]:
    link = _CaseLink(base_url, comparison.baseline.pk, run.pk, kinds)
    regressed = []
    for row in comparison.matrix.rows:
        turns = _regressed_turns(row, link.base_id, run.pk)
        if turns:
            regressed.append(RegressedCase(row.key, turns, link.url(row.key, turns[0])))
    return regressed


_Triaged = Callable[[str, int], TriagedTurn | None]


@dataclass(frozen=True)
class _CaseLink:
    """Links to the side-by-side page of a case of the two runs, at one of its turns."""

    base_url: str
    base_id: int
    run_id: int
    kinds: tuple[str, ...]

    def url(self, key: str, turn: int) -> str:
        query = {"runs": f"{self.base_id},{self.run_id}", "key": key}
        if self.kinds:
            query["kinds"] = ",".join(self.kinds)
        return f"{self.base_url}/compare/case/?{urlencode(query)}#turn-{ordinal(turn)}"


def _regressed_turns(row: Row, base_id: int, run_id: int) -> list[int]:
    return [
        index
        for index, line in enumerate(row.turns)
        if change_of(line.get(base_id, Outcome.ABSENT), line.get(run_id, Outcome.ABSENT))
        == REGRESSION
    ]


def _metric_changes(
    before: list[MetricSummary], after: list[MetricSummary], limits: dict[str, float]
) -> list[MetricChange]:
    """Every metric of either run's summary (of the selected kinds), by kind and name, with the
    run's per-turn counts and the drop allowed for it if any."""
    old = {(metric.kind, metric.name): metric for metric in before}
    new = {(metric.kind, metric.name): metric for metric in after}
    unknown = [name for name in limits if not any(key[1] == name for key in (*old, *new))]
    if unknown:
        raise GateError(f"--max-metric-drop: neither run has a metric {unknown[0]!r}")
    return [
        MetricChange(
            name=name,
            kind=kind,
            before=old[(kind, name)].average if (kind, name) in old else None,
            after=new[(kind, name)].average if (kind, name) in new else None,
            limit=limits.get(name),
            turns=new.get((kind, name)),
        )
        for kind, name in sorted({*old, *new}, key=lambda key: (kind_order(key[0]), key[1]))
    ]


def _compare_url(base_url: str, baseline: Run, run: Run, kinds: tuple[str, ...]) -> str:
    query = {"runs": f"{baseline.pk},{run.pk}", "baseline": str(baseline.pk)}
    if kinds:
        query["kinds"] = ",".join(kinds)
    return f"{base_url}/compare/?{urlencode(query, safe=',')}"


# --- --ignore-triaged ---------------------------------------------------------------------------


def _triage_apply(result: GateResult, run: Run, link: _CaseLink, options: GateOptions) -> None:
    """Leave out of the verdict the regressed turns people triaged into ``ignore_triaged``
    (their own review, or a known one carried here: ``runs.selectors.review_marks``), and from
    the pass rate the failing cases whose every failure was triaged so (two to four queries)."""
    ignored = _categories_known(run, options.ignore_triaged)
    failures = [f for f in run_failures(run=run) if Outcome.of(f.outcome) in BAD]
    at: dict[tuple[str, int], list[Failure]] = {}
    for failure in failures:
        at.setdefault((failure.case_key, failure.turn_index), []).append(failure)

    def triaged(key: str, turn: int) -> TriagedTurn | None:
        found = at.get((key, turn), [])
        marks = [f.mark for f in found if f.mark and f.mark.category in ignored]
        if not found or len(marks) < len(found):
            return None
        mark = marks[0]
        return TriagedTurn(key, turn, mark.category or "", mark.by, mark.note,
                           mark.carried_from_run, link.url(key, turn))  # fmt: skip

    result.regressed, left_out = _without_triaged(result.regressed, triaged, link)
    found = result.significance
    if found is not None:
        kept, significant = _without_triaged(found.regressed, triaged, link)
        result.significance = replace(
            found, regressed=tuple(kept), worse=found.worse - len(significant)
        )
        left_out += [turn for turn in significant if turn not in left_out]
    result.triaged = left_out
    cases = _triaged_cases(failures, ignored)
    summary = result.run.summary.cases
    result.triaged_cases = cases
    result.triaged_pass_rate = pass_rate_of(summary.passed, summary.graded - cases)


def _categories_known(run: Run, names: Sequence[str]) -> set[str]:
    """The names, each a triage category of the run's project; a ``GateError`` otherwise (a
    typo would ignore nothing, silently)."""
    if run.project_id is None:
        raise GateError(f"--ignore-triaged: run #{run.pk} belongs to no project, so none of its "
                        "failures was triaged")  # fmt: skip
    known = {category.name for category in project_categories(project_id=run.project_id)}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise GateError(
            f"--ignore-triaged: no triage category {unknown[0]!r} in {_project_name(run)} "
            f"(its categories: {', '.join(sorted(known))})"
        )
    return set(names)


def _without_triaged(
    cases: Sequence[RegressedCase], triaged: _Triaged, link: _CaseLink
) -> tuple[list[RegressedCase], list[TriagedTurn]]:
    """The regressed cases without their triaged turns (a case with none left goes), and the
    turns left out."""
    kept: list[RegressedCase] = []
    left_out: list[TriagedTurn] = []
    for case in cases:
        marks = {turn: triaged(case.key, turn) for turn in case.turns}
        left_out += [mark for mark in marks.values() if mark is not None]
        turns = [turn for turn, mark in marks.items() if mark is None]
        if turns == case.turns:
            kept.append(case)
        elif turns:
            kept.append(replace(case, turns=turns, url=link.url(case.key, turns[0])))
    return kept, left_out


def _triaged_cases(failures: Sequence[Failure], ignored: set[str]) -> int:
    """The failing cases (each repetition its own) whose every failed or errored turn was
    triaged into an ignored category."""
    cases: dict[int, bool] = {}
    for failure in failures:
        if Outcome.of(failure.case_outcome) not in BAD:
            continue
        triaged = failure.mark is not None and failure.mark.category in ignored
        cases[failure.case_id] = cases.get(failure.case_id, True) and triaged
    return sum(cases.values())
