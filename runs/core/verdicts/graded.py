"""What the verdict rules read of a metric, a turn and a case: small read-only shapes, so
``runs.core.verdicts.outcomes`` never imports the wire models that call it
(``runs.core.wire.models`` decides its verdicts with these rules; a stored row or a test double
fits them as well).

Every member is a read-only property, so a model whose field is narrower (a ``Literal`` kind, a
``list`` of its own metric model) still fits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class GradedMetric(Protocol):
    """A metric's result: whether it passed, why it could not grade, and its stored verdict."""

    @property
    def kind(self) -> str: ...

    @property
    def passed(self) -> bool: ...

    @property
    def error(self) -> str | None: ...

    @property
    def outcome(self) -> str | None: ...


class _GradedUnit(Protocol):
    """What a turn and a single-turn case both hold: their flags and the metrics they ran."""

    @property
    def passed(self) -> bool: ...

    @property
    def errors(self) -> Sequence[str]: ...

    @property
    def tools_matched(self) -> bool | None: ...

    @property
    def metric_results(self) -> Sequence[GradedMetric]: ...


class GradedTurn(_GradedUnit, Protocol):
    """A turn's result: whether it was skipped, and its stored verdict."""

    @property
    def skipped(self) -> bool: ...

    @property
    def outcome(self) -> str | None: ...


class GradedCase(_GradedUnit, Protocol):
    """A case's result: a single-turn case's own flags and metrics, a multi-turn case's turns."""

    @property
    def turns(self) -> Sequence[GradedTurn] | None: ...
