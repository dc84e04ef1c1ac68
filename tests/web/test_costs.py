"""Cost on the run page, the case page, the exports, compare's headline and the gate."""

from __future__ import annotations

import logging
import re
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from runs.models import AgentProject, CaseRow, MetricRow, Run
from runs.recorder import run_finish
from runs.services.launch import run_create
from runs.services.tokens import token_create
from tests.web.factories import RunSpec, build_run, make_user
from tests.web.services_helpers import example_project

pytestmark = pytest.mark.django_db

# USD per million tokens: a factory turn's 100 + 20 agent tokens cost $0.12, a judge's 1,000
# prompt tokens $0.01.
PRICES = """
models:
  agent-model: {input: 1000, output: 1000}
  judge-model: {input: 10, output: 10}
"""
JUDGE_USAGE = {"prompt_tokens": 1000, "completion_tokens": 0, "total_tokens": 1000}


@pytest.fixture(autouse=True)
def price_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(PRICES)
    monkeypatch.setenv("HOLODECK_PRICES", str(path))
    return path


def priced_run(project: AgentProject, judge: str = "judge-model", **fields: object) -> Run:
    """Two cases of two turns, all passing: agent $0.48, judges $0.04 (per case: $0.24 and
    $0.02, per turn $0.12 and $0.01)."""
    run = build_run(
        project,
        RunSpec(cases=2, turns=2, failing=(), status=Run.Status.PASSED),
        config_snapshot={"model": {"provider": "openai", "name": "agent-model"}},
        **fields,
    )
    MetricRow.objects.filter(run=run, metric_name="politeness").update(
        judge_usage=JUDGE_USAGE, model_used=judge
    )
    # A case's usage is its turns' sum, as the recorder writes it.
    CaseRow.objects.filter(run=run).update(
        token_usage={"prompt_tokens": 200, "completion_tokens": 40, "total_tokens": 240}
    )
    return run


def test_the_run_page_shows_the_runs_cost_agent_and_judge_apart(
    viewer_client: Client, project: AgentProject
) -> None:
    run = priced_run(project)
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert '<span class="tile-value" data-cost="total">$0.5200</span>' in html
    assert "agent $0.4800 · judge $0.0400" in html


def test_a_judge_model_without_a_price_reads_unknown_price_never_zero(
    viewer_client: Client, project: AgentProject
) -> None:
    run = priced_run(project, judge="mystery-judge")
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert "$0.4800 + unknown price (mystery-judge)" in html
    assert "judge unknown price (mystery-judge)" in html


def test_a_run_whose_model_has_no_price_shows_a_small_note_not_a_cost_tile(
    viewer_client: Client, project: AgentProject
) -> None:
    run = priced_run(project)
    Run.objects.filter(pk=run.pk).update(
        config_snapshot={"model": {"provider": "openai", "name": "mystery-agent"}}
    )
    MetricRow.objects.filter(run=run).update(judge_usage=None, judge_cost_usd=None)
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert (
        '<span class="small cost-unknown" data-cost="unknown" title="no price for mystery-agent:'
        in html
    )
    assert ">price unknown (mystery-agent)</span>" in html
    assert 'data-cost="total"' not in html  # no large tile of "unknown price"
    assert '<span class="tile-label">Cost</span>' not in html


def test_a_partly_priced_run_shows_its_priced_part_as_a_lower_bound(
    viewer_client: Client, project: AgentProject
) -> None:
    run = priced_run(project, judge="mystery-judge")
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert (
        '<span class="tile-value" data-cost="total" title="$0.4800 + unknown price'
        ' (mystery-judge): at least this much">≥ $0.4800</span>'
    ) in html


def test_small_costs_of_a_run_its_cases_and_turns_visibly_add_up(
    viewer_client: Client, project: AgentProject, price_file: Path
) -> None:
    """A run of $0.000288 whose cases read $0.000144 and turns $0.000072, not $0.0003 beside
    $0.0001 and $0.0000."""
    price_file.write_text(PRICES.replace("1000, output: 1000", "0.6, output: 0.6"))
    run = priced_run(project)
    MetricRow.objects.filter(run=run).update(judge_usage=None)
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert '<span class="tile-value" data-cost="total">$0.000288</span>' in html
    case = CaseRow.objects.get(run=run, index=0)
    page = viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).text
    assert "cost $0.000144 (agent $0.000144 · judge —)" in page
    assert "cost $0.0000720</span>" in page
    assert "$0.0000<" not in page


