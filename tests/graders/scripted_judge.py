"""A deterministic judge for deepeval's real metric code, offline.

``ScriptedJudge`` is a ``DeepEvalBaseLLM``: deepeval calls ``a_generate(prompt, schema=...)``
for each step of a metric (G-Eval's steps and score, a RAG metric's truths / claims /
statements / verdicts / reason). The judge answers from a router keyed by the schema deepeval
asks for, e.g. ``"faithfulness.Verdicts"`` or ``"g_eval.ReasonScore"``, and validates the answer
against that schema, so a test script that drifts from deepeval's schemas fails loudly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from graders.judge_models import quiet_deepeval

quiet_deepeval()

from deepeval.models import DeepEvalBaseLLM  # noqa: E402  (after the environment switches)
from pydantic import BaseModel  # noqa: E402

# A scripted answer: a JSON-like dict (validated against the schema), raw text (handed to
# deepeval unparsed, for invalid-JSON tests), or a function of the prompt returning either.
Answer = dict[str, Any] | str | Callable[[str], "dict[str, Any] | str"]


def schema_key(schema: type[BaseModel] | None) -> str:
    """``deepeval.metrics.faithfulness.schema.Verdicts`` -> ``faithfulness.Verdicts``."""
    if schema is None:
        return "text"
    package = schema.__module__.split(".")[-2]
    return f"{package}.{schema.__name__}"


class ScriptedJudge(DeepEvalBaseLLM):
    def __init__(
        self,
        answers: dict[str, Answer],
        *,
        name: str = "scripted-judge",
        delay_s: float = 0.0,
        failures_before_success: int = 0,
    ) -> None:
        self.answers = answers
        self.delay_s = delay_s
        self.failures_left = failures_before_success
        self.calls: list[tuple[str, str]] = []  # (schema key, prompt)
        super().__init__(name)

    def load_model(self) -> ScriptedJudge:
        return self

    def get_model_name(self) -> str:
        return str(self.name)

    def generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        raise NotImplementedError("the graders only use the async path")

    async def a_generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        key = schema_key(schema)
        self.calls.append((key, prompt))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.failures_left > 0:
            self.failures_left -= 1
            raise ConnectionError("scripted judge: connection reset")
        if key not in self.answers:
            raise LookupError(f"scripted judge has no answer for {key}")
        answer = self.answers[key]
        if callable(answer):
            answer = answer(prompt)
        if isinstance(answer, str) or schema is None:
            return answer
        return schema.model_validate(answer)

    @property
    def asked(self) -> list[str]:
        return [key for key, _ in self.calls]
