"""Settings read from the environment, with safe defaults and clear errors.

A malformed value stops start-up with a message naming the variable, instead of a traceback
from deep inside Django or Celery.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from urllib.parse import urlparse

from django.core.exceptions import ImproperlyConfigured

TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no)")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be >= {minimum}")
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().upper()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={raw!r} must be one of {', '.join(choices)}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")


def env_name(name: str, default: str) -> str:
    """A name such as a queue's: letters, digits, ``_ . : -``, at most 128 characters."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not NAME.fullmatch(raw):
        raise ImproperlyConfigured(
            f"{name}={raw!r} must be 1-128 letters, digits, '_', '.', ':' or '-'"
        )
    return raw


def env_path(name: str, default: Path) -> Path:
    """An absolute path (``~`` expanded; relative to the working directory when relative)."""
    raw = os.environ.get(name, "").strip()
    return (Path(raw).expanduser() if raw else default).resolve()


def env_url(name: str, *, schemes: set[str]) -> str | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    parsed = urlparse(raw)
    if parsed.scheme not in schemes:
        allowed = ", ".join(sorted(schemes))
        raise ImproperlyConfigured(f"{name}={raw!r}: the scheme must be one of {allowed}")
    return raw


def secret_key(data_dir: Path, *, debug: bool) -> str:
    """SECRET_KEY from the environment, else one generated once and kept in the data dir."""
    raw = os.environ.get("SECRET_KEY", "").strip()
    if raw:
        if len(raw) < 32 and not debug:
            raise ImproperlyConfigured("SECRET_KEY must be at least 32 characters long")
        return raw
    key_file = data_dir / "secret_key"
    if key_file.exists():
        return key_file.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    key_file.write_text(key)
    key_file.chmod(0o600)
    return key