def test_a_free_models_cost_reads_0_dollars_on_the_pages_and_in_the_export(
    viewer_client: Client, project: AgentProject, price_file: Path
) -> None:
    price_file.write_text(
        "models:\n  agent-model: {input: 0, output: 0}\n  judge-model: {input: 0, output: 0}\n"
    )
    run = priced_run(project)
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert '<span class="tile-value" data-cost="total">$0</span>' in html
    assert "$0.0000" not in html
    markdown = viewer_client.get(reverse("run_export", args=[run.pk]), {"format": "markdown"})
    assert "- **Cost**: $0 (agent $0 · judge $0)" in markdown.content.decode()


def test_the_case_page_and_the_markdown_export_write_a_small_cost_alike(
    viewer_client: Client, project: AgentProject, price_file: Path
) -> None:
    """A case of 240 agent tokens at $0.075 per million: $0.0000180 in both, never $0.000018
    in one beside $0.0000182 in the other."""
    price_file.write_text(PRICES.replace("1000, output: 1000", "0.075, output: 0.075"))
    run = priced_run(project)
    MetricRow.objects.filter(run=run).update(judge_usage=None)
    case = CaseRow.objects.get(run=run, index=0)
    page = viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).text
    assert "cost $0.0000180 (agent $0.0000180 · judge —)" in page
    assert "cost $0.00000900</span>" in page  # each of its turns
    url = reverse("run_export", args=[run.pk])
    markdown = viewer_client.get(url, {"format": "markdown"}).content.decode()
    assert "**Cost**: $0.0000180 (agent $0.0000180 · judge —)" in markdown


def test_a_model_without_a_price_is_said_once_in_a_cases_cost(
    viewer_client: Client, project: AgentProject
) -> None:
    run = priced_run(project)
    Run.objects.filter(pk=run.pk).update(
        config_snapshot={"model": {"provider": "openai", "name": "mystery-agent"}}
    )
    MetricRow.objects.filter(run=run).update(judge_usage=None, judge_cost_usd=None)
    case = CaseRow.objects.get(run=run, index=0)
    said = "unknown: no price for mystery-agent (agent); judge —"
    page = viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).text
    line = re.search(r'<span class="case-cost">(.*?)</span>', page)
    assert line is not None and line.group(1) == f"cost {said}"
    url = reverse("run_export", args=[run.pk])
    markdown = viewer_client.get(url, {"format": "markdown"}).content.decode()
    assert f"**Cost**: {said}\n" in markdown
    assert "unknown price (mystery-agent) (agent" not in markdown


def test_the_case_page_shows_each_turns_cost_and_the_cases_time_breakdown(
    viewer_client: Client, project: AgentProject
) -> None:
    run = priced_run(project)
    case = CaseRow.objects.get(run=run, index=0)
    html = viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).text
    assert "cost $0.2600 (agent $0.2400 · judge $0.0200)" in html
    assert 'class="turn-cost"' in html and "cost $0.1300</span>" in html
    assert "(judge 850 ms)" in html  # the judge's time, where a judge ran


def test_a_bad_price_file_is_named_on_the_page_not_a_traceback(
    viewer_client: Client, project: AgentProject, price_file: Path
) -> None:
    run = priced_run(project)
    price_file.write_text("models:\n  agent-model: {input: lots, output: 1}\n")
    response = viewer_client.get(reverse("run_detail", args=[run.pk]))
    assert response.status_code == 200
    assert f"price file {price_file}: models.agent-model.input" in response.text


def test_markdown_and_junit_exports_carry_the_cost(
    viewer_client: Client, project: AgentProject
) -> None:
    run = priced_run(project)
    url = reverse("run_export", args=[run.pk])
    markdown = viewer_client.get(url, {"format": "markdown"}).content.decode()
    assert "- **Cost**: $0.5200 (agent $0.4800 · judge $0.0400)" in markdown
    assert "**Cost**: $0.2600 (agent $0.2400 · judge $0.0200)" in markdown
    junit = viewer_client.get(url, {"format": "junit"}).content.decode()
    assert '<property name="cost" value="$0.5200" />' in junit
    assert '<property name="cost.judge" value="$0.0200" />' in junit
    result_file = viewer_client.get(url, {"format": "json"}).content.decode()
    assert '"cost"' not in result_file  # the HoloDeck file keeps HoloDeck's shape


def test_compare_and_the_gate_show_cost_and_its_change(
    viewer_client: Client, project: AgentProject
) -> None:
    base = priced_run(project)
    run = priced_run(project, judge="mystery-judge")
    html = viewer_client.get(reverse("compare"), {"runs": f"{base.pk},{run.pk}"}).text
    assert "agent cost" in html and "$0.5200" in html
    assert "unknown price (mystery-judge)" in html
    out = StringIO()
    with pytest.raises(SystemExit):
        call_command("gate", "--run", run.pk, "--baseline", base.pk, stdout=out)
    said = out.getvalue()
    assert "| agent cost | $0.4800 | $0.4800 | +$0 |" in said
    assert "| judge cost | unknown price (mystery-judge) | $0.0400 |  |" in said


