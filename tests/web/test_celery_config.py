"""The Celery app's configuration per broker: late acknowledgement and requeue of a dead pool
child's message everywhere; a visibility timeout for Redis; publisher confirms and reconnection
after a channel error for RabbitMQ."""

from __future__ import annotations

from pathlib import Path

import pytest
from celery import Celery
from django.core.exceptions import ImproperlyConfigured
from pytest_django.fixtures import Settings

from holodeck_web.celery import configure
from tests.web.test_settings import load_settings


def configured(settings: Settings, broker_url: str | None) -> Celery:
    settings.BROKER_URL, settings.EMBEDDED_BROKER = broker_url, broker_url is None
    app = Celery("holodeck_web", set_as_current=False)
    configure(app)
    return app


@pytest.mark.parametrize(
    "broker_url", [None, "redis://127.0.0.1:6379/0", "amqp://guest:guest@127.0.0.1:5672//"]
)
def test_every_broker_acknowledges_late_and_requeues_the_message_of_a_killed_pool_child(
    settings: Settings, tmp_path: Path, broker_url: str | None
) -> None:
    settings.BROKER_DIR = tmp_path / "broker"
    conf = configured(settings, broker_url).conf
    assert (conf.task_acks_late, conf.task_reject_on_worker_lost) == (True, True)
    assert conf.worker_prefetch_multiplier == 1
    assert conf.worker_cancel_long_running_tasks_on_connection_loss is False
    assert conf.task_default_queue == "celery"
    assert conf.broker_url == (broker_url or "holodeckfs://")


def test_redis_gives_a_dead_workers_message_back_after_twice_the_stale_limit(
    settings: Settings,
) -> None:
    settings.HOLODECK_CASE_STALE_SECONDS = 60
    conf = configured(settings, "redis://127.0.0.1:6379/0").conf
    assert conf.broker_transport_options == {"visibility_timeout": 120}
    assert conf.broker_channel_error_retry is False  # Celery's default, as before


def test_rabbitmq_confirms_every_publish_and_has_no_visibility_timeout(
    settings: Settings,
) -> None:
    conf = configured(settings, "amqps://user:pw@rabbit.example.com:5671/holodeck").conf
    assert conf.broker_transport_options == {"confirm_publish": True}
    assert conf.broker_channel_error_retry is True  # consumer_timeout closes a channel


def test_the_queue_name_comes_from_the_settings(settings: Settings) -> None:
    settings.HOLODECK_QUEUE = "holodeck-staging"
    conf = configured(settings, "amqp://guest:guest@127.0.0.1:5672//").conf
    assert conf.task_default_queue == "holodeck-staging"


def test_with_rabbitmq_as_the_broker_redis_is_still_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = load_settings(
        tmp_path,
        monkeypatch,
        CELERY_BROKER_URL="amqp://holodeck:pw@rabbit.example.com:5672/holodeck",
        REDIS_URL="redis://cache.example.com:6379/1",
    )
    assert names["BROKER_URL"] == "amqp://holodeck:pw@rabbit.example.com:5672/holodeck"
    assert names["EMBEDDED_BROKER"] is False
    cache = names["CACHES"]["default"]
    assert (cache["BACKEND"], cache["LOCATION"]) == (
        "django.core.cache.backends.redis.RedisCache",
        "redis://cache.example.com:6379/1",
    )


def test_a_malformed_queue_name_stops_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ImproperlyConfigured, match=r"HOLODECK_QUEUE='two words' must be 1-128"):
        load_settings(tmp_path, monkeypatch, HOLODECK_QUEUE="two words")
