"""Compare's tests use the web tests' users, project, browser and its teardown
(tests/web/conftest.py)."""

from tests.web.conftest import (  # noqa: F401  (fixtures and a hook, found by name)
    chromium,
    project,
    pytest_runtest_teardown,
    staff,
    staff_client,
    viewer,
    viewer_client,
)
