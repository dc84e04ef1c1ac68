"""The request id and the access line (first in settings.MIDDLEWARE, so both cover every other
middleware, WhiteNoise's static files included)."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase
from django.utils.functional import SimpleLazyObject

from holodeck_web.logs import REQUEST_ID_KEY
from runs.core.logcontext import log_context

access_log = logging.getLogger("holodeck_web.access")

HEADER = "X-Request-ID"
# An id a proxy or client sent is kept only when it cannot forge a log line or a header.
SAFE_ID = re.compile(r"[A-Za-z0-9._-]{1,100}")
PATH_LOGGED = 2_000  # characters of a path an access line keeps

Handler = Callable[[HttpRequest], HttpResponseBase]


def request_id_middleware(get_response: Handler) -> Handler:
    """Binds the request's id (the incoming ``X-Request-ID`` when it is a safe token, else a new
    one) for every log line of the request, answers it in ``X-Request-ID`` and logs one access
    line: method, path (never the query string, where a token may be), status, duration, user.
    """

    def middleware(request: HttpRequest) -> HttpResponseBase:
        request_id = request_id_of(request.headers.get(HEADER))
        # django.request logs a 4xx after the middleware returned: its filter finds the id here.
        request.META[REQUEST_ID_KEY] = request_id
        started = time.monotonic()
        with log_context(request_id=request_id):
            response = get_response(request)
            _access_line(request, response, started)
        response[HEADER] = request_id
        return response

    return middleware


def request_id_of(incoming: str | None) -> str:
    if incoming is not None and SAFE_ID.fullmatch(incoming):
        return incoming
    return uuid.uuid4().hex


def _access_line(request: HttpRequest, response: HttpResponseBase, started: float) -> None:
    duration_ms = round((time.monotonic() - started) * 1000, 1)
    path = _printable(request.path[:PATH_LOGGED])
    user_id = _user_id(request)
    access_log.info(
        "%s %s %s %sms user=%s",
        request.method,
        path,
        response.status_code,
        duration_ms,
        user_id if user_id is not None else "none",
        extra={
            "method": request.method,
            "path": path,
            "status": response.status_code,
            "duration_ms": duration_ms,
            "user_id": user_id,
        },
    )


def _user_id(request: HttpRequest) -> int | None:
    """The id of the user the request was answered for. A session user nobody looked at is not
    loaded for the log line (that would cost the request its session and user queries)."""
    user = request.__dict__.get("user")
    if isinstance(user, SimpleLazyObject):
        user = request.__dict__.get("_cached_user")  # set once the lazy user was evaluated
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    return int(user.pk)


def _printable(text: str) -> str:
    """A decoded path may hold control characters (``%0A``): escaped, so a text line stays one
    line that nobody can forge."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
