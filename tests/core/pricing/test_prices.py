"""Cost from a price table: agent and judge apart, unknown prices said, never $0."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from runs.core.pricing.prices import (
    DEFAULT_PRICES,
    DEFAULTS_DATED,
    DEFAULTS_NAMED,
    DEFAULTS_SOURCE,
    Price,
    PriceFileError,
    PriceTable,
    case_cost,
    format_cost,
    format_usd,
    price_table,
    split_text,
    turn_cost,
    unpriced_models,
    usage_cost,
    warn_unpriced,
)
from runs.core.wire.models import MetricResult, TestResult, TokenUsage, TurnResult

TABLE = PriceTable(
    {
        "agent-model": Price(input=2.0, output=10.0, cache_write=2.5, cache_read=0.2),
        "judge-model": Price(input=1.0, output=4.0, cache_write=1.0, cache_read=1.0),
        "cached-inside": Price(1.0, 1.0, 1.0, 0.5, cached_in_prompt=True),
    },
    "test",
)


def judged(model: str, prompt: int, completion: int) -> MetricResult:
    return MetricResult(
        metric_name="tone",
        kind="geval",
        score=1.0,
        threshold=0.5,
        passed=True,
        model_used=model,
        judge_usage=TokenUsage.counted(prompt, completion),
    )


def turn(index: int, usage: TokenUsage | None, metrics: list[MetricResult]) -> TurnResult:
    return TurnResult(
        turn_index=index,
        input="q",
        passed=True,
        execution_time_ms=1,
        token_usage=usage,
        metric_results=metrics,
    )


def test_every_token_kind_is_priced_per_million() -> None:
    usage = TokenUsage.counted(
        1_000_000, 100_000, cache_creation_tokens=200_000, cache_read_tokens=1_000_000
    )
    cost = usage_cost(usage, "agent-model", TABLE)
    assert cost.known
    assert cost.usd == pytest.approx(2.0 + 1.0 + 0.5 + 0.2)


def test_cached_tokens_inside_the_prompt_are_priced_once_as_cache_reads() -> None:
    usage = TokenUsage.counted(1_000_000, 0, cache_read_tokens=400_000)
    assert usage_cost(usage, "cached-inside", TABLE).usd == pytest.approx(0.6 + 0.2)


def test_a_turn_costs_its_agent_and_its_judges_apart() -> None:
    cost = turn_cost(
        turn(0, TokenUsage.counted(1_000_000, 0), [judged("judge-model", 0, 1_000_000)]),
        "agent-model",
        TABLE,
    )
    assert cost.agent.usd == pytest.approx(2.0)
    assert cost.judge.usd == pytest.approx(4.0)
    assert cost.both.usd == pytest.approx(6.0)


def test_a_case_costs_the_sum_of_its_turns() -> None:
    turns = [
        turn(0, TokenUsage.counted(500_000, 0), []),
        turn(1, TokenUsage.counted(500_000, 0), [judged("judge-model", 1_000_000, 0)]),
    ]
    result = TestResult(
        test_input="q", passed=True, execution_time_ms=2, timestamp="t", turns=turns
    )
    cost = case_cost(result, "agent-model", TABLE)
    assert (cost.agent.usd, cost.judge.usd) == pytest.approx((2.0, 1.0))


def test_a_model_without_a_price_is_an_unknown_price_never_zero() -> None:
    cost = turn_cost(
        turn(0, TokenUsage.counted(10, 10), [judged("mystery-judge", 10, 10)]),
        "agent-model",
        TABLE,
    )
    assert cost.agent.known
    assert not cost.judge.known and cost.judge.unpriced == ("mystery-judge",)
    assert format_cost(cost.judge) == "unknown price (mystery-judge)"
    assert format_cost(cost.both).endswith("+ unknown price (mystery-judge)")
    assert "$0" not in format_cost(cost.judge)


@pytest.mark.parametrize(
    ("usd", "shown"),
    [
        (0.00004, "$0.0000400"),
        (0.0000412, "$0.0000412"),
        (0.000123, "$0.000123"),
        (0.0001, "$0.000100"),
        (0.00999996, "$0.0100"),
        (0.0123, "$0.0123"),
        (0.52, "$0.5200"),
        (0.0, "$0"),
        (0.99996, "$1.00"),
        (12.345, "$12.35"),
        (1234.5, "$1,234.50"),
        (1e-15, "<$0.000000000001"),
    ],
)
def test_a_cost_below_a_cent_keeps_three_significant_digits_and_from_a_cent_four_decimals(
    usd: float, shown: str
) -> None:
    assert format_usd(usd) == shown


def test_a_free_models_cost_reads_0_dollars_never_a_fake_precision_zero() -> None:
    free = PriceTable({"free-model": Price(0, 0, 0, 0)}, "test")
    cost = usage_cost(TokenUsage.counted(1000, 100), "free-model", free)
    assert cost.known and cost.usd == 0
    assert format_cost(cost) == "$0"


def test_costs_of_one_magnitude_read_with_the_same_precision() -> None:
    """$0.000018 beside $0.0000182 read as two formats: both keep three digits."""
    assert [format_usd(0.000018), format_usd(0.0000182)] == ["$0.0000180", "$0.0000182"]


def test_an_unknown_price_is_said_once_in_a_cost_split() -> None:
    unknown = turn_cost(turn(0, TokenUsage.counted(10, 10), []), "mystery-agent", TABLE)
    assert split_text(unknown) == "unknown: no price for mystery-agent (agent); judge —"
    partly = turn_cost(
        turn(0, TokenUsage.counted(1_000_000, 0), [judged("mystery-judge", 10, 10)]),
        "agent-model",
        TABLE,
    )
    assert split_text(partly) == "at least $2.00: no price for mystery-judge (judge); agent $2.00"
    known = turn_cost(turn(0, TokenUsage.counted(1_000_000, 0), []), "agent-model", TABLE)
    assert split_text(known) == "$2.00 (agent $2.00 · judge —)"


def test_the_parts_of_a_small_cost_visibly_add_up_to_the_whole() -> None:
    """A run of $0.000100 whose turns cost $0.0000400 and $0.0000600 no longer reads as turns
    of $0.0000 each."""
    turns = [0.00004, 0.00006]
    shown = [format_usd(usd) for usd in turns]
    assert shown == ["$0.0000400", "$0.0000600"]
    assert "$0.0000" not in shown
    assert sum(float(text.removeprefix("$")) for text in shown) == pytest.approx(0.0001)
    assert format_usd(sum(turns)) == "$0.000100"
    cases = [0.000123, 0.0000412]  # 3 significant digits each: the shown sum is the whole's
    whole = format_usd(sum(cases))
    assert whole == "$0.000164"
    assert sum(float(format_usd(usd).removeprefix("$")) for usd in cases) == pytest.approx(
        float(whole.removeprefix("$")), abs=1e-6
    )


def test_no_recorded_tokens_is_no_cost_rather_than_zero() -> None:
    assert format_cost(usage_cost(None, "agent-model", TABLE)) == "—"


def test_dated_and_prefixed_model_ids_find_their_defaults() -> None:
    table = price_table()
    assert DEFAULTS_DATED in table.source
    sonnet = table.price_of("claude-sonnet-4-5-20250929")
    assert sonnet is not None and (sonnet.input, sonnet.output) == (3.0, 15.0)
    mini = table.price_of("openai/gpt-4o-mini-2024-07-18")
    assert mini is not None and mini.input == 0.15  # not gpt-4o's price
    assert table.price_of("llama3") is None


def test_a_price_file_adds_models_and_overrides_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text("models:\n  gpt-4o: {input: 1, output: 2}\n  llama3: {input: 0, output: 0}\n")
    monkeypatch.setenv("HOLODECK_PRICES", str(path))
    table = price_table()
    assert table.price_of("gpt-4o") == Price(1.0, 2.0, cache_write=1.0, cache_read=1.0)
    assert table.price_of("llama3") is not None
    assert table.price_of("claude-haiku-4-5") is not None  # the other defaults stay
    assert str(path) in table.source


def test_a_json_price_file_is_read_too(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text('{"models": {"m": {"input": 1, "output": 2, "cache_read": 0.1}}}')
    price = price_table(path).price_of("m")
    assert price is not None and price.cache_read == 0.1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models:\n  m: {input: cheap, output: 2}\n", "models.m.input"),
        ("models:\n  m: {input: 1}\n", "models.m.output"),
        ("models:\n  m: {input: 1, output: 2, output_price: 3}\n", "models.m.output_price"),
        ("models:\n  m: {input: -1, output: 2}\n", "models.m.input"),
        ("prices: {}\n", "models"),
        ("models: [\n", "not valid YAML or JSON"),
    ],
)
def test_a_bad_price_file_is_an_error_naming_the_file_and_the_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    with pytest.raises(PriceFileError) as raised:
        price_table(path)
    assert str(path) in str(raised.value) and message in str(raised.value)


def test_a_missing_price_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(PriceFileError, match="cannot read"):
        price_table(tmp_path / "nope.yaml")


def test_the_built_in_table_names_its_date_and_source() -> None:
    source = price_table().source
    assert DEFAULTS_DATED in source and DEFAULTS_SOURCE in source
    assert source == DEFAULTS_NAMED


def test_docs_cost_md_names_the_built_in_tables_date_and_source() -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "cost.md").read_text()
    assert f"as of {DEFAULTS_DATED}" in docs
    assert DEFAULTS_SOURCE in docs


def test_the_docs_table_of_built_in_prices_is_the_modules_table() -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "cost.md").read_text()
    rows = re.findall(
        r"^\| `([^`]+)` \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", docs, re.M
    )
    documented = {name: tuple(float(n) for n in prices) for name, *prices in rows}
    kept = {
        name: tuple(round(n, 6) for n in (p.input, p.output, p.cache_write, p.cache_read))
        for name, p in DEFAULT_PRICES.items()
    }
    assert documented == kept


def test_only_the_models_without_a_price_are_unpriced() -> None:
    assert unpriced_models(["agent-model", None, "", "llama3", "llama3", "x"], TABLE) == (
        "llama3",
        "x",
    )


def test_a_model_without_a_price_is_a_structured_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="runs.core.pricing.prices"):
        warn_unpriced(("llama3",), run_id=7, when="finished", table=TABLE)
        warn_unpriced((), run_id=8, when="finished", table=TABLE)  # all priced: nothing
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert (record.event, record.run_id, record.models, record.prices) == (  # type: ignore[attr-defined]
        "unpriced_models",
        7,
        ["llama3"],
        "test",
    )
    assert record.getMessage() == (
        "run 7 finished with no price for llama3: its cost is unknown (prices: test); "
        "add them to a price file ($HOLODECK_PRICES, docs/cost.md)"
    )
