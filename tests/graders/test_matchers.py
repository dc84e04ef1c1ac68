from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graders.matchers import (
    FuzzyMatcher,
    LiteralMatcher,
    RegexMatcher,
    json_safe,
    match_arg,
    matcher_to_config,
    parse_arg_matcher,
)

# (the arg value as written in agent.yaml, the actual call value, passes?)
MATCHER_CASES: list[tuple[str, Any, Any, bool]] = [
    # literal
    ("literal int equals the same float", 206588, 206588.0, True),
    ("literal float equals the same int", 181001.0, 181001, True),
    ("literal int differs from another int", 206588, 206000, False),
    ("literal true differs from 1", True, 1, False),
    ("literal 1 differs from true", 1, True, False),
    ("literal false differs from 0", False, 0, False),
    ("literal true equals true", True, True, True),
    ("literal null equals only null", None, None, True),
    ("literal null differs from empty string", None, "", False),
    ("literal 0 differs from null", 0, None, False),
    ("literal list compares element-wise numerically", [1, 2], [1.0, 2.0], True),
    ("literal list order matters", [1, 2], [2, 1], False),
    ("literal list length matters", [1, 2], [1, 2, 3], False),
    ("literal dict compares key set and values", {"a": 1, "b": [2]}, {"b": [2.0], "a": 1.0}, True),
    ("literal dict with an extra key differs", {"a": 1}, {"a": 1, "b": 2}, False),
    ("literal string is exact", "operating cash", "operating cash", True),
    ("literal string is case sensitive", "Cash", "cash", False),
    ("literal number differs from its text", 206588, "206588", False),
    ("literal text differs from its number", "206588", 206588, False),
    ("literal dict without matcher keys is a literal", {"fuzzyish": 1}, {"fuzzyish": 1}, True),
    # fuzzy
    ("fuzzy matches thousands commas", {"fuzzy": "206588"}, "206,588", True),
    ("fuzzy matches a space between digits", {"fuzzy": "206588"}, "206 588", True),
    ("fuzzy matches a float", {"fuzzy": "206588"}, 206588.0, True),
    ("fuzzy matches an int", {"fuzzy": "206588"}, 206588, True),
    ("fuzzy differs from another number", {"fuzzy": "206588"}, 205000, False),
    ("fuzzy percent divides by 100", {"fuzzy": "14.14%"}, 0.1414, True),
    ("fuzzy percent on the actual side", {"fuzzy": "0.1414"}, "14.14 %", True),
    ("fuzzy ignores case and outer spaces", {"fuzzy": "YES"}, " yes ", True),
    ("fuzzy collapses inner whitespace", {"fuzzy": "Operating  Cash"}, "operating\tcash", True),
    ("fuzzy drops underscores", {"fuzzy": "1_000"}, "1000", True),
    ("fuzzy drops narrow no-break spaces", {"fuzzy": "1000000"}, "1\u202f000\u202f000", True),
    ("fuzzy text still has to be equal", {"fuzzy": "cash flow"}, "cash flows", False),
    ("fuzzy nan equals nan as text", {"fuzzy": "nan"}, "NaN", True),
    ("fuzzy nan equals a float nan", {"fuzzy": "nan"}, math.nan, True),
    ("fuzzy true equals a bool true", {"fuzzy": "true"}, True, True),
    ("fuzzy number differs from text", {"fuzzy": "12"}, "twelve", False),
    ("fuzzy negative numbers compare", {"fuzzy": "-0.5"}, "-50%", True),
    # regex
    ("regex must match the whole value", {"regex": "^2009.*$"}, "report 2009 cash flow", False),
    ("regex full match passes", {"regex": "^2009.*cash.*$"}, "2009 operating cash", True),
    ("regex on a float uses str()", {"regex": r"^181001(\.0+)?$"}, 181001.0, True),
    ("regex rejects another decimal", {"regex": r"^181001(\.0+)?$"}, "181001.5", False),
    ("regex without anchors is still anchored", {"regex": "cash"}, "cash flow", False),
    ("regex on a bool sees Python's True", {"regex": "True"}, True, True),
    ("regex on null sees None", {"regex": "None"}, None, True),
]


