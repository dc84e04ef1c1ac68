"""The verdict vocabulary is spelled once (runs.core.verdicts.outcomes): the model's choices, the
API's filter, the order of count lines and the classes pages draw are read from it."""

from __future__ import annotations

from typing import get_args

import pytest
from django.template import Context, Template

from runs.core.verdicts.outcomes import (
    COUNTED_OUTCOMES,
    MAIN_OUTCOMES,
    RUN_ACTIVE_STATES,
    RUN_FINISHED_STATES,
    CaseState,
    Outcome,
    RunState,
    RunStatus,
)
from runs.models import CaseRow, Run


def test_the_model_choices_are_the_states_with_djangos_labels() -> None:
    assert Run._meta.get_field("status").choices == [
        ("queued", "Queued"),
        ("running", "Running"),
        ("passed", "Passed"),
        ("failed", "Failed"),
        ("error", "Error"),
        ("cancelled", "Cancelled"),
    ]
    assert CaseRow._meta.get_field("status").choices == [
        ("pending", "Pending"),
        ("running", "Running"),
        ("done", "Done"),
        ("cancelled", "Cancelled"),
        ("error", "Error"),
    ]


def test_the_model_states_are_the_vocabularys() -> None:
    assert Run.Status.RUNNING is RunState.RUNNING
    assert CaseRow.Status.DONE is CaseState.DONE
    assert Run.ACTIVE == RUN_ACTIVE_STATES == ("queued", "running")


def test_the_api_spells_run_states_as_the_vocabulary_does() -> None:
    assert get_args(RunStatus) == tuple(state.value for state in RunState)


def test_a_run_is_active_until_it_ends() -> None:
    assert [state for state in RunState if state.is_active] == [RunState.QUEUED, RunState.RUNNING]
    assert RUN_FINISHED_STATES == ("passed", "failed", "error", "cancelled")


def test_count_lines_list_the_main_outcomes_first() -> None:
    assert MAIN_OUTCOMES == (Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.NOT_GRADED)
    assert COUNTED_OUTCOMES[:4] == MAIN_OUTCOMES
    assert Outcome.PENDING in COUNTED_OUTCOMES and Outcome.ABSENT not in COUNTED_OUTCOMES


@pytest.mark.parametrize("outcome", list(Outcome))
def test_an_outcome_answers_what_a_page_asks(outcome: Outcome) -> None:
    assert outcome.chip == f"chip-{outcome.value}"
    assert outcome.is_failed == (outcome is Outcome.FAILED)
    assert outcome.is_not_graded == (outcome is Outcome.NOT_GRADED)
    assert outcome.is_error == (outcome is Outcome.ERROR)


def test_a_value_that_is_no_outcome_is_shown_as_not_assessed() -> None:
    assert Outcome.shown("bogus") is Outcome.NONE
    assert Outcome.shown("") is Outcome.PENDING
    assert Outcome.shown("not_graded") is Outcome.NOT_GRADED


def test_templates_ask_the_outcome_instead_of_comparing_words() -> None:
    template = Template(
        "{% load dashboard %}{% with verdict=value|outcome %}"
        "{% if verdict.is_not_graded %}{{ verdict.chip }} {{ verdict.label }}{% endif %}"
        "{% endwith %}"
    )
    assert template.render(Context({"value": "not_graded"})) == "chip-not_graded not graded"
    assert template.render(Context({"value": "passed"})) == ""


def test_a_run_state_chip_is_drawn_from_its_state() -> None:
    template = Template("{% load dashboard %}{% run_state_chip status %}")
    assert (
        template.render(Context({"status": "running"}))
        == '<span class="chip chip-running">running</span>'
    )


def test_the_markdown_marks_are_the_writers() -> None:
    from runs.core.writers.results import MARKS

    assert {outcome: outcome.emoji for outcome in Outcome if outcome.emoji} == MARKS
