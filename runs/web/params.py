"""Query-string parameters, validated: a bad value is a 400 with a message naming it, never a
500 from deep in the database (an integer beyond 64 bits, a NUL byte, a date out of range).
The rules themselves live in runs/core/queryvalues.py, which the API's schemas use too.

Each refusal is a ``BadParam`` naming its parameter, so a page with a filter form can show the
form again with the message next to the field (``params_or_errors``) instead of a bare 400."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from django import forms
from django.core.exceptions import BadRequest, ValidationError
from django.http import HttpRequest, QueryDict
from django.utils.dateparse import parse_date, parse_datetime

from runs.core.queryvalues import (
    MAX_INT,
    MAX_TEXT,
    QueryValueError,
    is_ascii_int,
    parse_aware_datetime,
    parse_int,
    parse_text,
    shift,
)

__all__ = ["MAX_INT", "MAX_TEXT"]
# The parameters come from a request's query string, or a copy of it (``params_or_errors``).
Query = HttpRequest | QueryDict
TRUE_WORDS = {"1", "true", "on", "yes"}
FALSE_WORDS = {"", "0", "false", "off", "no"}


class BadParam(BadRequest):
    """A query parameter's value refused: ``name`` is the parameter, the message says why."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def params_or_errors[T](
    request: HttpRequest, parse: Callable[[Query], T]
) -> tuple[T, dict[str, str]]:
    """``parse(request.GET)``, with each parameter it refuses dropped and parsed again: the
    result and the errors (parameter -> message; empty when all were good), for a page that
    shows its filter form with the message next to the field."""
    query: QueryDict = request.GET
    errors: dict[str, str] = {}
    while True:
        try:
            return parse(query), errors
        except BadParam as error:
            if error.name in errors or error.name not in query:
                raise  # not one parameter's fault: dropping it would not help
            errors[error.name] = field_message(error)
            query = query.copy()
            del query[error.name]


def field_message(error: BadParam) -> str:
    """The message as said next to its field: without the ``?name=`` it starts with."""
    return str(error).removeprefix(f"?{error.name}=").strip()


def shown_value(request: HttpRequest, name: str, errors: dict[str, str]) -> str:
    """What a form field shows: the value given, also when it was refused (to be fixed)."""
    raw = request.GET.get(name, "")
    return raw.replace("\x00", "")[:MAX_TEXT] if name in errors else raw.strip()


def _get(source: Query) -> QueryDict:
    return source.GET if isinstance(source, HttpRequest) else source


def text_param(request: Query, name: str, *, max_length: int = MAX_TEXT) -> str:
    try:
        return parse_text(_get(request).get(name, "").strip(), max_length=max_length)
    except QueryValueError as error:
        raise BadParam(name, f"?{name}= {error}") from None


def int_param(request: Query, name: str, *, minimum: int = 0, maximum: int = MAX_INT) -> int | None:
    raw = text_param(request, name)
    if raw == "":
        return None
    try:
        return parse_int(raw, minimum=minimum, maximum=maximum)
    except QueryValueError as error:
        raise BadParam(name, f"?{name}= {error}") from None


def page_param(request: Query, name: str) -> str | None:
    """A list's page number for ``Paginator.get_page``, which reads any page it cannot as the
    first: the value given when it is ASCII digits, else None (``get_page`` would read "٣" as
    page 3, as ``int()`` does)."""
    raw = _get(request).get(name, "").strip()
    return raw if raw.isascii() and raw.isdigit() else None


def float_param(request: Query, name: str, *, minimum: float, maximum: float) -> float | None:
    raw = text_param(request, name)
    if raw == "":
        return None
    try:
        if not raw.isascii():  # float() takes Unicode digits such as "١.٥"
            raise ValueError(raw)
        value = float(raw)
    except ValueError:
        raise BadParam(name, f"?{name}={raw[:40]!r} is not a number") from None
    if not minimum <= value <= maximum:  # NaN fails this too
        raise BadParam(name, f"?{name}= must be between {minimum:g} and {maximum:g}")
    return value


def flag_param(request: Query, name: str) -> bool:
    raw = text_param(request, name).lower()
    if raw in TRUE_WORDS:
        return True
    if raw in FALSE_WORDS:
        return False
    raise BadParam(name, f"?{name}= must be 1 or 0")