@pytest.mark.parametrize(
    ("written", "actual", "passes"),
    [pytest.param(w, a, p, id=name) for name, w, a, p in MATCHER_CASES],
)
def test_each_matcher_case_passes_or_fails_as_the_contract_says(
    written: Any, actual: Any, passes: bool
) -> None:
    result = match_arg(parse_arg_matcher(written), actual)

    assert result.passed is passes
    assert (result.reason is None) is passes


def test_a_failed_fuzzy_match_explains_itself_with_both_values() -> None:
    result = match_arg(FuzzyMatcher("206588"), 205000)

    assert result.reason == "expected fuzzy '206588', got 205000"
    assert result.expected_normalized == 206588.0
    assert result.actual_normalized == 205000.0


def test_a_failed_bool_literal_says_a_bool_only_equals_a_bool() -> None:
    result = match_arg(LiteralMatcher(True), 1)

    assert result.reason == "expected true, got 1 (a bool only equals a bool)"


def test_fuzzy_text_comparison_records_the_normalised_forms() -> None:
    result = match_arg(FuzzyMatcher(" Operating  CASH "), "operating cash")

    assert result.passed
    assert result.expected_normalized == "operating cash"
    assert result.actual_normalized == "operating cash"


def test_regex_records_the_text_it_matched_against() -> None:
    result = match_arg(parse_arg_matcher({"regex": r"\d+"}), 181001.0)

    assert not result.passed
    assert result.actual_normalized == "181001.0"


# --- fuzzy numbers: HoloDeck's tolerance and whitespace rules ---------------------------------

# (fuzzy pattern, actual, passes?): math.isclose(a, b, rel_tol=0, abs_tol=1e-9), nothing more.
FUZZY_TOLERANCE_CASES: list[tuple[str, Any, bool]] = [
    ("0.3", 0.1 + 0.2, True),  # 0.30000000000000004: float noise is absorbed
    ("0.3", "0.30000000000000004", True),
    ("0", "0.000000001", True),  # exactly 1e-9 apart: the boundary is inclusive
    ("1", 1 + 0.9e-9, True),
    ("1", "1.000000001", False),  # in binary floats these are 1.00000008e-9 apart
    ("1", 1 + 2e-9, False),
    ("0", "-0.000000001", True),
    ("0", "0.000000002", False),
    ("1234567890123456", 1234567890123457, False),  # no relative tolerance: last digits count
    ("1234567890123456", "1,234,567,890,123,457", False),
    ("1234567890123456", 1234567890123456.0, True),
    ("10000000000000000", "1e16", True),  # 1e16-scale, spelled two ways
    ("10000000000000000", "10000000000000002", False),  # 2 apart; a relative 1e-9 would pass
    ("1e16", "1.0000000001e16", False),
    ("10000000000000000", "10000000000000001", True),  # the same binary float (2^53 < 1e16)
    ("14.14%", 0.1414, True),
    ("50%", "0.5", True),
    ("0.5%", "0.005", True),
    ("100%", 1, True),
    ("14.14%", 0.14140001, False),
    ("206,588", "206588.000000001", True),
    ("1,000,000", 1000000.01, False),
    ("-0", "0", True),
    ("inf", "Infinity", True),
]


@pytest.mark.parametrize(("pattern", "actual", "passes"), FUZZY_TOLERANCE_CASES)
def test_fuzzy_numbers_are_equal_within_an_absolute_1e_9_and_no_relative_tolerance(
    pattern: str, actual: Any, passes: bool
) -> None:
    assert match_arg(FuzzyMatcher(pattern), actual).passed is passes
    assert match_arg(FuzzyMatcher(str(actual)), pattern).passed is passes  # symmetric