@pytest.mark.django_db(transaction=True)
def test_a_recorded_cases_time_is_its_session_wait_turns_and_grading(
    tmp_path: Path, viewer_client: Client
) -> None:
    """From the engine through the recorder to the case page, the parts add up."""
    project = example_project(tmp_path)
    with pytest.raises(SystemExit):
        call_command("run_agent", str(project.agent_path), "--quiet", "--no-results-file")
    run = Run.objects.filter(source=Run.Source.CLI).latest("pk")
    for case in CaseRow.objects.filter(run=run).prefetch_related("turns__metrics"):
        turns = list(case.turns.all())
        agent = sum(turn.execution_time_ms for turn in turns)
        grading = sum(m.evaluation_time_ms or 0 for turn in turns for m in turn.metrics.all())
        assert 0 <= case.execution_time_ms - agent - grading <= (case.session_start_ms or 0)
    case = CaseRow.objects.filter(run=run).first()
    assert case is not None
    html = viewer_client.get(reverse("case_detail", args=[run.pk, case.pk])).text
    assert " = session start " in html and " + grading " in html


def test_the_compare_api_gives_each_runs_cost_with_unpriced_models_named(
    client: Client, project: AgentProject
) -> None:
    base = priced_run(project)
    run = priced_run(project, judge="mystery-judge")
    _, secret = token_create(user=make_user("api"), name="costs")
    body = client.get(
        "/api/v1/compare",
        {"runs": [base.pk, run.pk], "baseline": base.pk},
        headers={"Authorization": f"Bearer {secret}"},
    ).json()
    first, second = (headline["cost"] for headline in body["headline"])
    assert first["total"]["usd"] == pytest.approx(0.52)
    assert second["agent"]["usd"] == pytest.approx(0.48)
    assert second["judge"] == {"usd": None, "priced_usd": 0.0, "unpriced": ["mystery-judge"]}


def test_a_running_runs_duration_is_its_time_so_far_on_the_page_and_the_poll(
    viewer_client: Client, project: AgentProject
) -> None:
    run = build_run(project, RunSpec(cases=2, turns=1, status=Run.Status.RUNNING, done=1))
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    # build_run starts it a minute ago; its recorded duration (61.5 s) is not shown yet.
    assert re.search(r'<span class="tile-value" data-duration="elapsed">1m 0\ds</span>', html)
    polled = viewer_client.get(
        reverse("run_progress", args=[run.pk]), headers={"HX-Request": "true"}
    )
    assert re.search(r'data-duration="elapsed">1m 0\ds<', polled.text)


def test_a_runs_cost_summed_by_the_database_is_the_sum_of_each_rows_cost(
    project: AgentProject, price_file: Path
) -> None:
    """Every rule of the per-row pricing holds in the sums: cached tokens inside the prompt,
    usages of no tokens, a judge model without a price whose grades recorded a cost or not."""
    from runs.core.pricing.prices import judge_cost, price_table, total, usage_cost
    from runs.selectors.costs import runs_costs

    price_file.write_text(
        PRICES + "  cached-model: {input: 2, output: 8, cache_read: 0.5, cached_in_prompt: true}\n"
    )
    run = priced_run(project)
    Run.objects.filter(pk=run.pk).update(
        config_snapshot={"model": {"provider": "openai", "name": "cached-model"}}
    )
    usages = [
        dict(prompt_tokens=500, completion_tokens=50, total_tokens=550, cache_read_tokens=400),
        dict(prompt_tokens=10, completion_tokens=5, total_tokens=15, cache_read_tokens=30),
    ]
    for case, usage in zip(run.cases.order_by("index"), usages, strict=True):
        CaseRow.objects.filter(pk=case.pk).update(token_usage=usage)
    metrics = list(MetricRow.objects.filter(run=run).order_by("pk"))
    shapes = [
        (JUDGE_USAGE, "judge-model", None),
        (JUDGE_USAGE, "unpriced-judge", 0.25),
        (JUDGE_USAGE, "unpriced-judge", None),
        ({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}, "judge-model", 0.5),
        (None, "native-judge", 0.75),
        (None, "native-judge", 0.0),
    ]
    for metric, (usage, model, usd) in zip(metrics, shapes, strict=False):
        MetricRow.objects.filter(pk=metric.pk).update(
            judge_usage=usage, model_used=model, judge_cost_usd=usd
        )
    table = price_table()
    agent = total(
        usage_cost(usage, "cached-model", table)
        for usage in CaseRow.objects.filter(run=run).values_list("token_usage", flat=True)
    )
    judge = total(
        judge_cost(usage, model, usd, table)
        for usage, model, usd in MetricRow.objects.filter(run=run).values_list(
            "judge_usage", "model_used", "judge_cost_usd"
        )
    )
    found = runs_costs(run_ids=[run.pk])[run.pk].cost
    assert found is not None
    for summed, row_by_row in ((found.agent, agent), (found.judge, judge)):
        assert summed.usd == pytest.approx(row_by_row.usd, rel=1e-12)
        assert set(summed.unpriced) == set(row_by_row.unpriced)
        assert summed.counted == row_by_row.counted
    assert found.judge.unpriced == ("unpriced-judge",)


