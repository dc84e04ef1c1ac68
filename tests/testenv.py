"""Loaded by pytest before Django is set up (``-p tests.testenv`` in pyproject.toml): the test
suite gets a data folder of its own (database files, the embedded broker's folders, the secret
key), so it never shares the dashboard's ``.holodeck`` (whose worker would take the tests'
tasks, and whose queue a test would purge)."""

from __future__ import annotations

import os
import tempfile

if not os.environ.get("HOLODECK_DATA_DIR"):
    os.environ["HOLODECK_DATA_DIR"] = tempfile.mkdtemp(prefix="holodeck-tests-")
