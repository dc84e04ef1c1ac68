"""Graders: Django-free functions that turn (response, expectation, options) into a ``Grade``.

Modules (import what you need; nothing heavy is imported here):

- ``graders.matchers``: tool-argument matchers (literal, fuzzy, regex) and their parser;
- ``graders.tool_calls``: assertions on the tool calls of one turn (``assert_tools``);
- ``graders.deterministic``: ``grade_equality``, ``grade_numeric``, ``response_path``;
- ``graders.code``: the code-grader harness (``GraderContext``, ``GraderResult``,
  ``run_code_grader`` and its synchronous twin ``run_code_grader_sync``);
- ``graders.nlp``: BLEU, ROUGE-L and METEOR (libraries imported on first use);
- ``graders.judges``: LLM judges through deepeval (imported on first use).
"""

from __future__ import annotations

from graders.result import Grade, JudgeUsage

__all__ = ["Grade", "JudgeUsage"]
