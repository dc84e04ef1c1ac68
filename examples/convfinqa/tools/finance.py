"""Function tools of the ConvFinQA-style example agent: a table lookup and arithmetic.

The table is the one printed in the example filings (Northwind Logistics, fictional), so the
scripted provider's tool calls return real values and the graders check real arithmetic.
"""

from __future__ import annotations

# metric -> year -> value (thousands of dollars, except revenue in millions)
TABLE: dict[str, dict[int, float]] = {
    "net cash from operating activities": {2009: 206588, 2008: 181001, 2007: 160234},
    "revenue": {2009: 1450.2, 2008: 1302.7, 2007: 1199.5},
    "capital expenditures": {2009: 48210, 2008: 52305, 2007: 39870},
    "dividends paid": {2009: 31200, 2008: 29950, 2007: 27480},
}


def _normalise(name: str) -> str:
    return " ".join(name.lower().replace("_", " ").split())


def lookup(metric: str, year: int) -> float:
    """Read one number from the filing's table.

    Args:
        metric: the table row, e.g. "net cash from operating activities" or "revenue".
        year: the fiscal year column, e.g. 2009.
    """
    row = TABLE.get(_normalise(metric))
    if row is None:
        raise KeyError(f"no table row {metric!r}; rows are: {', '.join(TABLE)}")
    try:
        return row[int(year)]
    except (KeyError, ValueError):
        raise KeyError(f"no column {year!r} for {metric!r}; years are: {sorted(row)}") from None


def add(a: float, b: float) -> float:
    """Return a + b."""
    return a + b


def subtract(a: float, b: float) -> float:
    """Return a - b."""
    return a - b


def multiply(a: float, b: float) -> float:
    """Return a * b."""
    return a * b


def divide(a: float, b: float) -> float:
    """Return a / b."""
    return a / b


def greater(a: float, b: float) -> bool:
    """Return whether a > b."""
    return a > b


def exp(a: float, b: float) -> float:
    """Return a raised to the power b."""
    return float(a**b)