# (fuzzy pattern, actual, passes?): every whitespace character goes before the numeric parse.
FUZZY_WHITESPACE_CASES: list[tuple[str, Any, bool]] = [
    ("-5", "- 5", True),
    ("-5", "-\t5", True),
    ("1.5", "1 .5", True),
    ("1.5", "1. 5", True),
    ("206588", "206 588", True),
    ("206588", "206\t588", True),
    ("206588", "206\n588", True),
    ("206588", "206\u00a0588", True),  # no-break space
    ("206588", "206\u2009588", True),  # thin space
    ("206588", "206\u202f588", True),  # narrow no-break space
    ("206588", " 2 0 6 5 8 8 ", True),
    ("206588", "206 , 588", True),
    ("0.1414", "14.14 %", True),
    ("0.1414", "14.14\t%", True),
    ("-0.05", "- 5 %", True),
    ("1500", "1.5 e3", True),
    ("-5", "- 6", False),
    ("206588", "206 589", False),
]


@pytest.mark.parametrize(("pattern", "actual", "passes"), FUZZY_WHITESPACE_CASES)
def test_fuzzy_numbers_are_read_without_any_whitespace(
    pattern: str, actual: Any, passes: bool
) -> None:
    assert match_arg(FuzzyMatcher(pattern), actual).passed is passes


# (fuzzy pattern, actual, passes?): text that is not a number keeps its words apart.
FUZZY_TEXT_WHITESPACE_CASES: list[tuple[str, Any, bool]] = [
    ("operating cash", "operating\tcash", True),
    ("operating cash", "operating\n\ncash", True),
    ("operating cash", "operating\u00a0cash", True),
    ("operating cash", "operatingcash", False),
    ("a b", "ab", False),
    ("- x", "-x", False),
]


@pytest.mark.parametrize(("pattern", "actual", "passes"), FUZZY_TEXT_WHITESPACE_CASES)
def test_fuzzy_text_collapses_whitespace_but_does_not_remove_it(
    pattern: str, actual: Any, passes: bool
) -> None:
    assert match_arg(FuzzyMatcher(pattern), actual).passed is passes


# Deliberate departure: literal numbers compare exactly (HoloDeck goes through float()).
@pytest.mark.parametrize(
    ("expected", "actual", "passes"),
    [
        (2**53, 2**53 + 1, False),  # float(2**53) == float(2**53 + 1)
        (9007199254740993, 9007199254740992.0, False),
        (12345678901234567890, 12345678901234567891, False),
        (12345678901234567890, 12345678901234567890, True),
        (2**53, float(2**53), True),
        (10**400, 10**400, True),  # beyond float range: no OverflowError
        (10**400, 10**400 + 1, False),
    ],
)
def test_literal_integers_beyond_2_to_53_compare_exactly(
    expected: int, actual: Any, passes: bool
) -> None:
    assert match_arg(LiteralMatcher(expected), actual).passed is passes


# --- parsing ----------------------------------------------------------------------------------


def test_a_dict_whose_only_key_is_fuzzy_is_a_fuzzy_matcher() -> None:
    assert parse_arg_matcher({"fuzzy": "206588"}) == FuzzyMatcher("206588")


def test_a_dict_whose_only_key_is_regex_is_a_compiled_regex_matcher() -> None:
    matcher = parse_arg_matcher({"regex": "^a+$"})

    assert isinstance(matcher, RegexMatcher)
    assert matcher.pattern == "^a+$"
    assert matcher.compiled.pattern == "^a+$"


