from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from runs.core.wire.build import rollup_turns, summarize
from runs.core.wire.holodeck_io import (
    ReportFormatError,
    dump_eval_run,
    load_eval_runs,
    result_file_path,
    slugify,
    write_eval_run,
)
from runs.core.wire.models import EvalRun, EvalRunMetadata, TestReport
from tests.core.wire.factories import TIMESTAMP, metric, result, turn, usage


def _fixture_path(shared_dir: Path) -> Path:
    return shared_dir / "fixtures" / "holodeck" / "seed_runs.json"


def _fixture_documents(shared_dir: Path) -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = json.loads(_fixture_path(shared_dir).read_text("utf-8"))
    return documents


def _small_run(agent_name: str = "Support Bot") -> EvalRun:
    results = [
        result("single", metric_results=[metric("bleu", 0.5)]),
        rollup_turns(
            [
                turn(
                    0, metric_results=[metric("tone", 0.9, kind="geval")], token_usage=usage(3, 4)
                ),
                turn(1, skipped=True, passed=False, errors=["skipped"]),
            ],
            test_name="multi",
            timestamp=TIMESTAMP,
        ),
    ]
    report = TestReport(
        agent_name=agent_name,
        agent_config_path="agent.yaml",
        results=results,
        summary=summarize(results, total_duration_ms=2000),
        timestamp=TIMESTAMP,
        holodeck_version="0.1.0",
    )
    metadata = EvalRunMetadata(
        agent_config={"name": agent_name}, holodeck_version="0.1.0", cli_args=["test"]
    )
    return EvalRun(report=report, metadata=metadata)


# ------------------------------------------------------------------ loading


def test_the_fixture_list_file_loads_all_24_runs(shared_dir: Path) -> None:
    runs = load_eval_runs(_fixture_path(shared_dir))

    assert len(runs) == 24
    assert runs[0].report.agent_name == "customer-support"
    assert runs[0].metadata.prompt_version is not None


def test_every_fixture_run_survives_dump_then_load(shared_dir: Path) -> None:
    runs = load_eval_runs(_fixture_path(shared_dir))

    reloaded = [load_eval_runs(json.loads(dump_eval_run(run)))[0] for run in runs]

    assert reloaded == runs


def test_a_dump_has_holodecks_shape_with_null_fields_present(shared_dir: Path) -> None:
    document = _fixture_documents(shared_dir)[0]
    (run,) = load_eval_runs(document)

    text = dump_eval_run(run)

    assert text.startswith('{\n  "report": {\n    "agent_name": "customer-support",')
    assert '"ground_truth": null' in text
    assert '"retry_count": null' in text
    assert "\\u2014" in text  # non-ASCII escaped, as HoloDeck's json.dumps writes it
    assert "judge_usage" not in text


def test_files_without_metric_kind_get_it_inferred(shared_dir: Path) -> None:
    document = _fixture_documents(shared_dir)[0]
    for case in document["report"]["results"]:
        for entry in case["metric_results"]:
            del entry["kind"]

    (run,) = load_eval_runs(document)

    kinds = {m.metric_name: m.kind for m in run.report.results[0].metric_results}
    assert kinds["bleu"] == "standard"
    assert kinds["faithfulness"] == "rag"
    assert kinds["tone_of_voice"] == "geval"


def test_a_bare_test_report_is_wrapped_with_empty_metadata(tmp_path: Path) -> None:
    report = _small_run().report
    path = tmp_path / "report.json"
    path.write_text(report.model_dump_json(), encoding="utf-8")

    (run,) = load_eval_runs(path)

    assert run.report == report
    assert run.metadata == EvalRunMetadata(holodeck_version="0.1.0")


def test_a_directory_loads_every_json_file_below_it_in_path_order(tmp_path: Path) -> None:
    first, second = _small_run("Alpha"), _small_run("Beta")
    write_eval_run(first, tmp_path / "results", datetime(2026, 1, 1, tzinfo=UTC))
    write_eval_run(second, tmp_path / "results", datetime(2026, 1, 2, tzinfo=UTC))
    (tmp_path / "results" / "notes.txt").write_text("not json", encoding="utf-8")

    runs = load_eval_runs(tmp_path / "results")

    assert runs == [first, second]