def choice_param(request: Query, name: str, choices: Iterable[str]) -> str:
    allowed = set(choices)
    raw = text_param(request, name)
    if raw and raw not in allowed:
        raise BadParam(name, f"?{name}= must be one of {', '.join(sorted(allowed))}")
    return raw


def datetime_param(
    request: Query, name: str, *, margin: timedelta = timedelta(0)
) -> datetime | None:
    """An ISO datetime (a bare date means its midnight, UTC); ``margin`` is subtracted."""
    raw = text_param(request, name)
    if raw == "":
        return None
    try:
        parsed = parse_datetime(raw)
        if parsed is None and (day := parse_date(raw)) is not None:
            parsed = datetime(day.year, day.month, day.day)
    except ValueError:
        parsed = None
    if parsed is None:
        raise BadParam(name, f"?{name}={raw[:40]!r} is not a date or an ISO date and time")
    try:
        return shift(parse_aware_datetime(parsed), -margin)
    except QueryValueError as error:
        raise BadParam(name, f"?{name}= {error}") from None


def _list_values(request: Query, name: str) -> list[str]:
    """Values given as ``name=a,b`` and/or repeated ``name=a&name=b``."""
    values: list[str] = []
    for raw in _get(request).getlist(name):
        try:
            parse_text(raw, max_length=MAX_TEXT * 10)
        except QueryValueError as error:
            raise BadParam(name, f"?{name}= {error}") from None
        values += [part.strip() for part in raw.split(",") if part.strip()]
    return values


def int_list_param(request: Query, name: str, *, most: int) -> list[int]:
    """Whole numbers (ids), duplicates dropped, in the order given; at most ``most``."""
    values: list[int] = []
    for raw in _list_values(request, name):
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
            raise BadParam(name, f"?{name}= takes run ids (whole numbers), got {raw[:40]!r}")
        if int(raw) not in values:
            values.append(int(raw))
    if len(values) > most:
        raise BadParam(name, f"?{name}= takes at most {most} values, got {len(values)}")
    return values


def choice_list_param(request: Query, name: str, choices: Iterable[str]) -> list[str]:
    """Several of ``choices``, in the choices' order."""
    allowed = list(choices)
    values = _list_values(request, name)
    for value in values:
        if value not in allowed:
            raise BadParam(name, f"?{name}= takes {', '.join(allowed)}; got {value[:40]!r}")
    return [choice for choice in allowed if choice in values]


def text_list_param(
    request: Query, name: str, *, most: int, max_length: int = MAX_TEXT
) -> list[str]:
    """Texts given as repeated ``name=a&name=b`` (never split at commas: a metric's name may
    hold one), duplicates and empty values dropped, in the order given; at most ``most``."""
    given = _get(request).getlist(name)
    if len(given) > most:
        raise BadParam(name, f"?{name}= takes at most {most} values, got {len(given)}")
    values: list[str] = []
    for raw in given:
        try:
            value = parse_text(raw.strip(), max_length=max_length)
        except QueryValueError as error:
            raise BadParam(name, f"?{name}= {error}") from None
        if value and value not in values:
            values.append(value)
    return values


# --- form fields ------------------------------------------------------------------------------
# Django's integer and model-choice fields read a value with ``int()``, which takes any
# script's digits ("٣" is 3): these take ASCII digits only, as the query parameters do.


class AsciiIntegerField(forms.IntegerField):
    """A whole number in ASCII digits (an optional sign); anything else is "Enter a whole
    number."."""

    def to_python(self, value: object) -> int | None:
        if isinstance(value, str) and value.strip() and not is_ascii_int(value.strip()):
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        return super().to_python(value)


class AsciiModelChoiceField(forms.ModelChoiceField):  # type: ignore[type-arg]
    """A row chosen by its id in ASCII digits; anything else is not one of the choices."""

    def to_python(self, value: object) -> object:
        if isinstance(value, str) and value.strip() and not is_ascii_int(value.strip()):
            raise ValidationError(
                self.error_messages["invalid_choice"],
                code="invalid_choice",
                params={"value": value},
            )
        return super().to_python(value)