def test_a_finished_runs_cost_is_priced_once_and_again_when_the_prices_change(
    project: AgentProject, price_file: Path, django_assert_num_queries: Any
) -> None:
    import os

    from runs.selectors.costs import run_cost

    run = priced_run(project)
    first = run_cost(run=run)
    with django_assert_num_queries(0):
        assert run_cost(run=run) == first
    price_file.write_text(PRICES.replace("1000, output: 1000", "2000, output: 2000"))
    stat = price_file.stat()
    os.utime(price_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    again = run_cost(run=run)
    assert again.cost is not None and first.cost is not None
    assert again.cost.agent.usd == pytest.approx(first.cost.agent.usd * 2)


def test_a_partly_priced_run_notes_which_model_has_no_price_and_names_its_prices(
    viewer_client: Client, project: AgentProject, price_file: Path
) -> None:
    run = priced_run(project, judge="mystery-judge")
    html = viewer_client.get(reverse("run_detail", args=[run.pk])).text
    assert (
        '<span class="small cost-unknown" data-cost="unpriced">no price for mystery-judge:'
        " its part of the cost is unknown</span>"
    ) in html
    assert f'<div class="tile" title="prices: {price_file} over built-in defaults' in html


def test_a_fully_priced_run_has_no_unpriced_note(
    viewer_client: Client, project: AgentProject
) -> None:
    html = viewer_client.get(reverse("run_detail", args=[priced_run(project).pk])).text
    assert 'data-cost="unpriced"' not in html


def running(run: Run) -> Run:
    """``run`` as if its last case had just ended: still running, to be finished."""
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, finished_at=None)
    return run


def unpriced_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == "unpriced_models"]


def test_a_run_finishing_with_a_model_without_a_price_logs_a_warning_naming_it(
    project: AgentProject, caplog: pytest.LogCaptureFixture
) -> None:
    run = running(priced_run(project, judge="mystery-judge"))
    with caplog.at_level(logging.WARNING, logger="runs.core.pricing.prices"):
        run_finish(run.pk)
    (record,) = unpriced_warnings(caplog)
    assert record.levelno == logging.WARNING
    assert record.models == ["mystery-judge"]  # type: ignore[attr-defined]
    assert record.run_id == run.pk  # type: ignore[attr-defined]
    assert record.getMessage().startswith(
        f"run {run.pk} finished with no price for mystery-judge: its cost is unknown (prices: "
    )


def test_a_run_finishing_with_every_model_priced_logs_no_price_warning(
    project: AgentProject, caplog: pytest.LogCaptureFixture
) -> None:
    run = running(priced_run(project))
    with caplog.at_level(logging.WARNING, logger="runs.core.pricing.prices"):
        run_finish(run.pk)
    assert unpriced_warnings(caplog) == []


def test_a_run_opened_with_an_agent_model_without_a_price_logs_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = example_project(tmp_path)  # its scripted model has no price
    with caplog.at_level(logging.WARNING, logger="runs.core.pricing.prices"):
        run = run_create(project=project)
    (record,) = unpriced_warnings(caplog)
    assert record.models == ["scripted-convfinqa"]  # type: ignore[attr-defined]
    assert f"run {run.pk} opened with no price for scripted-convfinqa" in record.getMessage()


def test_a_bad_price_file_warns_of_no_unpriced_model(
    project: AgentProject, price_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from runs.selectors.costs import run_prices_warn

    price_file.write_text("models: [")
    run = priced_run(project, judge="mystery-judge")
    with caplog.at_level(logging.WARNING, logger="runs.core.pricing.prices"):
        assert run_prices_warn(run=run, when="finished") == ()
    assert unpriced_warnings(caplog) == []
