"""What tokens cost: a price table per model and the cost of recorded token usage.

Django-free. Prices are USD per million tokens, four of them per model: input (prompt),
output (completion), cache writes and cache reads. The built-in table (``DEFAULT_PRICES``) holds
the providers' list prices of common models as of ``DEFAULTS_DATED``, read from
``DEFAULTS_SOURCE`` (both named wherever a cost's prices are: ``PriceTable.source``); a file
named by the environment variable ``HOLODECK_PRICES`` (YAML or JSON) adds models or overrides
them::

    models:
      claude-sonnet-4-5: {input: 3, output: 15, cache_write: 3.75, cache_read: 0.3}
      my-local-model: {input: 0, output: 0}

A model is found by its exact name, else by the longest table name it starts with followed by
``-`` (dated ids: ``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``); case does not
matter and a ``provider/`` prefix is ignored. A model without a price has an unknown cost,
never zero: ``Cost.unpriced`` names it, ``format_cost`` says "unknown price" and
``warn_unpriced`` logs a warning when a run starts or finishes with such a model, so a table
gone stale is seen, never silently read as free.

Token counts follow the providers: Anthropic reports cache tokens apart from the prompt
tokens, OpenAI counts its cached tokens inside ``prompt_tokens`` (``cached_in_prompt``), so
those are priced once, as cache reads.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runs.core.wire.models import MetricResult, TestReport, TestResult, TokenUsage, TurnResult

log = logging.getLogger(__name__)

PRICES_ENV = "HOLODECK_PRICES"
# When the built-in prices were read, and from where (kept by hand: update both with the table,
# and the table in docs/cost.md).
DEFAULTS_DATED = "2025-11-01"
DEFAULTS_SOURCE = "Anthropic's and OpenAI's published API pricing pages"
DEFAULTS_NAMED = f"built-in defaults (list prices of {DEFAULTS_DATED}, {DEFAULTS_SOURCE})"
PER_TOKENS = 1_000_000


@dataclass(frozen=True)
class Price:
    """USD per million tokens of one model."""

    input: float
    output: float
    cache_write: float
    cache_read: float
    # OpenAI-style usage: cached tokens are part of prompt_tokens (priced as cache reads only).
    cached_in_prompt: bool = False


def _anthropic(input: float, output: float) -> Price:
    """Anthropic's list prices: a cache write costs 1.25× input, a cache read 0.1×."""
    return Price(input, output, cache_write=input * 1.25, cache_read=input * 0.1)


def _openai(input: float, output: float, cache_read: float) -> Price:
    """OpenAI's list prices: no cache-write charge; cached tokens sit inside prompt_tokens."""
    return Price(input, output, cache_write=input, cache_read=cache_read, cached_in_prompt=True)


# List prices (USD per million tokens) as of DEFAULTS_DATED; a price file overrides any of them.
DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-4-5": _anthropic(5.0, 25.0),
    "claude-opus-4-1": _anthropic(15.0, 75.0),
    "claude-opus-4": _anthropic(15.0, 75.0),
    "claude-sonnet-4-5": _anthropic(3.0, 15.0),
    "claude-sonnet-4": _anthropic(3.0, 15.0),
    "claude-haiku-4-5": _anthropic(1.0, 5.0),
    "claude-3-7-sonnet": _anthropic(3.0, 15.0),
    "claude-3-5-sonnet": _anthropic(3.0, 15.0),
    "claude-3-5-haiku": _anthropic(0.8, 4.0),
    "gpt-4o": _openai(2.5, 10.0, 1.25),
    "gpt-4o-mini": _openai(0.15, 0.6, 0.075),
    "gpt-4.1": _openai(2.0, 8.0, 0.5),
    "gpt-4.1-mini": _openai(0.4, 1.6, 0.1),
    "gpt-4.1-nano": _openai(0.1, 0.4, 0.025),
    "gpt-5": _openai(1.25, 10.0, 0.125),
    "gpt-5-mini": _openai(0.25, 2.0, 0.025),
    "gpt-5-nano": _openai(0.05, 0.4, 0.005),
    "o3": _openai(2.0, 8.0, 0.5),
    "o4-mini": _openai(1.1, 4.4, 0.275),
}


class PriceFileError(ValueError):
    """A price file that cannot be read; the message names the file and the field."""


@dataclass(frozen=True)
class PriceTable:
    prices: Mapping[str, Price]
    # Where the prices come from: DEFAULTS_NAMED, or "<file> over " DEFAULTS_NAMED.
    source: str

    def price_of(self, model: str | None) -> Price | None:
        """The model's price: exact name, else the longest name it starts with and ``-``."""
        if not model:
            return None
        name = model.strip().lower().rsplit("/", 1)[-1]
        if name in self.prices:
            return self.prices[name]
        matches = [key for key in self.prices if name.startswith(f"{key}-")]
        return self.prices[max(matches, key=len)] if matches else None


