FROM python:3.12-slim
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY holodeck_web holodeck_web
COPY runs runs
COPY graders graders
RUN pip install --no-cache-dir -c constraints.txt .
COPY . .
ENV HOLODECK_DATA_DIR=/data HOLODECK_STATIC_ROOT=/app/staticfiles
# The static files are collected into the image, outside the data volume (WhiteNoise serves
# them). The build's SECRET_KEY and data folder are throwaways: no secret is left in a layer.
RUN SECRET_KEY=collectstatic-at-build-time-only-never-used-to-sign \
    HOLODECK_DATA_DIR=/tmp/build-data python manage.py collectstatic --no-input -v0 \
    && rm -rf /tmp/build-data
EXPOSE 8000
# gunicorn stops gracefully on SIGTERM (docker stop): requests in flight finish first.
STOPSIGNAL SIGTERM
# /healthz answers without login or database (runs/web/health.py); the slim image has no curl.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["gunicorn", "--config", "python:holodeck_web.gunicorn_conf", "--bind", "0.0.0.0:8000", "holodeck_web.wsgi:application"]
