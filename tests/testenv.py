"""Loaded by pytest before Django is set up (``-p tests.testenv`` in pyproject.toml): each test
process (the pytest process, and every pytest-xdist worker) gets state of its own, so the suite
never shares the dashboard's, nor one xdist worker another's:

- a fresh data folder (database files, the embedded broker's folders, the secret key), even when
  ``HOLODECK_DATA_DIR`` is set in the shell: a shared folder would share the embedded broker,
  whose worker would take the tests' tasks, and whose queue a test would purge;
- its own Redis database when ``REDIS_URL`` / ``CELERY_BROKER_URL`` name a Redis server: the
  configured database number plus one plus the xdist worker's number, so neither the
  dashboard's worker nor a test in another xdist worker takes (or purges) its tasks.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from urllib.parse import urlsplit, urlunsplit

REDIS_DATABASES = 16  # Redis's default number of databases


def xdist_worker_number() -> int:
    """0 for ``gw0`` (and without xdist), 1 for ``gw1``, ..."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(worker.removeprefix("gw") or 0)


def private_redis_url(url: str, worker: int) -> str:
    """``url`` with a database number of the tests' own: the configured one + 1 + ``worker``."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        return url
    configured = int(parts.path.strip("/") or 0)
    number = (configured + 1 + worker) % REDIS_DATABASES
    return urlunsplit(parts._replace(path=f"/{number}"))


def _private_state() -> None:
    data_dir = tempfile.mkdtemp(prefix="holodeck-tests-")
    os.environ["HOLODECK_DATA_DIR"] = data_dir
    atexit.register(shutil.rmtree, data_dir, ignore_errors=True)
    worker = xdist_worker_number()
    for name in ("REDIS_URL", "CELERY_BROKER_URL"):
        if not os.environ.get(name, "").strip():
            continue
        # xdist workers inherit the pytest process's environment: start from the shell's URL.
        shell_url = os.environ.setdefault(f"HOLODECK_TESTS_SHELL_{name}", os.environ[name].strip())
        os.environ[name] = private_redis_url(shell_url, worker)


_private_state()

# The workers the tests start import a backend's SDK on first use, as a case needs it: preloading
# Semantic Kernel and the Claude Agent SDK (about 2.4 s) would add to every worker start. The
# tests of preloading (tests/web/test_warm_sessions.py) set their own.
os.environ.setdefault("HOLODECK_WORKER_PRELOAD", "none")


# Libraries that register a pytest plugin (deepeval, hypothesis, schemathesis, anyio) are marked
# for assertion rewriting whole; their asserts are not the tests', and rewriting deepeval's ~800
# modules costs every test process seconds (more where PYTHONDONTWRITEBYTECODE keeps pytest from
# caching them). The tests' own modules are still rewritten.
NOT_REWRITTEN = ("deepeval", "hypothesis", "schemathesis", "anyio")


def _rewrite_only_the_tests() -> None:
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if type(finder).__name__ == "AssertionRewritingHook" and isinstance(marked, set):
            marked.difference_update(NOT_REWRITTEN)


_rewrite_only_the_tests()
