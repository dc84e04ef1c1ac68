"""Django settings. Everything a deployment changes comes from the environment; the README's
"Settings" table lists every variable with its default. A malformed value stops start-up with
one line naming the variable (holodeck_web/env.py)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from holodeck_web.env import (
    env_bool,
    env_choice,
    env_int,
    env_list,
    env_name,
    env_path,
    env_url,
    secret_key,
)

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("HOLODECK_DATA_DIR", BASE_DIR / ".holodeck")).resolve()

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = secret_key(DATA_DIR, debug=DEBUG)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# The dashboard's address in the links the CI gate writes (manage.py gate, POST /api/v1/gate);
# unset: the first CSRF_TRUSTED_ORIGINS entry (the address a proxied deployment is reached at),
# else none (the command writes paths and says so; the API, the address it was reached at).
HOLODECK_PUBLIC_URL = (
    env_url("HOLODECK_PUBLIC_URL", schemes={"http", "https"})
    or next((origin for origin in CSRF_TRUSTED_ORIGINS if "*" not in origin), "")
).rstrip("/")

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
    # First: every response, a redirect or a refusal too, gets its request id and access line.
    "holodeck_web.middleware.request_id_middleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
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
                "runs.web.context_processors.worker_status",
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
        # WAL: readers (the pages) never wait for a writer (a run); writers wait their turn.
        config["OPTIONS"] = {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
        # The test database is a file too: Django's default for SQLite, an in-memory database
        # with a shared cache, answers "database table is locked" at once to a second
        # connection (the browser tests' live server, the in-process worker) instead of waiting.
        config["TEST"] = {"NAME": str(DATA_DIR / "test.sqlite3")}
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


def _ninja_static() -> Path:
    """django-ninja's own static folder (Swagger UI for /api/v1/docs, served from here, no CDN),
    found without importing ninja: an installed app would import it, and the API with it, in
    every command (validate_agent and run_agent import no web code)."""
    spec = importlib.util.find_spec("ninja")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "static"


STATICFILES_DIRS = [BASE_DIR / "static", _ninja_static()]
# collectstatic's target. The Dockerfile collects into the image (/app/staticfiles), outside the
# data volume, so a new image never serves the files of an old one.
STATIC_ROOT = env_path("HOLODECK_STATIC_ROOT", DATA_DIR / "staticfiles")
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns when it is missing
WHITENOISE_USE_FINDERS = True  # serve from the app dirs without collectstatic on a laptop

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

# Served over HTTPS (directly or behind a proxy that terminates TLS): one switch turns on the
# redirect, HSTS and Secure cookies. HTTPS_PROXY_HEADER=true trusts X-Forwarded-Proto from the
# proxy (which must set it and strip any the client sent).
HTTPS = env_bool("HTTPS", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS)
# The probes ask over plain HTTP from inside the container (docker-compose.yml's health checks).
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]

# The web server (gunicorn; holodeck_web/gunicorn_conf.py reads these, serve too): processes,
# threads per process, seconds a silent process lives, seconds requests in flight get on SIGTERM.
HOLODECK_WEB_WORKERS = env_int("HOLODECK_WEB_WORKERS", 2, minimum=1)
HOLODECK_WEB_THREADS = env_int("HOLODECK_WEB_THREADS", 4, minimum=1)
HOLODECK_WEB_TIMEOUT = env_int("HOLODECK_WEB_TIMEOUT", 60, minimum=1)
HOLODECK_WEB_GRACEFUL_TIMEOUT = env_int("HOLODECK_WEB_GRACEFUL_TIMEOUT", 30, minimum=1)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS
if env_bool("HTTPS_PROXY_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Content Security Policy on every page: the pages load scripts only from this site, and no
# inline script (htmx and run_live.js are static files). Styles may be inline (the progress
# bar's width, htmx's indicator style).
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

# Login throttling: this many failed logins per address and user name (four times as many per
# address) within the window are allowed; further attempts get 429 until it passes.
HOLODECK_LOGIN_ATTEMPTS = env_int("HOLODECK_LOGIN_ATTEMPTS", 5, minimum=1)
HOLODECK_LOGIN_WINDOW_SECONDS = env_int("HOLODECK_LOGIN_WINDOW_SECONDS", 900, minimum=1)
# The client's address for throttling: REMOTE_ADDR unless a trusted proxy sets this header
# (X-Forwarded-For or X-Real-IP); never trusted when unset, since anyone can send it.
HOLODECK_CLIENT_IP_HEADER = env_name("HOLODECK_CLIENT_IP_HEADER", "")
# How many proxies append to X-Forwarded-For: the client is that many entries from the right.
HOLODECK_TRUSTED_PROXIES = env_int("HOLODECK_TRUSTED_PROXIES", 1, minimum=1)

# --- Celery -------------------------------------------------------------------------------
# Redis or RabbitMQ in production; without REDIS_URL/CELERY_BROKER_URL an embedded file-system
# broker lets a real Celery worker run on a laptop with nothing else installed.
REDIS_URL = env_url("REDIS_URL", schemes={"redis", "rediss"})
BROKER_URL = (
    env_url("CELERY_BROKER_URL", schemes={"redis", "rediss", "amqp", "amqps", "filesystem"})
    or REDIS_URL
)
EMBEDDED_BROKER = BROKER_URL is None
# The queue the web server sends to and workers take from. Deployments that share one broker
# (one RabbitMQ virtual host, one Redis database) each need their own; the tests use a fresh one.
HOLODECK_QUEUE = env_name("HOLODECK_QUEUE", "celery")
BROKER_DIR = DATA_DIR / "broker"
CELERY_EAGER = env_bool("HOLODECK_CELERY_EAGER", False)
CELERY_WORKER_CONCURRENCY = env_int("HOLODECK_WORKER_CONCURRENCY", 2, minimum=1)
# A running case whose heartbeat is this old is taken back and runs again (its worker died).
# Attempts stamp their heartbeat every HOLODECK_HEARTBEAT_SECONDS while they run.
HOLODECK_CASE_STALE_SECONDS = env_int("HOLODECK_CASE_STALE_SECONDS", 60, minimum=10)
HOLODECK_HEARTBEAT_SECONDS = env_int("HOLODECK_HEARTBEAT_SECONDS", 5, minimum=1)
if HOLODECK_HEARTBEAT_SECONDS * 3 > HOLODECK_CASE_STALE_SECONDS:
    raise ImproperlyConfigured(
        f"HOLODECK_HEARTBEAT_SECONDS={HOLODECK_HEARTBEAT_SECONDS} must be at most a third of "
        f"HOLODECK_CASE_STALE_SECONDS={HOLODECK_CASE_STALE_SECONDS}"
    )
# A worker process keeps the agent sessions of a run (Claude Code processes) between its case
# tasks: at most this many per worker process (0: a new session per case), each stopped after
# this many seconds unused (runs/services/warm_sessions.py, docs/configuration.md).
HOLODECK_WORKER_SESSIONS = env_int("HOLODECK_WORKER_SESSIONS", 2, minimum=0)
HOLODECK_WORKER_SESSION_IDLE_SECONDS = env_int(
    "HOLODECK_WORKER_SESSION_IDLE_SECONDS", 60, minimum=1
)
# The backends whose SDKs a worker imports in its main process before it starts its pool
# processes, so that no case pays for the import (the Claude Agent SDK about 0.4 s, Semantic
# Kernel about 2 s): "anthropic", "openai" (Semantic Kernel), "scripted"; "none" for none.
HOLODECK_WORKER_PRELOAD = env_list("HOLODECK_WORKER_PRELOAD", ["anthropic", "openai"])
PRELOAD_CHOICES = ("anthropic", "openai", "azure_openai", "ollama", "scripted", "none")
if set(HOLODECK_WORKER_PRELOAD) - set(PRELOAD_CHOICES):
    raise ImproperlyConfigured(
        f"HOLODECK_WORKER_PRELOAD={','.join(HOLODECK_WORKER_PRELOAD)}: each name must be one of "
        f"{', '.join(PRELOAD_CHOICES)}"
    )
# How often each worker looks for stale cases, lost messages and runs to settle.
HOLODECK_SWEEP_SECONDS = env_int("HOLODECK_SWEEP_SECONDS", 15, minimum=0)  # 0: off
# Each worker stamps its WorkerHeartbeat row every HOLODECK_HEARTBEAT_SECONDS; one not seen for
# this long counts as gone (the "no worker" banner, manage.py workers).
HOLODECK_WORKER_STALE_SECONDS = env_int(
    "HOLODECK_WORKER_STALE_SECONDS", max(15, 3 * HOLODECK_HEARTBEAT_SECONDS), minimum=1
)
if HOLODECK_HEARTBEAT_SECONDS * 2 > HOLODECK_WORKER_STALE_SECONDS:
    raise ImproperlyConfigured(
        f"HOLODECK_WORKER_STALE_SECONDS={HOLODECK_WORKER_STALE_SECONDS} must be at least twice "
        f"HOLODECK_HEARTBEAT_SECONDS={HOLODECK_HEARTBEAT_SECONDS}"
    )
# Retention by the workers' sweeper (manage.py prune_runs --older-than <days>d): runs older
# than this many days are deleted, at most once an hour per worker; 0: off. Each project's
# newest HOLODECK_RETENTION_KEEP_LAST runs are kept whatever their age.
HOLODECK_RETENTION_DAYS = env_int("HOLODECK_RETENTION_DAYS", 0, minimum=0)
HOLODECK_RETENTION_KEEP_LAST = env_int("HOLODECK_RETENTION_KEEP_LAST", 0, minimum=0)
# Where this machine unpacks the agent snapshots its runs run from (one folder per digest,
# written once; the launch validates from here too). Local to each machine: nothing is shared.
HOLODECK_SNAPSHOT_CACHE = env_path("HOLODECK_SNAPSHOT_CACHE", DATA_DIR / "snapshots")
# What a run's sealed snapshot of its agent directory may hold (runs.core.sealing.SnapshotLimits).
HOLODECK_SNAPSHOT_MAX_FILES = env_int("HOLODECK_SNAPSHOT_MAX_FILES", 2_000, minimum=1)
HOLODECK_SNAPSHOT_MAX_FILE_MB = env_int("HOLODECK_SNAPSHOT_MAX_FILE_MB", 20, minimum=1)
HOLODECK_SNAPSHOT_MAX_TOTAL_MB = env_int("HOLODECK_SNAPSHOT_MAX_TOTAL_MB", 50, minimum=1)

# Redis is the cache too (login throttling counters shared by every web process): REDIS_URL
# when set (beside a RabbitMQ broker, say), else a Redis broker.
CACHE_URL = REDIS_URL or (BROKER_URL if BROKER_URL and BROKER_URL.startswith("redis") else None)
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
        if CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# LOG_FORMAT: text (plain lines, the bound ids as a suffix) or json (one object a line), through
# holodeck_web/logs.py; every line carries the request, run, case and turn ids bound for it.
LOG_FORMAT = env_choice("LOG_FORMAT", "TEXT", ("TEXT", "JSON")).lower()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "holodeck_web.logs.LogContextFilter"},
        "client_errors": {"()": "holodeck_web.logs.ClientErrorFilter"},
    },
    "formatters": {
        "text": {"()": "holodeck_web.logs.TextFormatter"},
        "json": {"()": "holodeck_web.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["context", "client_errors"],
        }
    },
    "root": {"handlers": ["console"], "level": env_choice("LOG_LEVEL", "INFO", LOG_LEVELS)},
    "loggers": {
        "httpx": {"level": "WARNING"},
        "deepeval": {"level": "WARNING"},
        # A 4xx is one line, without the traceback Django logs with it (on the record itself,
        # so every handler gets it so; the console handler's filter covers django.security.*).
        "django.request": {"filters": ["client_errors"]},
        # Django's and Celery's loggers with handlers of their own (runserver's lines, DEBUG's
        # console copy, the task logger, the pool's) go through this one handler instead.
        **{
            name: {"handlers": ["console"], "propagate": False}
            for name in ("django", "django.server", "celery.task", "multiprocessing")
        },
    },
}

# Importing result files (the Import page, POST /api/v1/imports): the most one request may
# upload, in bytes; a zip may unpack to five times as much.
HOLODECK_IMPORT_MAX_BYTES = env_int("HOLODECK_IMPORT_MAX_BYTES", 20_000_000, minimum=1)
# The most one upload may unpack to (a zip's members together, or one file); an import holds
# about three times this in memory at its peak (docs/operations.md, "Importing").
HOLODECK_IMPORT_MAX_UNPACKED_BYTES = env_int(
    "HOLODECK_IMPORT_MAX_UNPACKED_BYTES", 5 * HOLODECK_IMPORT_MAX_BYTES, minimum=1
)
