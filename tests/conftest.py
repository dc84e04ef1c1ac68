from __future__ import annotations

from pathlib import Path

import pytest

# Fixtures shared by the Django-side tests (eager Celery).
pytest_plugins = ["tests.web.services_helpers"]

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"


@pytest.fixture
def shared_dir() -> Path:
    """The read-only ../shared folder (design seeds and real fixtures); absent on a user's clone."""
    if not (SHARED_DIR / "fixtures").is_dir():
        pytest.skip("../shared/fixtures is absent (only present beside the development checkout)")
    return SHARED_DIR


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT
