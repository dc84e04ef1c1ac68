"""How log lines look (``LOG_FORMAT``): ``text``, today's plain lines with the bound ids as a
suffix, or ``json``, one JSON object a line (python-json-logger) with ``time`` (ISO 8601, UTC),
``level``, ``logger``, ``message``, the bound ids, the record's extra fields and ``exception``.

Every handler of the project's LOGGING carries ``LogContextFilter``, which stamps each record
with the ids bound in ``runs.core.logcontext`` (the request's, the run's, case's and turn's), and
``ClientErrorFilter``, which logs a client error (a 4xx) as one line, without its traceback.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

from runs.core.logcontext import LOG_IDS, log_context_ids

# Where the web middleware keeps a request's id on the request (holodeck_web/middleware.py).
REQUEST_ID_KEY = "holodeck.request_id"


class LogContextFilter(logging.Filter):
    """Stamp each record with the bound ids (an id the call passed in ``extra`` wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids: dict[str, Any] = log_context_ids()
        if "request_id" not in ids:
            # django.request logs a 4xx/5xx response after the middleware returned it (the id
            # is unbound by then): the record names the request, which names its id.
            meta = getattr(getattr(record, "request", None), "META", None)
            if isinstance(meta, dict) and meta.get(REQUEST_ID_KEY):
                ids["request_id"] = meta[REQUEST_ID_KEY]
        for name, value in ids.items():
            if getattr(record, name, None) is None:
                setattr(record, name, value)
        return True


class ClientErrorFilter(logging.Filter):
    """A client error's line without its traceback: Django logs each 4xx it answers from an
    exception (a bad query parameter's ``BadRequest``, a ``PermissionDenied``, an ``Http404``,
    a ``SuspiciousOperation`` on ``django.security.*``) with the exception's traceback, dozens
    of lines for a request the client got wrong. Its message already says what was wrong; a
    5xx keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return True


class TextFormatter(logging.Formatter):
    """The plain line (the message alone unless given a format) with ``[request_id=...
    run_id=...]`` after it when ids are bound."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = super().formatMessage(record)
        ids = " ".join(
            f"{name}={value}"
            for name in LOG_IDS
            if (value := getattr(record, name, None)) is not None
        )
        return f"{text} [{ids}]" if ids else text


class JsonFormatter(_JsonFormatter):
    """One JSON object a line: time, level, logger, message first, then the ids and extras."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(
            ["levelname", "name", "message"],
            rename_fields={"levelname": "level", "name": "logger", "exc_info": "exception"},
            # The request object django.request and django.server attach: its text holds the
            # query string (tokens, search terms), which a log line must not.
            reserved_attrs=[*RESERVED_ATTRS, "request"],
        )

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        created = datetime.fromtimestamp(record.created, tz=UTC)
        log_data["time"] = created.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        super().add_fields(log_data, record, message_dict)