@dataclass(frozen=True)
class Cost:
    """A sum of costs. ``unpriced`` names the models whose tokens have no price: the sum is
    then a lower bound, and is never shown as the whole cost."""

    usd: float = 0.0
    unpriced: tuple[str, ...] = ()
    # Whether any token usage was counted at all (nothing recorded: no cost to speak of).
    counted: bool = False

    def __add__(self, other: Cost) -> Cost:
        unpriced = tuple(dict.fromkeys((*self.unpriced, *other.unpriced)))
        return Cost(self.usd + other.usd, unpriced, self.counted or other.counted)

    @property
    def known(self) -> bool:
        return self.counted and not self.unpriced

    @property
    def unknown(self) -> bool:
        """Tokens were counted, but none of them has a price: nothing to show but that."""
        return self.counted and bool(self.unpriced) and not self.usd


def total(costs: Iterable[Cost]) -> Cost:
    summed = Cost()
    for cost in costs:
        summed = summed + cost
    return summed


def usage_cost(
    usage: TokenUsage | Mapping[str, Any] | None, model: str | None, table: PriceTable
) -> Cost:
    """The cost of one recorded usage (a ``TokenUsage`` or its stored JSON) by ``model``."""
    tokens = _usage(usage)
    if tokens is None or not (
        tokens.prompt_tokens
        or tokens.completion_tokens
        or tokens.cache_creation_tokens
        or tokens.cache_read_tokens
    ):
        return Cost()
    sums = UsageSums(
        prompt=tokens.prompt_tokens,
        completion=tokens.completion_tokens,
        cache_write=tokens.cache_creation_tokens,
        cache_read=tokens.cache_read_tokens,
        billable_prompt=max(0, tokens.prompt_tokens - tokens.cache_read_tokens),
        rows=1,
    )
    return summed_usage_cost(sums, model, table)


@dataclass(frozen=True)
class UsageSums:
    """Token usages summed (the database's sums of a run's rows with tokens): priced at one
    model, their cost is the sum of each usage's (``usage_cost``). ``billable_prompt`` sums
    each usage's prompt less its cache reads (never below 0), for the prices that count cached
    tokens inside the prompt."""

    prompt: int = 0
    completion: int = 0
    cache_write: int = 0
    cache_read: int = 0
    billable_prompt: int = 0
    rows: int = 0


def summed_usage_cost(sums: UsageSums, model: str | None, table: PriceTable) -> Cost:
    """The cost of ``sums.rows`` usages with tokens by ``model`` (nothing when there are none)."""
    if not sums.rows:
        return Cost()
    price = table.price_of(model)
    if price is None:
        return Cost(unpriced=(model or "unknown model",), counted=True)
    prompt = sums.billable_prompt if price.cached_in_prompt else sums.prompt
    usd = (
        prompt * price.input
        + sums.completion * price.output
        + sums.cache_write * price.cache_write
        + sums.cache_read * price.cache_read
    ) / PER_TOKENS
    return Cost(usd, counted=True)


def judge_cost(
    usage: TokenUsage | Mapping[str, Any] | None,
    model: str | None,
    recorded_usd: float | None,
    table: PriceTable,
) -> Cost:
    """One judge grade's cost: its tokens at the table's price of the judge model, else the
    cost the judge library recorded (deepeval prices its native models), else unknown."""
    cost = usage_cost(usage, model, table)
    if cost.unpriced and recorded_usd is not None:
        return Cost(recorded_usd, counted=True)
    if not cost.counted and recorded_usd:
        return Cost(recorded_usd, counted=True)
    return cost


@dataclass(frozen=True)
class SplitCost:
    """Agent and judge costs apart (a turn, a case, a run)."""

    agent: Cost = field(default_factory=Cost)
    judge: Cost = field(default_factory=Cost)

    def __add__(self, other: SplitCost) -> SplitCost:
        return SplitCost(self.agent + other.agent, self.judge + other.judge)

    @property
    def both(self) -> Cost:
        return self.agent + self.judge


def split_total(costs: Iterable[SplitCost]) -> SplitCost:
    summed = SplitCost()
    for cost in costs:
        summed = summed + cost
    return summed


def metric_cost(metric: MetricResult, table: PriceTable) -> Cost:
    """A judge metric's cost (deterministic and code metrics spend no tokens: zero, known)."""
    return judge_cost(metric.judge_usage, metric.model_used, metric.judge_cost_usd, table)


