"""runs.core.attributes: a frozen dataclass from another object's same-named attributes."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from runs.core.attributes import of_attributes


@dataclass(frozen=True)
class Facts:
    id: int
    name: str
    size: int = 0


def test_it_reads_each_field_off_the_source_by_its_name() -> None:
    row = SimpleNamespace(id=3, name="a", size=9, other="left out")
    assert of_attributes(Facts, row) == Facts(id=3, name="a", size=9)


def test_a_given_value_wins_over_the_sources_attribute() -> None:
    row = SimpleNamespace(id=3, name="a", size=9)
    assert of_attributes(Facts, row, name="b") == Facts(id=3, name="b", size=9)


def test_a_field_the_source_lacks_keeps_its_default_or_fails_as_a_missing_argument() -> None:
    assert of_attributes(Facts, SimpleNamespace(id=1, name="x")) == Facts(id=1, name="x")
    with pytest.raises(TypeError, match="name"):
        of_attributes(Facts, SimpleNamespace(id=1))
