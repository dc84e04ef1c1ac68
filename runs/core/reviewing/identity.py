"""A turn's identity across runs and commits, and what made it fail.

``turn_key``: the case (by name, else index) and the turn's position — the same in every run of
a project, repetitions included. ``definition``: a digest of what defines the turn (its input,
ground truth, expected tools and the metrics that graded it) — a review made on a turn whose
definition has since changed is stale, never current. ``failure``: a digest of how it failed
(its verdict, the metrics that failed or could not grade, the tool assertions that failed, and
whether it errored) — a later run failing the same way shows the earlier review as "known".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from runs.core.verdicts.outcomes import Outcome

DIGEST_CHARS = 32


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def turn_key(case_name: str | None, case_index: int, turn_index: int) -> str:
    """The turn's place: its case's name (else its index) and its position."""
    case = case_name if case_name else f"#{case_index}"
    return _digest(["turn", case, turn_index])


def definition_digest(
    *,
    input: str,
    ground_truth: str | None,
    expected_tools: Any,
    metrics: Iterable[tuple[str, str, float | None]],
) -> str:
    """What defines the turn: its input, ground truth, expected tools, and its metrics' (name,
    kind, threshold)."""
    graded = sorted((name, kind, threshold) for name, kind, threshold in metrics)
    return _digest(["definition", input, ground_truth, expected_tools, graded])


def failure_digest(
    *,
    outcome: str,
    failed_metrics: Iterable[str],
    failed_tools: Iterable[str],
    errored: bool,
) -> str:
    """How it failed: "" for a turn that passed."""
    if Outcome.of(outcome) is Outcome.PASSED:
        return ""
    return _digest(["failure", outcome, sorted(failed_metrics), sorted(failed_tools), errored])