def turn_cost(turn: TurnResult, agent_model: str | None, table: PriceTable) -> SplitCost:
    """One turn: the agent's tokens by the agent's model, each judge's by its model."""
    return SplitCost(
        usage_cost(turn.token_usage, agent_model, table),
        total(metric_cost(metric, table) for metric in turn.metric_results),
    )


def case_cost(result: TestResult, agent_model: str | None, table: PriceTable) -> SplitCost:
    """A case: the sum of its turns (a single-turn case is its one turn)."""
    if result.turns is not None:
        return split_total(turn_cost(turn, agent_model, table) for turn in result.turns)
    return SplitCost(
        usage_cost(result.token_usage, agent_model, table),
        total(metric_cost(metric, table) for metric in result.metric_results),
    )


def report_cost(report: TestReport, agent_model: str | None, table: PriceTable) -> SplitCost:
    """A run: the sum of its cases."""
    return split_total(case_cost(result, agent_model, table) for result in report.results)


@dataclass(frozen=True)
class ReportPrices:
    """What a report's writer prices it with: the agent's model and the table, or the price
    file's error (then every cost reads as that error, nothing as $0)."""

    agent_model: str | None
    table: PriceTable | None
    error: str | None = None

    def case(self, result: TestResult) -> SplitCost | None:
        return None if self.table is None else case_cost(result, self.agent_model, self.table)

    def report(self, report: TestReport) -> SplitCost | None:
        return None if self.table is None else report_cost(report, self.agent_model, self.table)


def report_prices(agent_config: Mapping[str, Any] | None) -> ReportPrices:
    """The prices of a run whose config snapshot is ``agent_config`` ($HOLODECK_PRICES)."""
    try:
        table = price_table()
    except PriceFileError as exc:
        return ReportPrices(None, None, str(exc))
    return ReportPrices(agent_model_name(agent_config), table)


def split_text(cost: SplitCost) -> str:
    """A cost, agent and judge apart, each model without a price said once:
    ``$0.0300 (agent $0.0100 · judge $0.0200)``; ``unknown: no price for x (agent); judge —``;
    ``at least $0.0100: no price for j (judge); agent $0.0100``."""
    both = cost.both
    if not both.unpriced:
        return (
            f"{format_cost(both)} (agent {format_cost(cost.agent)} · "
            f"judge {format_cost(cost.judge)})"
        )
    parts = (("agent", cost.agent), ("judge", cost.judge))
    missing = [_unpriced_text(name, part) for name, part in parts if part.unpriced]
    priced = [f"{name} {format_cost(part)}" for name, part in parts if not part.unpriced]
    head = "unknown" if not both.usd else f"at least {format_usd(both.usd)}"
    return f"{head}: " + "; ".join([*missing, *priced])


def _unpriced_text(name: str, part: Cost) -> str:
    """``no price for x (agent)``; ``no price for x (judge, beyond its $0.0100)``."""
    beyond = f", beyond its {format_usd(part.usd)}" if part.usd else ""
    return f"no price for {', '.join(part.unpriced)} ({name}{beyond})"


# Significant digits a cost below a cent keeps (from a cent to a dollar: four decimals).
COST_DIGITS = 3
# A cost below a unit of this many decimals is too small to matter (a ten-billionth of a cent).
COST_MAX_DECIMALS = 12


def format_usd(usd: float) -> str:
    """The one money format (pages, the Markdown and JUnit exports, compare, the gate): zero,
    a free model's cost, is ``$0``; from a dollar, two decimals (``$12.34``); from a cent, four
    (``$0.0123``, ``$0.5200``); below a cent, three significant digits, zeros kept
    (``$0.00123``, ``$0.0000182``, ``$0.0000180``): every amount below a cent reads with the
    same precision, and a turn's or a case's cost never reads ``$0.0000`` beside a run's
    ``$0.000100``. A cost below ``$0.000000000001`` reads ``<$0.000000000001``."""
    if usd == 0:
        return "$0"
    if usd < 0:
        return f"-{format_usd(-usd)}"
    if round(usd, 4) >= 1:
        return f"${usd:,.2f}"
    if round(usd, 4) >= 0.01:
        return f"${usd:.4f}"
    rounded = float(f"{usd:.{COST_DIGITS}g}")  # 0.0099996 -> 0.01: a cent, four decimals
    if rounded >= 0.01:
        return f"${rounded:.4f}"
    if rounded < 10.0**-COST_MAX_DECIMALS:
        return f"<${10.0**-COST_MAX_DECIMALS:.{COST_MAX_DECIMALS}f}"
    decimals = COST_DIGITS - 1 - math.floor(math.log10(rounded))  # 0.0000182 -> 7
    return f"${rounded:.{decimals}f}"


