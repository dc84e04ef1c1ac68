"""How numbers read, the same on every page, export, the CI gate and trends.

A pass rate is a percentage 0–100 or None when nothing was graded (never "0 %" for that); a
score is 0..1 shown with two decimals. ``None`` reads as an en dash everywhere.

Turns and cases are numbered from 1 for people ("turn 1 of 4", "case 3 of 8") by the helpers
below, on every page, in the command's progress, the exports and the gate, and so are the
turn anchors people see in a link (``#turn-1`` is turn 1); what only machines read (stored
indexes, ``turn_index`` in HoloDeck files and the API, query parameters) stays 0-based.
"""

from __future__ import annotations

NONE_TEXT = "–"


def pass_rate_of(passed: int, graded: int) -> float | None:
    """Passed over graded, in % with two decimals; None when nothing was graded."""
    return round(passed * 100 / graded, 2) if graded else None


def format_rate(value: float | None) -> str:
    """A pass rate: whole numbers as they are ("90%"), others with one decimal that never lies
    at the ends: 99.96 shows as "99.9%" (not "100%") and 0.04 as "0.1%" (not "0%")."""
    if value is None:
        return NONE_TEXT
    if value == int(value):
        return f"{value:.0f}%"
    shown = min(max(round(value, 1), 0.1), 99.9) if 0 < value < 100 else round(value, 1)
    return f"{shown:.1f}%"


def format_score(value: float | None) -> str:
    """A metric score (0..1 for built-in metrics) with two decimals."""
    return NONE_TEXT if value is None else f"{_no_negative_zero(value, 2):.2f}"


def format_score_change(value: float | None) -> str:
    """A change of a score, with a sign and three decimals ("+0.125"): small moves of a 0..1
    score show; no change reads "+0.000", never "-0.000"."""
    return NONE_TEXT if value is None else f"{_no_negative_zero(value, 3):+.3f}"


def format_score_delta(value: float | None) -> str:
    """A score's delta as a compare cell shows it: two decimals with a real minus ("−0.12",
    "+0.05"), three when two would round a change away ("−0.004"), "±0" for none."""
    if value is None:
        return NONE_TEXT
    if abs(value) < 1e-9:
        return "±0"
    digits = 2 if abs(value) >= 0.005 else 3
    return f"{value:+.{digits}f}".replace("-", "\u2212")


def format_points(value: float | None) -> str:
    """A change of a pass rate, in percentage points with a sign ("+12.5 pts"); none (or less
    than the decimal shown) reads "+0 pts", never "-0 pts"."""
    if value is None:
        return NONE_TEXT
    return f"{_no_negative_zero(value, 1):+.1f} pts".replace(".0 pts", " pts")


def _no_negative_zero(value: float, digits: int) -> float:
    """``value`` rounded to the ``digits`` shown, a negative that rounds to zero (-0.0,
    -0.0004 at three digits) made a plain zero: a number never reads "-0.000"."""
    return round(value, digits) + 0.0  # -0.0 + 0.0 is 0.0


def format_count(passed: int, total: int) -> str:
    """``"8/9"``."""
    return f"{passed}/{total}"


def ordinal(index: int) -> int:
    """A stored 0-based index (``turn_index``, a case's index) as people count: from 1."""
    return index + 1


def turn_text(index: int, total: int | None = None) -> str:
    """``"turn 1 of 4"`` for the stored ``index`` 0 of 4 turns; ``"turn 1"`` without a total."""
    return _numbered("turn", index, total)


def case_text(index: int, total: int | None = None) -> str:
    """``"case 3 of 8"`` for the stored ``index`` 2 of 8 cases; ``"case 3"`` without a total."""
    return _numbered("case", index, total)


def repetition_text(repetition: int, repeats: int) -> str:
    """``"repetition 2 of 3"`` for the stored ``repetition`` 1 of 3."""
    return _numbered("repetition", repetition, repeats)


def repetition_name(name: str | None, *, index: int, repetition: int, repeats: int) -> str:
    """A repetition's test name in result files and exports ("refund (repetition 2 of 3)",
    "case 4 (repetition 1 of 3)" unnamed): HoloDeck readers load each repetition as a test
    result of its own, and the names tell them apart."""
    return f"{name or case_text(index)} ({repetition_text(repetition, repeats)})"


def _numbered(noun: str, index: int, total: int | None) -> str:
    text = f"{noun} {ordinal(index)}"
    return f"{text} of {total}" if total else text


def format_duration(ms: int | float | None) -> str:
    """A duration for people: "840 ms", "12.3 s", "4m 05s"; "–" for none."""
    if ms is None:
        return "–"
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m {rest:02d}s"


def format_thousands(value: int | None) -> str:
    """A count with thousands separators: "12,345"; "–" for none."""
    if value is None:
        return "–"
    return f"{value:,}"
