"""Django settings. Everything a deployment changes comes from the environment; the README's
"Settings" table lists every variable with its default. A malformed value stops start-up with
one line naming the variable (holodeck_web/env.py)."""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from holodeck_web.env import env_bool, env_choice, env_int, env_list, env_url, secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("HOLODECK_DATA_DIR", BASE_DIR / ".holodeck")).resolve()

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = secret_key(DATA_DIR, debug=DEBUG)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "runs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "holodeck_web.urls"
WSGI_APPLICATION = "holodeck_web.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _database() -> dict[str, object]:
    default_url = f"sqlite:///{DATA_DIR / 'db.sqlite3'}"
    url = os.environ.get("DATABASE_URL", "").strip() or default_url
    try:
        config = dict(dj_database_url.parse(url, conn_max_age=60))
    except Exception as exc:  # dj_database_url raises several types for bad URLs
        raise ImproperlyConfigured(
            f"DATABASE_URL={url!r} is not a valid database URL: {exc}"
        ) from None
    if not config.get("ENGINE"):
        raise ImproperlyConfigured(f"DATABASE_URL={url!r}: unsupported database scheme")
    if config["ENGINE"] == "django.db.backends.sqlite3":
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        # Workers and the web process write concurrently: wait for locks, take them early.
        config["CONN_MAX_AGE"] = 0
        config["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE"}
    return config


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns when it is missing
WHITENOISE_USE_FINDERS = True  # serve from the app dirs without collectstatic on a laptop

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

# --- Celery -------------------------------------------------------------------------------
# Redis in production; without REDIS_URL/CELERY_BROKER_URL an embedded file-system broker lets a
# real Celery worker run on a laptop with nothing else installed.
BROKER_URL = env_url("CELERY_BROKER_URL", schemes={"redis", "rediss", "amqp", "filesystem"}) or (
    env_url("REDIS_URL", schemes={"redis", "rediss"})
)
EMBEDDED_BROKER = BROKER_URL is None
BROKER_DIR = DATA_DIR / "broker"
CELERY_EAGER = env_bool("HOLODECK_CELERY_EAGER", False)
CELERY_WORKER_CONCURRENCY = env_int("HOLODECK_WORKER_CONCURRENCY", 2, minimum=1)
# A running case with no finished turn for this long is lost (its worker died): the sweeper
# errors it and settles the run, so no run stays "running" forever.
HOLODECK_CASE_STALE_SECONDS = env_int("HOLODECK_CASE_STALE_SECONDS", 1800, minimum=10)
# How often each worker looks for stale cases, lost messages and runs to settle.
HOLODECK_SWEEP_SECONDS = env_int("HOLODECK_SWEEP_SECONDS", 60, minimum=0)  # 0: off

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_choice("LOG_LEVEL", "INFO", LOG_LEVELS)},
    "loggers": {"httpx": {"level": "WARNING"}, "deepeval": {"level": "WARNING"}},
}
