"""Diffs for the compare pages, rendered safely: every value from a run is escaped text.

- ``word_diff``: two texts as one, words removed in ``<del>`` and added in ``<ins>``;
- ``tool_call_diff``: two turns' tool calls side by side, call by call (name, args, result);
- ``line_diff``: a unified diff of two texts (agent.yaml), line by line with a class per line;
- ``config_rows``: what to set side by side from two runs' config snapshots;
- ``file_diff``: one file of two runs' snapshots (text: a line diff; binary: the sizes).
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from runs.core.bytesize import size_text

_TOKEN = re.compile(r"\s+|[^\s]+")
# Beyond this many tokens a side, the diff would be slow and unreadable: show both texts.
MAX_DIFF_TOKENS = 20_000


def word_diff(before: str | None, after: str | None) -> SafeString:
    """One text: unchanged words plain, removed ``<del>``, added ``<ins>`` (all escaped)."""
    old, new = _TOKEN.findall(before or ""), _TOKEN.findall(after or "")
    if len(old) > MAX_DIFF_TOKENS or len(new) > MAX_DIFF_TOKENS:
        return format_html("<del>{}</del><ins>{}</ins>", before or "", after or "")
    parts: list[tuple[str, str]] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        if op in ("delete", "replace"):
            parts.append(("del", "".join(old[a1:a2])))
        if op in ("insert", "replace"):
            parts.append(("ins", "".join(new[b1:b2])))
        if op == "equal":
            parts.append(("", "".join(old[a1:a2])))
    return format_html_join(
        "",
        "{}",
        ((format_html("<{0}>{1}</{0}>", tag, text) if tag else text,) for tag, text in parts),
    )


@dataclass(frozen=True)
class CallPair:
    """The n-th tool call of each side, and what differs between them."""

    index: int
    left: dict[str, Any] | None
    right: dict[str, Any] | None
    changes: list[str]

    @property
    def same(self) -> bool:
        return not self.changes


def tool_call_diff(left: list[dict[str, Any]], right: list[dict[str, Any]]) -> list[CallPair]:
    """Calls paired by position (order matters to an agent); each pair says what changed."""
    pairs = []
    for index in range(max(len(left), len(right))):
        a = left[index] if index < len(left) else None
        b = right[index] if index < len(right) else None
        pairs.append(CallPair(index, a, b, _call_changes(a, b)))
    return pairs


def _call_changes(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    if a is None:
        return ["only on the right"]
    if b is None:
        return ["only on the left"]
    changes = []
    if a.get("name") != b.get("name"):
        changes.append("tool")
    args_a, args_b = a.get("args") or {}, b.get("args") or {}
    if not isinstance(args_a, dict) or not isinstance(args_b, dict):
        # Args kept as text (a transcript's, cut at its cap): compared whole.
        return [*changes, *(["args"] if args_a != args_b else []), *_outcome_changes(a, b)]
    for key in sorted(set(args_a) | set(args_b), key=str):
        if key not in args_b:
            changes.append(f"arg {key} removed")
        elif key not in args_a:
            changes.append(f"arg {key} added")
        elif args_a[key] != args_b[key]:
            changes.append(f"arg {key}")
    return changes + _outcome_changes(a, b)


def _outcome_changes(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    changes = []
    if _canonical(a.get("result")) != _canonical(b.get("result")):
        changes.append("result")
    if a.get("error") != b.get("error"):
        changes.append("error")
    return changes


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "del", "hunk", "ctx", "head"
    text: str


def line_diff(before: str, after: str, *, labels: tuple[str, str]) -> list[DiffLine]:
    """A unified diff (3 lines of context), each line with its kind for colouring."""
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), fromfile=labels[0], tofile=labels[1], lineterm=""
    )
    out = []
    for line in lines:
        if line.startswith(("---", "+++")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        out.append(DiffLine(kind, line))
    return out


@dataclass(frozen=True)
class ConfigRow:
    label: str
    left: str
    right: str

    @property
    def changed(self) -> bool:
        return self.left != self.right


def config_rows(left: dict[str, Any], right: dict[str, Any]) -> list[ConfigRow]:
    """The settings that matter most when a run changed: model, instructions, tools, metrics.

    ``left``/``right``: ``{"snapshot": config_snapshot, "prompt_version": ..., "git": {...}}``.
    """
    fields = [
        ("provider", ("snapshot", "model", "provider")),
        ("model", ("snapshot", "model", "name")),
        ("temperature", ("snapshot", "model", "temperature")),
        ("max tokens", ("snapshot", "model", "max_tokens")),
        ("top p", ("snapshot", "model", "top_p")),
        ("endpoint", ("snapshot", "model", "endpoint")),
        ("instructions (inline)", ("snapshot", "instructions", "inline")),
        ("instructions (file)", ("snapshot", "instructions", "file")),
        ("prompt version", ("prompt_version", "version")),
        ("prompt author", ("prompt_version", "author")),
        ("prompt tags", ("prompt_version", "tags")),
        ("commit", ("git", "commit")),
        ("branch", ("git", "branch")),
        ("uncommitted changes", ("git", "dirty")),
        ("engine", ("git", "engine")),
    ]
    rows = [ConfigRow(label, _shown(left, path), _shown(right, path)) for label, path in fields]
    rows.append(ConfigRow("tools", _tools(left), _tools(right)))
    rows.append(ConfigRow("metrics", _metrics(left), _metrics(right)))
    return rows


def _dig(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _shown(data: dict[str, Any], path: tuple[str, ...]) -> str:
    value = _dig(data, path)
    if value is None or value == "":
        return "–"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _tools(data: dict[str, Any]) -> str:
    tools = _dig(data, ("snapshot", "tools")) or []
    names = [f"{t.get('name')} ({t.get('type')})" for t in tools if isinstance(t, dict)]
    return ", ".join(names) or "–"


def _metrics(data: dict[str, Any]) -> str:
    metrics = _dig(data, ("snapshot", "evaluations", "metrics")) or []
    names = []
    for metric in metrics:
        if not isinstance(metric, dict):
            continue
        name = metric.get("name") or metric.get("metric") or metric.get("metric_type")
        threshold = metric.get("threshold")
        names.append(f"{name} ({metric.get('type', 'standard')}"
                     + (f", ≥ {threshold}" if threshold is not None else "") + ")")  # fmt: skip
    return ", ".join(names) or "–"


# --- the files of two snapshots ---------------------------------------------------------------

# What the config diff says of a differing file to a user who is not staff: a snapshot may hold
# secrets (a .env outside git), so its contents are for staff only, like the file pages.
CONTENTS_STAFF_ONLY = "contents shown to staff only"

# Lines of one file's diff the config diff shows before its "show all" link.
MAX_FILE_DIFF_LINES = 400
# Beyond this size or this many lines a side, difflib (quadratic at worst) could take seconds
# to minutes and the diff is useless to read: the sizes are said instead. A file whose manifest
# size is over the byte limit is not even read.
MAX_DIFF_FILE_BYTES = 256 * 1024
MAX_DIFF_FILE_LINES = 5_000


@dataclass(frozen=True)
class FileDiff:
    """One file that differs between two snapshots: its line diff (text files), or a note
    (binary, too large, only its mode changed)."""

    path: str
    status: str  # "changed", "added", "removed"
    lines: list[DiffLine]
    note: str = ""
    hidden: int = 0  # diff lines left out of ``lines`` (0: the whole diff is shown)
    added: int = 0  # lines added and removed, over the whole diff
    removed: int = 0


def text_of(data: bytes) -> str | None:
    """The file as text, or None for a binary file (a NUL byte, or not UTF-8)."""
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def file_diff(
    path: str,
    before: bytes | None,
    after: bytes | None,
    *,
    labels: tuple[str, str],
    modes: tuple[int, int] = (0o644, 0o644),
    most_lines: int | None = MAX_FILE_DIFF_LINES,
) -> FileDiff:
    """The diff of one file between two snapshots (``before`` None: added; ``after`` None:
    removed), at most ``most_lines`` lines of it (None: all)."""
    status = "added" if before is None else "removed" if after is None else "changed"
    notes = []
    if status == "changed" and modes[0] != modes[1]:
        notes.append(f"mode {modes[0]:o} → {modes[1]:o}")
    old, new = before or b"", after or b""
    if old == new:  # only the mode changed, or an empty file came or went
        return FileDiff(path, status, [], "; ".join(notes) or "empty file")
    old_text, new_text = text_of(old), text_of(new)
    sizes = _sizes(before, after)
    if old_text is None or new_text is None:
        return FileDiff(path, status, [], "; ".join([*notes, f"binary, differs ({sizes})"]))
    if max(len(old), len(new)) > MAX_DIFF_FILE_BYTES:
        notes.append(too_large_note(_side(before), _side(after)))
        return FileDiff(path, status, [], "; ".join(notes))
    old_lines, new_lines = old_text.splitlines(), new_text.splitlines()
    if max(len(old_lines), len(new_lines)) > MAX_DIFF_FILE_LINES:
        notes.append(too_large_note(_side(before, len(old_lines)), _side(after, len(new_lines))))
        return FileDiff(path, status, [], "; ".join(notes))
    head = (
        "/dev/null" if before is None else labels[0],
        "/dev/null" if after is None else labels[1],
    )
    lines = line_diff(old_text, new_text, labels=head)
    added = sum(line.kind == "add" for line in lines)
    removed = sum(line.kind == "del" for line in lines)
    shown = lines if most_lines is None else lines[:most_lines]
    return FileDiff(path, status, shown, "; ".join(notes), len(lines) - len(shown), added, removed)


def _sizes(before: bytes | None, after: bytes | None) -> str:
    if before is None:
        return size_text(len(after or b""))
    if after is None:
        return size_text(len(before))
    return f"{size_text(len(before))} → {size_text(len(after))}"


def diff_too_large(*sizes: int | None) -> bool:
    """Whether a file of these sizes (from the manifests; None: absent) is over the diff limit,
    so that it need not be read."""
    return max((size or 0 for size in sizes), default=0) > MAX_DIFF_FILE_BYTES


def file_unread(
    path: str,
    sizes: tuple[int | None, int | None],
    *,
    modes: tuple[int, int] = (0o644, 0o644),
    note: str = "",
) -> FileDiff:
    """A differing file left unread, from its manifest sizes alone (None: absent on that side):
    ``note`` says why (default: too large to diff, with the sizes)."""
    before, after = sizes
    status = "added" if before is None else "removed" if after is None else "changed"
    notes = (
        [f"mode {modes[0]:o} → {modes[1]:o}"]
        if status == "changed" and modes[0] != modes[1]
        else []
    )
    side = [(size_text(size),) if size is not None else None for size in sizes]
    notes.append(note or too_large_note(side[0], side[1]))
    return FileDiff(path, status, [], "; ".join(notes))


def too_large_note(before: tuple[str, ...] | None, after: tuple[str, ...] | None) -> str:
    """ "too large to diff here: 6,000 lines / 300.0 KB → 6,001 lines / 300.1 KB; download both
    snapshots" (a side None: the file is absent there)."""
    shown = " → ".join(" / ".join(side) for side in (before, after) if side is not None)
    return f"too large to diff here: {shown}; download both snapshots"


def _side(data: bytes | None, lines: int | None = None) -> tuple[str, ...] | None:
    if data is None:
        return None
    size = size_text(len(data))
    return (size,) if lines is None else (f"{lines:,} line{'s' if lines != 1 else ''}", size)