def format_cost(cost: Cost) -> str:
    """``$0.0123``; ``unknown price (model x)``; ``$0.0123 + unknown price (model x)`` when
    part is priced; ``—`` when no tokens were recorded. Never ``$0`` for an unknown price."""
    if not cost.counted:
        return "—"
    if not cost.unpriced:
        return format_usd(cost.usd)
    unknown = f"unknown price ({', '.join(cost.unpriced)})"
    return f"{format_usd(cost.usd)} + {unknown}" if cost.usd else unknown


def unpriced_models(models: Iterable[str | None], table: PriceTable) -> tuple[str, ...]:
    """The named models ``table`` has no price for, in order, once each."""
    return tuple(dict.fromkeys(m for m in models if m and table.price_of(m) is None))


def warn_unpriced(
    models: Sequence[str], *, run_id: int | None, when: str, table: PriceTable
) -> None:
    """Log one warning naming a run's models without a price (nothing when all have one):
    their tokens' cost is unknown until a price file gives it."""
    if not models:
        return
    log.warning(
        "run %s %s with no price for %s: its cost is unknown (prices: %s); "
        "add them to a price file ($%s, docs/cost.md)",
        run_id,
        when,
        ", ".join(models),
        table.source,
        PRICES_ENV,
        extra={
            "event": "unpriced_models",
            "run_id": run_id,
            "models": list(models),
            "prices": table.source,
        },
    )


def agent_model_name(agent_config: Mapping[str, Any] | None) -> str | None:
    """The agent's model name in a config snapshot (``model.name``)."""
    model = (agent_config or {}).get("model")
    name = model.get("name") if isinstance(model, Mapping) else None
    return name if isinstance(name, str) and name else None


# --- the price file ----------------------------------------------------------------------------


class _PriceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float | None = Field(default=None, ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cached_in_prompt: bool = False


class _PriceFileIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: dict[str, _PriceIn]


def load_price_file(path: str | Path) -> dict[str, Price]:
    """The prices of a YAML or JSON file (``models: {name: {input, output, cache_write?,
    cache_read?, cached_in_prompt?}}``; absent cache prices are the input price). Raises
    PriceFileError naming the file and the field at fault."""
    where = Path(path)
    try:
        text = where.read_text(encoding="utf-8")
    except OSError as exc:
        raise PriceFileError(f"price file {where}: cannot read it ({exc.strerror})") from None
    try:
        data = json.loads(text) if where.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0]
        raise PriceFileError(f"price file {where}: not valid YAML or JSON ({first})") from None
    try:
        parsed = _PriceFileIn.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        field_path = ".".join(str(part) for part in error["loc"]) or "(the file)"
        raise PriceFileError(f"price file {where}: {field_path}: {error['msg']}") from None
    return {
        name.strip().lower(): Price(
            entry.input,
            entry.output,
            cache_write=entry.input if entry.cache_write is None else entry.cache_write,
            cache_read=entry.input if entry.cache_read is None else entry.cache_read,
            cached_in_prompt=entry.cached_in_prompt,
        )
        for name, entry in parsed.models.items()
    }


def default_table() -> PriceTable:
    return PriceTable(DEFAULT_PRICES, DEFAULTS_NAMED)


def price_table(path: str | Path | None = None) -> PriceTable:
    """The defaults with the price file (``path``, else ``$HOLODECK_PRICES``) over them. The
    file is read again when it changes. Raises PriceFileError for a bad file."""
    where, stamp = price_table_key(path)
    if not where:
        return default_table()
    return _table_of(where, stamp)


def price_table_key(path: str | Path | None = None) -> tuple[str, int]:
    """Which price table ``price_table`` reads: the price file and its modification time
    ("" and 0: the defaults; -1: a file that cannot be read)."""
    where = str(path if path is not None else os.environ.get(PRICES_ENV, "").strip())
    if not where:
        return "", 0
    try:
        return where, Path(where).stat().st_mtime_ns
    except OSError:
        return where, -1  # load_price_file says why it cannot be read


@functools.lru_cache(maxsize=8)
def _table_of(path: str, stamp: int) -> PriceTable:
    return PriceTable(
        {**DEFAULT_PRICES, **load_price_file(path)},
        f"{path} over {DEFAULTS_NAMED}",
    )


def _usage(usage: TokenUsage | Mapping[str, Any] | None) -> TokenUsage | None:
    if usage is None or isinstance(usage, TokenUsage):
        return usage
    try:
        return TokenUsage.model_validate(dict(usage))
    except ValidationError:
        return None  # a stored usage we cannot read counts as none recorded
