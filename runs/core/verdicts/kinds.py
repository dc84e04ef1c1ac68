"""The kinds of grading, named once for every layer.

A metric's kind is its ``type`` in agent.yaml (``standard``, ``rag``, ``geval``, ``code``); tool
assertions are graded too and count as a kind of their own, ``tools``, wherever verdicts are
filtered or broken down by kind (compare, trends, the CI gate). LLM judges (``geval``, ``rag``)
may fail to produce a verdict: that is "not graded", never a low score.
"""

from __future__ import annotations

from typing import Literal, get_args

MetricKind = Literal["standard", "rag", "geval", "code"]

METRIC_KINDS: tuple[str, ...] = get_args(MetricKind)
TOOLS_KIND = "tools"
# Every kind a verdict can be broken down by, in the order pages list them.
KINDS: tuple[str, ...] = (*METRIC_KINDS, TOOLS_KIND)
JUDGE_KINDS: frozenset[str] = frozenset({"geval", "rag"})

KIND_LABELS: dict[str, str] = {
    "standard": "standard (deterministic, NLP)",
    "rag": "RAG judges",
    "geval": "G-Eval judges",
    "code": "code graders",
    TOOLS_KIND: "tool assertions",
}


def kind_order(kind: str) -> int:
    """Sort key: the order of ``KINDS``, unknown kinds last."""
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


def kinds_parse(text: str) -> tuple[str, ...]:
    """``"rag,code"`` -> ``("rag", "code")`` in ``KINDS`` order; ValueError for an unknown one."""
    words = [word.strip() for word in text.split(",") if word.strip()]
    unknown = [word for word in words if word not in KINDS]
    if unknown:
        raise ValueError(f"unknown kind {unknown[0]!r}: use {', '.join(KINDS)}")
    return tuple(kind for kind in KINDS if kind in words)
