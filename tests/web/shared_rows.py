"""Rows made once for many tests, as Django's ``TestCase.setUpTestData`` makes them for a class.

``rows_shared_by_the_module`` makes a module-scoped fixture's rows in a transaction of their own;
each test (``pytest.mark.django_db``, not ``transaction=True``) then runs in a savepoint inside
it, which pytest-django rolls back after the test, so every test starts from the same rows and
sees none of another test's writes. The transaction itself is rolled back after the module's
last test: nothing is committed, so no other module's test sees these rows (pytest tears a
module's fixtures down before the next module's first test). pytest-django leaves room for this
on purpose: its ``_django_db_helper`` skips ``TestCase``'s class set-up, "which inhibits
wrapping tests in higher-scoped transactions".

Only the rows are undone: a file written beside them (in a data folder) stays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from django.db import transaction
from pytest_django import DjangoDbBlocker


def rows_shared_by_the_module[T](
    django_db_blocker: DjangoDbBlocker, make: Callable[[], T]
) -> Iterator[T]:
    """For a module-scoped fixture to ``yield from``: what ``make`` made, its rows kept for
    the module's tests and rolled back after them."""
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            made = make()
        except BaseException:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
            raise
    try:
        yield made
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
