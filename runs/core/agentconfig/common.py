"""What every agent.yaml model shares: the strict base, ``spec_error`` and the agent-directory
helpers validators use.

Validators that need the agent directory (code graders, function tools, instruction/transcript/
input files) read it from the validation context that ``runs.core.agentconfig.loader`` passes
(``{"base_dir": Path, "resolver": CodeResolver}``); without a context they check only the shape,
so a stored config snapshot can be re-validated anywhere.

Validators raise ``spec_error(message, subpath)``: the loader appends ``subpath`` to the
pydantic location so a problem points at the exact field
(``turns[2].expected_tools[1].args.a.regex``).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, PrivateAttr, ValidationInfo
from pydantic_core import PydanticCustomError

from runs.core.agentconfig.resolve import CodeResolver
from runs.core.verdicts.kinds import METRIC_KINDS

SPEC_ERROR = "holodeck_spec"

# Tags of the discriminated unions (tools, metrics, expected tools). Pydantic puts the tag into
# an error's location; the loader drops these so paths read like the YAML
# (``evaluations[0].grader``).
UNION_TAGS = frozenset({*METRIC_KINDS, "function", "mcp", "tool-name", "tool-object"})


class StrictModel(BaseModel):
    """The base of every agent.yaml model: unknown fields are errors.

    ``holodeck_ignored`` names the fields a model accepts only because HoloDeck's agent.yaml has
    them (field -> why it has no effect, or ""); the loader reports them
    (``runs.core.agentconfig.compat``).
    """

    model_config = ConfigDict(extra="forbid")
    holodeck_ignored: ClassVar[dict[str, str]] = {}


class NotedModel(StrictModel):
    """A model whose validators may note a HoloDeck value run differently here:
    ``_compat_notes`` holds (subpath, message) warnings, reported like ignored fields.

    Only the models that note anything have it: pydantic initialises private attributes on
    every instance, a cost the models of 17,747 test cases should not pay.
    """

    _compat_notes: tuple[tuple[str, str], ...] = PrivateAttr(default=())

    def compat_note(self, subpath: str, message: str) -> None:
        self._compat_notes = (*self._compat_notes, (subpath, message))


def spec_error(message: str, subpath: str = "") -> PydanticCustomError:
    """A validation error with a human message and an optional field path below the model."""
    return PydanticCustomError(SPEC_ERROR, "{message}", {"message": message, "subpath": subpath})


def context_base_dir(info: ValidationInfo) -> Path | None:
    """The agent directory, when validating with the loader's context."""
    context = info.context
    if isinstance(context, dict) and isinstance(context.get("base_dir"), Path):
        return context["base_dir"]
    return None


def context_resolver(info: ValidationInfo) -> CodeResolver | None:
    """What resolves tool functions and code graders, given the loader's context."""
    context = info.context
    if isinstance(context, dict) and isinstance(context.get("resolver"), CodeResolver):
        return context["resolver"]
    return None


def local_path(base_dir: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else base_dir / path


def exists_if_local(info: ValidationInfo, value: str | None) -> bool:
    """False only when loading from a directory and ``value`` names no file there."""
    base_dir = context_base_dir(info)
    return base_dir is None or value is None or local_path(base_dir, value).is_file()


def non_empty(value: str | None, what: str) -> str | None:
    if value is not None and not value.strip():
        raise ValueError(f"{what} must not be empty")
    return value


def not_blank(what: str) -> AfterValidator:
    """A text field's validator refusing blank text, naming the field ``what`` in its
    message: ``name: Annotated[str, not_blank("model name")]``."""

    def check(value: str) -> str:
        non_empty(value, what)
        return value

    return AfterValidator(check)


def join_path(path: str, sub: str) -> str:
    """``path`` and then ``sub`` as a field path: ``a.b``, ``a[0]``, or either alone."""
    if not sub:
        return path
    if not path or sub.startswith("["):
        return path + sub
    return f"{path}.{sub}"
