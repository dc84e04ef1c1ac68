"""Calling python function tools and describing their parameters as JSON schema."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any, Literal

from runs.core.backends.function_tools import (
    call_function_tool,
    function_description,
    function_tool_schema,
)


def run(fn: Any, args: dict[str, Any]) -> tuple[Any, str | None]:
    return asyncio.run(call_function_tool(fn, args))


def test_a_sync_tool_runs_in_a_worker_thread_with_keyword_arguments() -> None:
    threads: list[str] = []

    def subtract(a: float, b: float) -> float:
        threads.append(threading.current_thread().name)
        return a - b

    assert run(subtract, {"a": 206588, "b": 181001}) == (25587, None)
    assert threads != [threading.main_thread().name]


def test_an_async_tool_is_awaited() -> None:
    async def shout(text: str) -> str:
        await asyncio.sleep(0)
        return text.upper()

    assert run(shout, {"text": "hi"}) == ("HI", None)


def test_a_tool_exception_becomes_an_error_string_with_its_type() -> None:
    def divide(a: float, b: float) -> float:
        return a / b

    assert run(divide, {"a": 1, "b": 0}) == (None, "ZeroDivisionError: division by zero")


def test_wrong_arguments_are_a_tool_error_not_a_crash() -> None:
    def one(a: int) -> int:
        return a

    result, error = run(one, {"b": 1})
    assert result is None
    assert error is not None and error.startswith("TypeError: ")


def test_the_schema_comes_from_the_signature_hints_and_google_docstring() -> None:
    def lookup(
        ticker: str,
        years: list[int],
        scale: float = 1.0,
        period: Literal["annual", "quarterly"] = "annual",
        note: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Look up a figure.

        Args:
            ticker: The stock ticker,
                in upper case.
            years (list[int]): Fiscal years.
            scale: Multiplier.

        Returns:
            The figures.
        """
        return {}

    assert function_tool_schema(lookup) == {
        "type": "object",
        "properties": {
            "ticker": {"type": "string", "description": "The stock ticker, in upper case."},
            "years": {
                "type": "array",
                "items": {"type": "integer"},
                "description": "Fiscal years.",
            },
            "scale": {"type": "number", "description": "Multiplier.", "default": 1.0},
            "period": {"enum": ["annual", "quarterly"], "default": "annual"},
            "note": {"type": ["string", "null"], "default": None},
        },
        "required": ["ticker", "years"],
    }


def test_sphinx_and_numpy_docstrings_and_annotated_descriptions_are_read() -> None:
    def sphinx(a: int, b: bool) -> None:
        """Do it.

        :param a: The first.
        :param bool b: The flag.
        """

    def numpy(a: int, b: dict[str, Any]) -> None:
        """Do it.

        Parameters
        ----------
        a : int
            The first.
        b : dict
            The mapping.
        """

    def annotated(a: Annotated[int, "Counted apples."], b: Any) -> None:
        """Do it."""

    assert function_tool_schema(sphinx)["properties"] == {
        "a": {"type": "integer", "description": "The first."},
        "b": {"type": "boolean", "description": "The flag."},
    }
    assert function_tool_schema(numpy)["properties"] == {
        "a": {"type": "integer", "description": "The first."},
        "b": {"type": "object", "description": "The mapping."},
    }
    assert function_tool_schema(annotated)["properties"] == {
        "a": {"type": "integer", "description": "Counted apples."},
        "b": {},
    }


def test_a_tool_without_parameters_has_an_empty_object_schema() -> None:
    def now() -> str:
        return "noon"

    assert function_tool_schema(now) == {"type": "object", "properties": {}}


def test_the_description_is_the_configured_one_else_the_docstring_summary() -> None:
    def subtract(a: float, b: float) -> float:
        """Subtract b from a.

        Args:
            a: x
        """
        return a - b

    assert function_description(subtract, "Configured") == "Configured"
    assert function_description(subtract, "") == "Subtract b from a."
