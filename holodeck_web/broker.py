"""The embedded broker: kombu's file-system transport, made safe for several processes.

kombu's own transport opens a message file and then writes it, so a consumer can read it empty
and the worker dies on a ``JSONDecodeError`` (celery/kombu#1551), losing the message; and it
lists and sorts the whole folder for every message it takes. This one:

- writes a message under a temporary name that no queue matches (``.<uuid>.tmp``), fsyncs it,
  then renames it into place, so a message file is whole the moment it can be seen;
- claims a message by renaming it out of the in-folder; a rename that fails means another
  consumer took it first, so it moves on to the next one;
- moves a message it cannot decode to ``quarantine/`` and logs one line, instead of raising;
- consumes from a listing it keeps per queue and lists the folder again only when that listing
  runs out, so draining n messages costs O(n), not O(n^2);
- rewrites exchange tables (the ``control`` folder) the same way, under a lock file, so a
  reader never sees a half-written table while workers start.

Registered as ``holodeckfs://`` by :mod:`holodeck_web.celery`.

Why a subclass of a private API: kombu has no public hook for how its file-system transport
writes, claims and lists files, so this overrides ``filesystem.Channel``'s private methods
(``_put``, ``_get``, ``_purge``, ``_delete``, ``_queue_bind``) and calls others
(``_exchange_file``, ``get_table``, the folder options). To keep that safe, pyproject.toml pins
kombu to the tested minor series, and tests/web/test_broker_kombu_api.py fails as soon as an
installed kombu changes the signature of anything used here or falls outside the pin. A public
transport was considered instead: kombu's SQLAlchemy transport over SQLite would add SQLAlchemy
(not otherwise a dependency) and trade the file-level guarantees the broker tests check (a
message whole once visible, a claim by rename, undecodable files quarantined) for the
transport's own, so the pin and the test are the cheaper way to a supported base.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
import uuid
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from queue import Empty
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem, virtual
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)

TMP_SUFFIX = ".tmp"
# A temporary file left by a producer that died mid-write is removed after this long.
STALE_TMP_SECONDS = 60.0


def message_name(queue: str) -> str:
    """``<ns since epoch>_<uuid>.<queue>.msg``: sorts in send order; kombu's queue match."""
    return f"{time.time_ns():020d}_{uuid.uuid4().hex}.{queue}.msg"


def is_message_of(name: str, queue: str) -> bool:
    return name.partition(".")[2] == f"{queue}.msg"


