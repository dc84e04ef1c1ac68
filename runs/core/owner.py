"""Who runs a case: the process identity a claim records, and whether that process still lives.

The identity is taken when it is asked for, never at import: a Celery prefork child imports
this module in its parent before the fork, and an identity computed then would name the parent
(every child would claim as it, and a dead child would look alive).

``<host>:<pid>:<start>``: ``start`` is the process's start time as the kernel counts it (clock
ticks since boot, from ``/proc/<pid>/stat``), so a reused pid is not taken for the old process.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def process_identity() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid)}"


def owner_alive(identity: str) -> bool | None:
    """True/False for a process of this host; None when only a heartbeat can tell (another
    host, or an identity this code cannot read)."""
    host, pid, start = _parse(identity)
    if host != socket.gethostname() or pid is None:
        return None
    if pid == os.getpid():
        return start in ("", _start_ticks(pid))
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by another user
    current = _start_ticks(pid)
    if start and current and current != start:
        return False  # the pid was reused by a newer process
    return not _is_zombie(pid)


def _parse(identity: str) -> tuple[str, int | None, str]:
    parts = identity.split(":")
    if len(parts) == 2:  # "<host>:<pid>" from before start times were recorded
        parts.append("")
    if len(parts) != 3 or not parts[1].isdigit():
        return identity, None, ""
    return parts[0], int(parts[1]), parts[2]


def _stat_fields(pid: int) -> list[str]:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    return text[text.rfind(")") + 2 :].split()


def _start_ticks(pid: int) -> str:
    fields = _stat_fields(pid)
    return fields[19] if len(fields) > 19 else ""


def _is_zombie(pid: int) -> bool:
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] in ("Z", "X")


def owner_dead(identity: str, heartbeat_age_s: float | None, stale_after_s: float) -> bool:
    """Whether the attempt owned by ``identity`` is dead: its process is gone (same host), or
    its heartbeat is older than ``stale_after_s`` (any host; None: never stamped)."""
    if heartbeat_age_s is None or heartbeat_age_s > stale_after_s:
        return True
    return owner_alive(identity) is False