@pytest.mark.parametrize("value", [3, 1.5, "x", None, True, [1, {"fuzzy": "a"}], {}, {"a": 1}])
def test_any_other_value_is_a_literal(value: Any) -> None:
    assert parse_arg_matcher(value) == LiteralMatcher(value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"regex": "("}, "invalid regex '(': missing ), unterminated subpattern at position 0"),
        ({"fuzzy": "a", "regex": "b"}, "use either 'fuzzy' or 'regex', not both"),
        (
            {"fuzzy": "a", "note": "x"},
            "a 'fuzzy' matcher must be the only key of its dict; found beside it: note",
        ),
        (
            {"regex": "a", "b": 1, "a": 2},
            "a 'regex' matcher must be the only key of its dict; found beside it: a, b",
        ),
        ({"fuzzy": 206588}, "the 'fuzzy' pattern must be a string, got int"),
        ({"regex": None}, "the 'regex' pattern must be a string, got null"),
    ],
)
def test_a_malformed_matcher_dict_raises_a_one_line_cause(value: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_arg_matcher(value)

    assert str(info.value) == message
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "written", [206588, "x", None, [1, 2], {"a": 1}, {"fuzzy": "1,000"}, {"regex": "^a$"}]
)
def test_matcher_to_config_gives_back_what_was_written(written: Any) -> None:
    assert matcher_to_config(parse_arg_matcher(written)) == written


def test_parsing_a_matcher_again_returns_it_unchanged() -> None:
    matcher = parse_arg_matcher({"regex": "a"})

    assert parse_arg_matcher(matcher) is matcher


# --- properties -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@given(expected=json_values, actual=json_values)
def test_literal_matching_never_raises_on_json_values(expected: Any, actual: Any) -> None:
    result = match_arg(LiteralMatcher(expected), actual)

    assert isinstance(result.passed, bool)


@given(pattern=st.text(max_size=20), actual=json_values)
def test_fuzzy_matching_never_raises_on_json_values(pattern: str, actual: Any) -> None:
    assert isinstance(match_arg(FuzzyMatcher(pattern), actual).passed, bool)


@given(actual=json_values)
def test_regex_matching_never_raises_on_json_values(actual: Any) -> None:
    matcher = parse_arg_matcher({"regex": r"^[\d.]+$"})

    assert isinstance(match_arg(matcher, actual).passed, bool)


@given(actual=json_values)
def test_json_safe_makes_any_json_value_strictly_serialisable(actual: Any) -> None:
    import json

    json.dumps(json_safe(actual), allow_nan=False)


numbers_as_text = st.one_of(
    st.integers(min_value=-(10**12), max_value=10**12).map(str),
    st.integers(min_value=0, max_value=10**9).map(lambda n: f"{n:,}"),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9).map(repr),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e4, max_value=1e4).map(
        lambda f: f"{f * 100!r}%"
    ),
    st.sampled_from(["nan", "inf", "-inf", "1e3", "1 000", "abc"]),
)


@given(a=numbers_as_text, b=numbers_as_text)
def test_fuzzy_number_matching_is_symmetric(a: str, b: str) -> None:
    forward = match_arg(FuzzyMatcher(a), b).passed
    backward = match_arg(FuzzyMatcher(b), a).passed

    assert forward is backward


@given(n=st.integers(min_value=0, max_value=10**12))
def test_fuzzy_matches_a_number_against_its_comma_grouped_text(n: int) -> None:
    assert match_arg(FuzzyMatcher(str(n)), f"{n:,}").passed


# (a+)+$ the regex engine answers at once; (a|aa)+$ it must give up on.
@pytest.mark.parametrize("pattern, times_out", [("(a+)+$", False), ("(a|aa)+$", True)])
def test_a_catastrophic_regex_fails_the_match_within_its_time_limit(
    pattern: str, times_out: bool
) -> None:
    import time

    from graders.matchers import REGEX_TIMEOUT_S

    matcher = parse_arg_matcher({"regex": pattern})
    started = time.perf_counter()
    result = match_arg(matcher, "a" * 40 + "!")  # Python's re would run for hours on these
    elapsed = time.perf_counter() - started
    assert not result.passed
    assert elapsed < REGEX_TIMEOUT_S + 10  # bounded (a loaded machine is slow, not hours)
    assert ("did not finish matching" in (result.reason or "")) is times_out


def test_regex_matchers_keep_pythons_syntax() -> None:
    with pytest.raises(ValueError, match="invalid regex"):
        parse_arg_matcher({"regex": "(?<name>x)"})  # Perl-style group names are not Python's
    assert match_arg(parse_arg_matcher({"regex": r"(?P<year>\d{4})-\d\d"}), "2009-12").passed
