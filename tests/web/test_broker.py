"""The embedded broker (holodeck_web/broker.py) through kombu, in a temporary folder."""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection
from kombu.simple import SimpleQueue
from kombu.transport import TRANSPORT_ALIASES

from holodeck_web import broker

TRANSPORT_ALIASES["holodeckfs"] = "holodeck_web.broker:Transport"  # as holodeck_web.celery does

QUEUE = "cases"
STOP = "stop"
PRODUCERS, PER_PRODUCER, CONSUMERS = 4, 2500, 2


def transport_options(root: Path) -> dict[str, Any]:
    for sub in ("in", "processed", "control", "quarantine"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(root / "in"),
        "data_folder_out": str(root / "in"),
        "processed_folder": str(root / "processed"),
        "control_folder": str(root / "control"),
        "quarantine_folder": str(root / "quarantine"),
        "polling_interval": 0.01,
    }


@contextmanager
def simple_queue(root: Path) -> Iterator[SimpleQueue]:
    with Connection("holodeckfs://", transport_options=transport_options(root)) as conn:
        queue = conn.SimpleQueue(QUEUE)
        try:
            yield queue
        finally:
            queue.close()


def get_body(queue: SimpleQueue, timeout: float = 5) -> Any:
    message = queue.get(block=True, timeout=timeout)
    message.ack()
    return message.payload


def messages_in(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if broker.is_message_of(name, QUEUE)]


def test_a_temporary_file_never_looks_like_a_message() -> None:
    assert broker.is_message_of(broker.message_name(QUEUE), QUEUE)
    assert not broker.is_message_of(f".{'0' * 32}{broker.TMP_SUFFIX}", QUEUE)
    assert not broker.is_message_of(f".{'0' * 32}.{QUEUE}.msg{broker.TMP_SUFFIX}", QUEUE)


def test_a_message_is_delivered_once_and_leaves_no_file_behind(tmp_path: Path) -> None:
    with simple_queue(tmp_path) as queue:
        queue.put({"case": 7})
        assert get_body(queue) == {"case": 7}
        with pytest.raises(queue.Empty):
            queue.get(block=False)
    assert messages_in(tmp_path / "in") == []
    assert os.listdir(tmp_path / "processed") == []
    assert [n for n in os.listdir(tmp_path / "in") if n.endswith(broker.TMP_SUFFIX)] == []


@pytest.mark.parametrize(
    "content",
    [b"", b'{"body": "eyJj', b"\xff\xfe garbage \x00", b"[1, 2, 3]"],
    ids=["empty", "half-written", "garbage", "not-an-object"],
)
def test_an_undecodable_message_is_quarantined_and_the_next_one_is_still_delivered(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with simple_queue(tmp_path) as queue:
        bad = f"{0:020d}_{'0' * 32}.{QUEUE}.msg"  # sorts first
        (tmp_path / "in" / bad).write_bytes(content)
        queue.put({"case": "good"})
        with caplog.at_level(logging.WARNING, logger="holodeck_web.broker"):
            assert get_body(queue) == {"case": "good"}
    assert os.listdir(tmp_path / "quarantine") == [bad]
    assert (tmp_path / "quarantine" / bad).read_bytes() == content
    assert [r.getMessage() for r in caplog.records if bad in r.getMessage()] == [
        f"broker: quarantined undecodable message ({len(content)} bytes) to "
        f"{tmp_path / 'quarantine' / bad}"
    ]


def test_a_producer_leftover_older_than_a_minute_is_removed_when_a_channel_opens(
    tmp_path: Path,
) -> None:
    (tmp_path / "in").mkdir()
    old, fresh = tmp_path / "in" / ".old.tmp", tmp_path / "in" / ".fresh.tmp"
    old.write_bytes(b'{"half')
    fresh.write_bytes(b'{"being written')
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    with simple_queue(tmp_path):
        pass
    assert not old.exists()
    assert fresh.exists()  # may still be renamed into place by a live producer


def test_draining_a_deep_queue_lists_the_folder_a_constant_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with simple_queue(tmp_path) as queue:
        for n in range(300):
            queue.put({"n": n})
        listings = Counter[str]()
        real_listdir: Callable[[str], list[str]] = os.listdir

        def counting_listdir(path: str) -> list[str]:
            listings[str(path)] += 1
            return real_listdir(path)

        monkeypatch.setattr(os, "listdir", counting_listdir)
        assert [get_body(queue)["n"] for _ in range(300)] == list(range(300))  # in send order
    assert listings[str(tmp_path / "in")] <= 2


def test_an_exchange_table_is_rewritten_whole_and_keeps_every_binding(tmp_path: Path) -> None:
    with Connection("holodeckfs://", transport_options=transport_options(tmp_path)) as conn:
        for name in ("a", "b", "c"):
            conn.SimpleQueue(name).close()
        channel = conn.default_channel
        assert sorted(q.queue for q in channel.get_table("a")) == ["a"]
        channel.queue_delete("b")
        assert channel.get_table("b") == []


# -- many processes at once ------------------------------------------------------------------


def produce(root: Path, producer: int) -> None:
    with simple_queue(root) as queue:
        for n in range(PER_PRODUCER):
            queue.put({"id": f"{producer}-{n}"})


def consume(root: Path, consumer: int) -> None:
    """Take messages until a stop message; write the ids taken, one a line."""
    taken: list[str] = []
    with simple_queue(root) as queue:
        while True:
            body = get_body(queue, timeout=120)
            if body == STOP:
                break
            taken.append(body["id"])
    (root / f"consumer-{consumer}.txt").write_text("\n".join(taken))


@pytest.mark.stress
@pytest.mark.skipif(os.cpu_count() is None, reason="needs processes")
def test_four_producers_and_two_consumers_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    consumers = [context.Process(target=consume, args=(tmp_path, c)) for c in range(CONSUMERS)]
    producers = [context.Process(target=produce, args=(tmp_path, p)) for p in range(PRODUCERS)]
    started = time.monotonic()
    for process in consumers + producers:
        process.start()
    for process in producers:
        process.join(timeout=120)
    produced = time.monotonic() - started
    with simple_queue(tmp_path) as queue:
        for _ in consumers:
            queue.put(STOP)
    for process in consumers:
        process.join(timeout=120)
    elapsed = time.monotonic() - started
    print(f"stress: produced in {produced:.1f} s, all consumed in {elapsed:.1f} s")

    assert [p.exitcode for p in producers] == [0] * PRODUCERS
    assert [c.exitcode for c in consumers] == [0] * CONSUMERS, "a consumer crashed"
    taken = Counter(
        line
        for c in range(CONSUMERS)
        for line in (tmp_path / f"consumer-{c}.txt").read_text().splitlines()
    )
    expected = {f"{p}-{n}" for p in range(PRODUCERS) for n in range(PER_PRODUCER)}
    assert expected - set(taken) == set(), "lost messages"
    assert [i for i, count in taken.items() if count > 1] == [], "duplicated messages"
    assert set(taken) == expected
    assert messages_in(tmp_path / "in") == []
    assert os.listdir(tmp_path / "quarantine") == []
