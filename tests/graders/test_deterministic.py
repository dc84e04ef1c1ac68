from __future__ import annotations

from typing import Any

import pytest

from graders.deterministic import (
    extract_response_path,
    grade_equality,
    grade_numeric,
    is_valid_response_path,
)
from graders.result import Grade

NBSP_NARROW = "\u202f"

# (name, grader, response, expected, options, outcome) where outcome is True/False for
# pass/fail, or "error" for could-not-grade.
CASES: list[tuple[str, str, str | None, str, dict[str, Any], bool | str]] = [
    # equality
    ("equality is exact by default", "equality", "Paris", "Paris", {}, True),
    ("equality is case sensitive by default", "equality", "paris", "Paris", {}, False),
    (
        "case_insensitive ignores case",
        "equality",
        "PARIS",
        "paris",
        {"case_insensitive": True},
        True,
    ),
    ("whitespace counts by default", "equality", " Paris ", "Paris", {}, False),
    (
        "strip_whitespace trims and collapses",
        "equality",
        " New \n York ",
        "New York",
        {"strip_whitespace": True},
        True,
    ),
    ("punctuation counts by default", "equality", "Paris.", "Paris", {}, False),
    (
        "strip_punctuation drops punctuation",
        "equality",
        "Paris!",
        "Paris",
        {"strip_punctuation": True},
        True,
    ),
    (
        "all flags together",
        "equality",
        "  HELLO,   world! ",
        "hello world",
        {"case_insensitive": True, "strip_whitespace": True, "strip_punctuation": True},
        True,
    ),
    ("an empty response is graded and fails", "equality", "", "Paris", {}, False),
    ("a missing response is graded as empty text", "equality", None, "Paris", {}, False),
    (
        "equality reads a JSON leaf",
        "equality",
        '{"answer": {"city": "Paris"}}',
        "Paris",
        {"response_path": "answer.city"},
        True,
    ),
    (
        "a JSON true leaf is the text true",
        "equality",
        '{"ok": true}',
        "true",
        {"response_path": "ok"},
        True,
    ),
    (
        "a JSON null leaf is the text null",
        "equality",
        '{"ok": null}',
        "null",
        {"response_path": "ok"},
        True,
    ),
    ("a threshold of 0 lets a mismatch pass", "equality", "a", "b", {"threshold": 0.0}, True),
    # numeric
    ("numeric int equals float", "numeric", "206588", "206588.0", {}, True),
    ("numeric default tolerance is 1e-6", "numeric", "0.1414005", "0.1414", {}, True),
    ("numeric beyond the default tolerance fails", "numeric", "0.14", "0.1414", {}, False),
    (
        "absolute tolerance widens the band",
        "numeric",
        "0.14",
        "0.1414",
        {"absolute_tolerance": 0.01},
        True,
    ),
    (
        "the absolute boundary is inclusive",
        "numeric",
        "1.5",
        "1",
        {"absolute_tolerance": 0.5},
        True,
    ),
    (
        "the boundary is compared in binary floats",
        "numeric",
        "1.0",
        "1.1",
        {"absolute_tolerance": 0.1},
        False,
    ),
    (
        "relative tolerance scales with expected",
        "numeric",
        "101",
        "100",
        {"relative_tolerance": 0.01},
        True,
    ),
    (
        "the relative boundary is inclusive",
        "numeric",
        "0.5",
        "1",
        {"absolute_tolerance": 0, "relative_tolerance": 0.5},
        True,
    ),
    (
        "relative tolerance that is too small fails",
        "numeric",
        "102",
        "100",
        {"relative_tolerance": 0.01},
        False,
    ),
    (
        "either tolerance is enough",
        "numeric",
        "100.5",
        "100",
        {"absolute_tolerance": 1.0, "relative_tolerance": 0.001},
        True,
    ),
    (
        "percent is parsed with accept_percent",
        "numeric",
        "14.14%",
        "0.1414",
        {"accept_percent": True},
        True,
    ),
    ("percent without the flag cannot be graded", "numeric", "14.14%", "0.1414", {}, "error"),
    (
        "commas are stripped with the flag",
        "numeric",
        "206,588",
        "206588",
        {"accept_thousands_separators": True},
        True,
    ),
    ("commas without the flag cannot be graded", "numeric", "206,588", "206588", {}, "error"),
    ("underscores without the flag cannot be graded", "numeric", "206_588", "206588", {}, "error"),
    (
        "a narrow no-break space is a separator",
        "numeric",
        f"206{NBSP_NARROW}588",
        "206588",
        {"accept_thousands_separators": True},
        True,
    ),
    (
        "a plain space is not a separator",
        "numeric",
        "206 588",
        "206588",
        {"accept_thousands_separators": True},
        "error",
    ),
    (
        "both flags together",
        "numeric",
        "1,414%",
        "14.14",
        {"accept_percent": True, "accept_thousands_separators": True},
        True,
    ),
    ("text around the number cannot be graded", "numeric", "about 42", "42", {}, "error"),
    (
        "unparsable text errors even at threshold 0",
        "numeric",
        "n/a",
        "42",
        {"threshold": 0.0},
        "error",
    ),
    ("an empty numeric response cannot be graded", "numeric", "", "42", {}, "error"),
    (
        "numeric reads a JSON number leaf",
        "numeric",
        '{"items": [{"x": 181001.0}]}',
        "181001",
        {"response_path": "items[0].x"},
        True,
    ),
    (
        "a response that is not JSON cannot be graded",
        "numeric",
        "181001",
        "181001",
        {"response_path": "x"},
        "error",
    ),
    (
        "a missing path cannot be graded",
        "numeric",
        '{"y": 1}',
        "1",
        {"response_path": "x"},
        "error",
    ),
]