def write_atomically(folder: str | Path, name: str, data: bytes) -> None:
    """Write ``folder/name`` so that nobody can ever see it partly written."""
    tmp = os.path.join(folder, f".{uuid.uuid4().hex}{TMP_SUFFIX}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, os.path.join(folder, name))
    except OSError as exc:
        with suppress(OSError):
            os.unlink(tmp)
        raise ChannelError(f"Cannot add file {name!r} to {folder!r}") from exc


def remove_stale_tmp_files(folder: str | Path, *, older_than: float = STALE_TMP_SECONDS) -> int:
    """Remove the temporary files of producers that died mid-write; returns how many."""
    removed = 0
    cutoff = time.time() - older_than
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return 0
    for name in names:
        if not (name.startswith(".") and name.endswith(TMP_SUFFIX)):
            continue
        path = os.path.join(folder, name)
        try:
            if os.stat(path).st_mtime < cutoff:
                os.unlink(path)
                removed += 1
        except FileNotFoundError:
            pass  # renamed into place or removed by another process meanwhile
    return removed


def decode(payload: bytes) -> dict[str, Any] | None:
    """The message a file holds, or None when it is not one (empty, cut short, garbage)."""
    try:
        message = loads(payload.decode("utf-8"))
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both are
        return None
    return message if isinstance(message, dict) else None


class FilesystemChannel(filesystem.Channel):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._listings: dict[str, deque[str]] = {}
        super().__init__(*args, **kwargs)
        for folder in {self.data_folder_in, self.data_folder_out}:
            remove_stale_tmp_files(folder)
        for folder in (self.processed_folder, self.quarantine_folder):
            os.makedirs(folder, exist_ok=True)

    @property
    def quarantine_folder(self) -> str:
        default = os.path.join(os.path.dirname(os.path.abspath(self.data_folder_in)), "quarantine")
        return str(self.transport_options.get("quarantine_folder", default))

    # -- messages --------------------------------------------------------------------------

    # kombu's two bases name the second argument differently (message, payload).
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        write_atomically(self.data_folder_out, message_name(queue), dumps(payload).encode())

    def _get(self, queue: str, timeout: float | None = None) -> dict[str, Any]:
        for name in self._pending(queue):
            claimed = self._claim(name)
            if claimed is None:
                continue  # another consumer took it
            message = self._read(claimed)
            if message is not None:
                return message
        raise Empty()

    def _pending(self, queue: str) -> Iterator[str]:
        """The queue's message names in send order; the folder is listed again only when the
        names listed last time are used up."""
        listing = self._listings.setdefault(queue, deque())
        if not listing:
            names = sorted(n for n in os.listdir(self.data_folder_in) if is_message_of(n, queue))
            listing.extend(names)
        while listing:
            yield listing.popleft()

    def _claim(self, name: str) -> str | None:
        """Move the message out of the in-folder; None when another consumer got there first."""
        target = os.path.join(self.processed_folder, name)
        try:
            os.rename(os.path.join(self.data_folder_in, name), target)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ChannelError(f"Cannot claim {name!r} from the queue") from exc
        return target

    def _read(self, path: str) -> dict[str, Any] | None:
        try:
            with open(path, "rb") as f:
                payload = f.read()
        except OSError as exc:
            raise ChannelError(f"Cannot read file {path!r} from queue.") from exc
        message = decode(payload)
        if message is None:
            self._quarantine(path, size=len(payload))
        elif not self.store_processed:
            os.unlink(path)
        return message

    def _quarantine(self, path: str, *, size: int) -> None:
        target = os.path.join(self.quarantine_folder, os.path.basename(path))
        os.replace(path, target)
        logger.warning("broker: quarantined undecodable message (%d bytes) to %s", size, target)

    def _purge(self, queue: str) -> int:
        self._listings.pop(queue, None)
        return int(super()._purge(queue))

    # -- exchange tables -------------------------------------------------------------------

    @contextmanager
    def _table_lock(self, exchange: str) -> Iterator[Path]:
        """The exchange file, held exclusively for a read-modify-write of its table."""
        file = self._exchange_file(exchange)
        self.control_folder.mkdir(parents=True, exist_ok=True)
        with open(f"{file}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield file

    def _write_table(self, file: Path, queues: list[filesystem.exchange_queue_t]) -> None:
        write_atomically(file.parent, file.name, dumps(queues).encode())

    def _queue_bind(
        self, exchange: str, routing_key: str, pattern: str, queue: str, *args: Any
    ) -> None:
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_lock(exchange) as file:
            queues = self.get_table(exchange)
            if entry not in queues:
                self._write_table(file, [entry, *queues])

    def _delete(
        self, queue: str, exchange: str, routing_key: str, pattern: str, *args: Any, **kwargs: Any
    ) -> None:
        # Skip filesystem.Channel._delete: it rewrites the table in place.
        super(filesystem.Channel, self)._delete(
            queue, exchange, routing_key, pattern, *args, **kwargs
        )
        self._listings.pop(queue, None)
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_lock(exchange) as file:
            queues = self.get_table(exchange)
            if entry in queues:
                self._write_table(file, [q for q in queues if q != entry])


class Transport(filesystem.Transport):
    Channel = FilesystemChannel
    driver_type = "holodeckfs"
    driver_name = "holodeckfs"

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        # kombu keeps the declared bindings in one state per process and then skips writing
        # them to the control folder; the folder is the truth, so each connection declares.
        self.state = virtual.BrokerState()
