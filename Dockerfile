FROM python:3.12-slim
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY holodeck_web holodeck_web
COPY runs runs
COPY graders graders
RUN pip install --no-cache-dir -c constraints.txt .
COPY . .
ENV HOLODECK_DATA_DIR=/data
EXPOSE 8000
CMD ["python", "manage.py", "runserver", "0.0.0.0:8000", "--noreload"]
