"""Template context every page gets (settings TEMPLATES' context_processors)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest

from runs.selectors.workers import worker_live_exists


def worker_status(request: HttpRequest) -> dict[str, Callable[[], bool]]:
    """``no_live_worker``: true when no Celery worker was seen within
    HOLODECK_WORKER_STALE_SECONDS, so runs would sit queued (the banner of templates/base.html,
    the launch form's and a queued run's notices).

    A callable, so the one query runs only when a template reads it, once per render (an htmx
    fragment that does not extend base.html runs none). Never with HOLODECK_CELERY_EAGER (runs
    run in the web process) nor for someone not logged in (the login page tells nothing)."""
    answer: list[bool] = []

    def no_live_worker() -> bool:
        # A request refused before AuthenticationMiddleware ran (a Host header not in
        # ALLOWED_HOSTS: the 400 page) has no ``user``: reading it would turn that 400 into a 500.
        user = getattr(request, "user", None)
        if not answer:
            answer.append(
                not settings.CELERY_EAGER
                and user is not None
                and user.is_authenticated
                and not worker_live_exists()
            )
        return answer[0]

    return {"no_live_worker": no_live_worker}