def test_a_malformed_file_error_names_the_file_and_the_location(tmp_path: Path) -> None:
    document = json.loads(dump_eval_run(_small_run()))
    document["report"]["results"][1]["passed"] = "maybe"
    bad = tmp_path / "results" / "bot" / "bad.json"
    bad.parent.mkdir(parents=True)
    bad.write_text(json.dumps([json.loads(dump_eval_run(_small_run())), document]), "utf-8")

    with pytest.raises(ReportFormatError) as caught:
        load_eval_runs(tmp_path / "results")

    assert caught.value.source == str(bad)
    assert str(bad) in str(caught.value)
    assert "[1].report.results[1].passed" in str(caught.value)


def test_invalid_json_is_reported_with_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{\n  "report": ', encoding="utf-8")

    with pytest.raises(ReportFormatError, match=r"(?s)broken\.json.*line 2"):
        load_eval_runs(bad)


def test_a_json_document_of_another_shape_is_rejected(tmp_path: Path) -> None:
    other = tmp_path / "package.json"
    other.write_text('{"name": "web"}', encoding="utf-8")

    with pytest.raises(ReportFormatError, match="expected an EvalRun"):
        load_eval_runs(other)


def test_a_summary_that_miscounts_is_rejected_on_import() -> None:
    document = json.loads(dump_eval_run(_small_run()))
    document["report"]["summary"]["passed"] += 1

    with pytest.raises(ReportFormatError, match=r"report\.summary.*must equal total_tests"):
        load_eval_runs(document)


# ------------------------------------------------------------------ writing


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("customer-support", "customer-support"),
        ("Support Bot", "support-bot"),
        ("  ConvFinQA: agent #2 ", "convfinqa-agent-2"),
        ("a__b--c", "a-b-c"),
    ],
)
def test_slugify_follows_holodeck(name: str, slug: str) -> None:
    assert slugify(name) == slug


@pytest.mark.parametrize("name", ["!!!", "日本語"])
def test_a_name_without_usable_characters_gets_the_slug_agent(name: str) -> None:
    assert slugify(name) == "agent"


def test_result_file_path_uses_the_slug_and_a_filename_safe_utc_timestamp() -> None:
    when = datetime(2026, 11, 30, 14, 52, 10, 999, tzinfo=timezone(timedelta(hours=10)))

    path = result_file_path(Path("results"), "Support Bot", when)

    assert path == Path("results/support-bot/2026-11-30T04-52-10Z.json")


def test_result_file_path_from_a_report_timestamp_replaces_colons_like_holodeck() -> None:
    path = result_file_path("results", "customer-support", "2026-03-07T09:00:09.812000Z")

    assert path == Path("results/customer-support/2026-03-07T09-00-09.812000Z.json")


def test_write_eval_run_never_overwrites_an_earlier_file(tmp_path: Path) -> None:
    run = _small_run()

    first = write_eval_run(run, tmp_path)
    second = write_eval_run(run, tmp_path)

    assert first == tmp_path / "support-bot" / "2026-11-30T04-52-10Z.json"
    assert second != first
    assert second.parent == first.parent
    assert second.name.startswith("2026-11-30T04-52-10Z-")
    assert load_eval_runs(first) == load_eval_runs(second) == [run]
    assert sorted(p.name for p in first.parent.iterdir()) == sorted([first.name, second.name])


@pytest.mark.parametrize("depth", [150, 5_000, 200_000])
def test_deeply_nested_json_is_refused_with_a_clear_error(tmp_path: Path, depth: int) -> None:
    from runs.core.wire.holodeck_io import ReportFormatError, load_eval_runs

    path = tmp_path / "deep.json"
    path.write_text('{"report": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(ReportFormatError, match="nested deeper than 100 levels"):
        load_eval_runs(path)
    nested: list[object] = []
    for _ in range(depth):
        nested = [nested]
    with pytest.raises(ReportFormatError, match="nested deeper"):
        load_eval_runs({"report": nested})


def test_the_import_command_reports_deep_json_without_a_traceback(
    tmp_path: Path, migrated_sqlite: Path
) -> None:
    import subprocess
    import sys

    from tests.web.services_helpers import embedded_env, with_migrated_database

    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    repo = Path(__file__).resolve().parents[3]
    env = embedded_env(with_migrated_database(tmp_path / "data", migrated_sqlite))
    done = subprocess.run(
        [sys.executable, "manage.py", "import_results", str(path)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "nested deeper than 100 levels" in done.stderr
    assert "Traceback" not in done.stderr
