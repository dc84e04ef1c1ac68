"""How numbers read: never a negative zero."""

from __future__ import annotations

import pytest

from runs.core.verdicts.numbers import format_points, format_score, format_score_change


@pytest.mark.parametrize("value", [0.0, -0.0, -0.0004, 1e-12 - 1e-12, 0.7 - 0.7])
def test_a_score_change_of_nothing_reads_plus_zero_never_minus_zero(value: float) -> None:
    assert format_score_change(value) == "+0.000"


def test_a_score_change_the_last_decimal_shows_keeps_its_sign() -> None:
    assert format_score_change(-0.0006) == "-0.001"
    assert format_score_change(0.125) == "+0.125"


@pytest.mark.parametrize("value", [-0.0, -0.04])
def test_a_points_change_of_nothing_reads_plus_zero(value: float) -> None:
    assert format_points(value) == "+0 pts"


def test_a_score_that_rounds_to_zero_has_no_minus() -> None:
    assert format_score(-0.001) == "0.00"
