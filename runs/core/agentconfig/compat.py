"""Warnings for the HoloDeck agent.yaml fields HoloDeck Web accepts but does not act on.

A HoloDeck 0.7.1 agent.yaml loads unchanged: fields with a meaning here are honoured, the others
are accepted and reported, one line per field with its path (``LoadedAgent.warnings``, shown by
``validate_agent`` and the launch form).
"""

from __future__ import annotations

from functools import cache
from typing import Any, get_args

from pydantic import BaseModel

from runs.core.agentconfig.common import NotedModel, StrictModel, join_path

NO_EFFECT = "accepted for HoloDeck compatibility; has no effect in HoloDeck Web"


def ignored(why: str = "") -> str:
    """The warning text of an ignored field (``why`` adds the reason)."""
    return f"{NO_EFFECT} ({why})" if why else NO_EFFECT


def compat_warnings(
    model: BaseModel, path: str = "", *, skip: frozenset[str] = frozenset()
) -> list[str]:
    """``path.field: message`` for every ignored HoloDeck field set in ``model`` (and below it),
    and every note a validator left, in field order. Top-level fields in ``skip`` are not
    visited."""
    warnings: list[str] = []
    _walk(model, path, warnings, skip)
    return warnings


def _walk(model: BaseModel, path: str, out: list[str], skip: frozenset[str] = frozenset()) -> None:
    ignored_fields = model.holodeck_ignored if isinstance(model, StrictModel) else {}
    for name in _fields_that_may_warn(type(model)):
        if name in skip:
            continue
        value = getattr(model, name)
        if value is None:
            continue
        field_path = join_path(path, name)
        if name in ignored_fields:
            if name in model.model_fields_set:
                out.append(f"{field_path}: {ignored(ignored_fields[name])}")
            continue
        _walk_value(value, field_path, out)
    if isinstance(model, NotedModel):
        out.extend(f"{join_path(path, sub)}: {message}" for sub, message in model._compat_notes)


def _walk_value(value: Any, path: str, out: list[str]) -> None:
    if isinstance(value, BaseModel):
        _walk(value, path, out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _walk_value(item, f"{path}[{index}]", out)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, BaseModel | list | dict):
                _walk_value(item, join_path(path, str(key)), out)


@cache
def _fields_that_may_warn(cls: type[BaseModel]) -> tuple[str, ...]:
    """The fields of ``cls`` that are ignored or may hold a model that warns, in field order:
    the others are not visited (a big agent.yaml has 17,747 test cases to walk)."""
    ignored_fields = cls.holodeck_ignored if issubclass(cls, StrictModel) else {}
    return tuple(
        name
        for name, info in cls.model_fields.items()
        if name in ignored_fields or _may_warn(info.annotation)
    )


def _may_warn(annotation: Any) -> bool:
    """Whether a value of this type may hold a model with ignored fields or notes."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return (
            issubclass(annotation, NotedModel)
            or bool(getattr(annotation, "holodeck_ignored", None))
            or bool(_fields_that_may_warn(annotation))
        )
    return any(_may_warn(arg) for arg in get_args(annotation))