def run(grader: str, response: str | None, expected: str, options: dict[str, Any]) -> Grade:
    if grader == "equality":
        return grade_equality(response, expected, **options)
    return grade_numeric(response, expected, **options)


@pytest.mark.parametrize(
    ("grader", "response", "expected", "options", "outcome"),
    [pytest.param(g, r, e, o, out, id=name) for name, g, r, e, o, out in CASES],
)
def test_each_equality_and_numeric_case_grades_as_the_contract_says(
    grader: str, response: str | None, expected: str, options: dict[str, Any], outcome: bool | str
) -> None:
    grade = run(grader, response, expected, options)

    if outcome == "error":
        assert grade.error is not None
        assert grade.score is None
        assert grade.passed is False
    else:
        assert grade.error is None
        assert grade.passed is outcome
        assert grade.score in (0.0, 1.0)
        assert grade.reason


def test_a_numeric_failure_reason_shows_both_values_and_the_tolerance() -> None:
    grade = grade_numeric("0.14", "0.1414")

    assert grade.reason == "expected 0.1414, got 0.14 (|diff| 0.0014 > 1e-6)"
    assert grade.score == 0.0


def test_a_relative_pass_reason_names_the_relative_band() -> None:
    grade = grade_numeric("101", "100", relative_tolerance=0.01)

    assert grade.reason == "expected 100, got 101 (|diff| 1 <= 0.01 x |expected| = 1)"


def test_an_unparsable_answer_names_the_text_it_could_not_parse() -> None:
    grade = grade_numeric("about 42", "42", threshold=0.0)

    assert grade.error == "could not parse a number from the response: 'about 42'"
    assert grade.threshold == 0.0


def test_a_percent_without_the_flag_says_which_flag_is_needed() -> None:
    grade = grade_numeric("14%", "0.14")

    assert grade.error == (
        "could not parse a number from the response: '14%' (a trailing % needs accept_percent)"
    )


def test_an_unparsable_expected_value_is_reported_as_such() -> None:
    grade = grade_numeric("1", "one")

    assert grade.error == "could not parse a number from the expected value: 'one'"


def test_an_equality_failure_shows_both_texts() -> None:
    grade = grade_equality("Pari", "Paris")

    assert grade.reason == "expected 'Paris', got 'Pari' (lengths 5 and 4)"


def test_every_grade_has_its_evaluation_time_measured() -> None:
    long_text = "word " * 200_000

    grade = grade_equality(long_text, long_text + "x", strip_whitespace=True)

    assert grade.evaluation_time_ms > 0


@pytest.mark.parametrize(
    ("response", "path", "leaf"),
    [
        ('{"answer": {"value": 3}}', "answer.value", "3"),
        ('{"items": [{"x": 1.5}, {"x": "two"}]}', "items[1].x", "two"),
        ('{"a": [[1, 2], [3, false]]}', "a[1][1]", "false"),
        ('{"snake_case-key": null}', "snake_case-key", "null"),
    ],
)
def test_response_path_renders_a_leaf_as_json_text(response: str, path: str, leaf: str) -> None:
    assert extract_response_path(response, path) == leaf


@pytest.mark.parametrize(
    ("response", "path", "message"),
    [
        ("not json", "a", "response_path 'a': the response is not JSON: 'not json'"),
        ('{"a": 1}', "b", "response_path 'b': no key 'b' (keys: a)"),
        ('{"a": [1]}', "a[2]", "response_path 'a[2]': index [2] is out of range ('a' has 1 items)"),
        ('{"a": {"b": 1}}', "a", "response_path 'a': the value is an object, not a single value"),
        ('{"a": 1}', "a.b", "response_path 'a.b': 'a' is not an object"),
        ("[1]", "a", "response_path 'a': the top level is not an object"),
    ],
)
def test_response_path_errors_say_what_went_wrong(response: str, path: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        extract_response_path(response, path)

    assert str(info.value) == message


@pytest.mark.parametrize("path", ["a", "a.b", "items[0].x", "a[1][2]", "_x-y"])
def test_dotted_names_and_integer_indices_are_valid_response_paths(path: str) -> None:
    assert is_valid_response_path(path)


@pytest.mark.parametrize("path", ["", ".a", "a.", "a[x]", "a..b", "[0]", "$.a"])
def test_empty_parts_non_integer_indices_and_a_leading_index_or_dollar_are_rejected(
    path: str,
) -> None:
    assert not is_valid_response_path(path)
