"""gunicorn's settings for the dashboard, shared by ``manage.py serve``, the Dockerfile and
docker-compose.yml:

    gunicorn --config python:holodeck_web.gunicorn_conf --bind 0.0.0.0:8000 \\
        holodeck_web.wsgi:application

Sizes and timeouts are the project's settings (``HOLODECK_WEB_*``, README "Settings"), read
here before any worker starts: a malformed value, in those or any other setting, stops gunicorn
with one line naming the variable instead of a traceback in every worker it boots. SIGTERM stops
gunicorn gracefully: it stops accepting, lets the requests in flight finish for up to
HOLODECK_WEB_GRACEFUL_TIMEOUT seconds, then exits 0. (gunicorn takes SIGINT and SIGQUIT as a
quick shutdown that drops them, which is why serve runs it in a process group of its own and
forwards Ctrl-C as SIGTERM.)
"""

from __future__ import annotations

import os

# Importing the package already reads the settings (the Celery app is configured from them); a
# malformed one raises ImproperlyConfigured here, which gunicorn prints as one line,
# "Error: HOLODECK_WEB_THREADS='four' is not an integer", and exits 1.
from holodeck_web import settings as project

# "holodeck_web.wsgi.application" -> "holodeck_web.wsgi:application"
wsgi_app = ":".join(project.WSGI_APPLICATION.rsplit(".", 1))
# Threads in each worker process: pages wait on the database and the broker more than they
# compute, and a slow client (an upload) then holds one thread, not a whole process.
worker_class = "gthread"
workers = project.HOLODECK_WEB_WORKERS
threads = project.HOLODECK_WEB_THREADS
# A worker process whose master has not heard from it for this long is killed and replaced (the
# gthread worker keeps reporting while its threads serve long requests, such as big imports).
timeout = project.HOLODECK_WEB_TIMEOUT
graceful_timeout = project.HOLODECK_WEB_GRACEFUL_TIMEOUT
keepalive = 5  # seconds; above the usual proxy's idle reuse of upstream connections

# Logs on stderr, where serve, docker and systemd collect them, shaped by LOG_FORMAT like every
# other line (holodeck_web/logs.py imports no model, so the master uses it too). No gunicorn
# access log: the project writes one access line per request (holodeck_web/middleware.py, first
# in MIDDLEWARE, so WhiteNoise's files count too) with its request id and without the query
# string; gunicorn's would repeat it, without the id and with the query string.
accesslog = None
errorlog = "-"
logconfig_dict = {
    "root": {"level": "INFO", "handlers": ["stderr"]},
    "loggers": {"gunicorn.error": {"level": "INFO", "handlers": ["stderr"], "propagate": False}},
    "handlers": {
        "stderr": {
            "class": "logging.StreamHandler",
            "formatter": project.LOG_FORMAT,
            "stream": "ext://sys.stderr",
        }
    },
    "formatters": {
        "text": {
            "format": "%(asctime)s [%(process)d] [%(levelname)s] %(message)s",
            "datefmt": "[%Y-%m-%d %H:%M:%S %z]",
        },
        "json": {"()": "holodeck_web.logs.JsonFormatter"},
    },
}

# Whether a request came over HTTPS is Django's decision alone (HTTPS_PROXY_HEADER ->
# SECURE_PROXY_SSL_HEADER): gunicorn must not also trust X-Forwarded-Proto from 127.0.0.1.
forwarded_allow_ips = ""
# No control socket: its default path (~/.gunicorn/gunicorn.ctl) is shared by every gunicorn
# of the user, so a second dashboard (a test's, a second checkout's) would take it over.
control_socket_disable = True
# Worker heartbeat files in memory: a container's /tmp may be an overlay file system whose
# writes can stall long enough for the master to kill a healthy worker.
if os.path.isdir("/dev/shm"):
    worker_tmp_dir = "/dev/shm"
