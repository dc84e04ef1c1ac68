"""A plain value built from another object's same-named attributes: a row's facts copied into a
frozen dataclass without spelling each name twice (``id=row.id, digest=row.digest, …``).
Django-free: it reads attributes, whatever holds them."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


def of_attributes[T: DataclassInstance](cls: type[T], source: object, /, **given: Any) -> T:
    """``cls`` with each field ``given``, or else read off ``source`` by its name (a field
    ``source`` lacks keeps its default, or the call fails as a missing argument would)."""
    values = {
        field.name: getattr(source, field.name)
        for field in fields(cls)
        if field.name not in given and hasattr(source, field.name)
    }
    return cls(**values, **given)
