"""A re-grade's two sources as plain data: no database, no Django."""

from __future__ import annotations

from runs.core.verdicts.regrades import GradingSource, RegradeSources, TranscriptSource


def test_the_sources_read_as_transcripts_then_grading_and_the_headline_names_the_ref() -> None:
    sources = RegradeSources(
        of=2,
        transcripts=TranscriptSource(run=2, commit="1a2b3c4d5e6f", snapshot="9f" * 32),
        grading=GradingSource(ref="loose", commit="5e6f7a8b9c0d", snapshot="0c" * 32),
    )

    assert sources.headline == "re-grade of #2 with loose"
    assert sources.text == (
        "transcripts: run #2 (commit 1a2b3c4d, snapshot 9f9f9f9f9f9f) · "
        "graded with: loose (commit 5e6f7a8b, snapshot 0c0c0c0c0c0c)"
    )


def test_a_regrade_with_the_working_tree_says_so_and_whether_it_was_dirty() -> None:
    sources = RegradeSources(
        of=5,
        transcripts=TranscriptSource(run=4),
        grading=GradingSource(commit="abcdef0123", dirty=True),
    )

    assert sources.headline == "re-grade of #5 with the working tree"
    assert sources.text == (
        "transcripts: run #4 (no commit, no snapshot) · "
        "graded with: the working tree (commit abcdef01, dirty, no snapshot)"
    )


def test_stored_json_round_trips_and_a_run_that_is_no_regrade_has_none() -> None:
    sources = RegradeSources(
        of=2, transcripts=TranscriptSource(run=1, commit="c"), grading=GradingSource(ref="v2")
    )

    assert RegradeSources.stored(sources.model_dump(mode="json")) == sources
    assert RegradeSources.stored({}) is None and RegradeSources.stored(None) is None
