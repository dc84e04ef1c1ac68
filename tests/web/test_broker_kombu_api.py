"""The kombu API the embedded broker builds on is the one it was tested against.

holodeck_web/broker.py subclasses kombu's file-system transport and overrides or calls its
private methods. kombu may change those in any release, so pyproject.toml pins kombu to the
tested minor series, and these tests fail the moment an upgrade changes what the broker relies
on: then re-run tests/web/test_broker.py and tests/web/test_crash_recovery_embedded.py against
the new kombu, adapt the broker, and update the recorded signatures and the pin together.
"""

from __future__ import annotations

import inspect
import tomllib
from pathlib import Path

import kombu
import pytest
from kombu.transport import filesystem, virtual
from kombu.utils.objects import cached_property
from packaging.requirements import Requirement
from packaging.version import Version

from holodeck_web import broker

ROOT = Path(__file__).resolve().parents[2]
TESTED_RANGE = ">=5.7,<5.8"

# filesystem.Channel: what broker.FilesystemChannel overrides (first block) or calls (second block).
FILESYSTEM_CHANNEL_METHODS = {
    "__init__": "(self, connection, **kwargs)",
    "_put": "(self, queue, payload, **kwargs)",
    "_get": "(self, queue)",
    "_purge": "(self, queue)",
    "_delete": "(self, queue, exchange, routing_key, pattern, *args, **kwargs)",
    "_queue_bind": "(self, exchange, routing_key, pattern, queue)",
    "_exchange_file": "(self, exchange)",
    "get_table": "(self, exchange)",
    "_put_fanout": "(self, exchange, payload, routing_key, **kwargs)",
}
# The transport options broker.FilesystemChannel reads: their kind decides when they are computed.
FILESYSTEM_CHANNEL_ATTRIBUTES = {
    "transport_options": property,
    "control_folder": property,
    "data_folder_in": cached_property,
    "data_folder_out": cached_property,
    "processed_folder": cached_property,
    "store_processed": cached_property,
}
# virtual.Channel: how kombu's consuming core calls the methods broker.FilesystemChannel overrides.
VIRTUAL_CHANNEL_METHODS = {
    "_get": "(self, queue, timeout=None)",
    "_put": "(self, queue, message)",
    "_purge": "(self, queue)",
    # broker.FilesystemChannel._delete calls it directly
    "_delete": "(self, queue, *args, **kwargs)",
}


def kombu_requirement() -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = [Requirement(r) for r in project["dependencies"] if Requirement(r).name == "kombu"]
    assert len(pins) == 1, "pyproject.toml pins kombu once"
    return pins[0]


def test_pyproject_pins_kombu_to_the_tested_range() -> None:
    assert kombu_requirement().specifier == Requirement(f"kombu{TESTED_RANGE}").specifier


def test_the_installed_kombu_is_in_the_pinned_range() -> None:
    assert Version(kombu.__version__) in kombu_requirement().specifier


def test_constraints_txt_names_a_kombu_in_the_pinned_range() -> None:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    (pinned,) = [line for line in lines if line.startswith("kombu==")]
    assert Version(pinned.removeprefix("kombu==")) in kombu_requirement().specifier


@pytest.mark.parametrize("name,signature", sorted(FILESYSTEM_CHANNEL_METHODS.items()))
def test_the_filesystem_channel_method_the_broker_relies_on_is_unchanged(
    name: str, signature: str
) -> None:
    method = inspect.getattr_static(filesystem.Channel, name)
    assert str(inspect.signature(method)) == signature


@pytest.mark.parametrize("name,kind", sorted(FILESYSTEM_CHANNEL_ATTRIBUTES.items()))
def test_the_filesystem_channel_option_the_broker_reads_is_unchanged(name: str, kind: type) -> None:
    assert isinstance(inspect.getattr_static(filesystem.Channel, name), kind)


@pytest.mark.parametrize("name,signature", sorted(VIRTUAL_CHANNEL_METHODS.items()))
def test_the_virtual_channel_contract_the_broker_overrides_is_unchanged(
    name: str, signature: str
) -> None:
    assert str(inspect.signature(getattr(virtual.Channel, name))) == signature


def test_the_exchange_table_entry_keeps_its_fields() -> None:
    assert filesystem.exchange_queue_t._fields == ("routing_key", "pattern", "queue")


def test_the_transport_still_keeps_its_bindings_in_a_state_the_broker_replaces() -> None:
    # broker.Transport replaces filesystem.Transport's process-wide global_state by its own.
    assert isinstance(filesystem.Transport.global_state, virtual.BrokerState)
    assert str(inspect.signature(filesystem.Transport.__init__)) == "(self, client, **kwargs)"
    assert str(inspect.signature(virtual.BrokerState)) == "(exchanges=None)"


def test_the_broker_subclasses_kombus_filesystem_transport() -> None:
    assert issubclass(broker.FilesystemChannel, filesystem.Channel)
    assert issubclass(broker.Transport, filesystem.Transport)
    names = vars(broker.FilesystemChannel)
    overridden = {n for n in names if n.startswith("_") and not n.startswith("__")}
    inherited = overridden & set(dir(filesystem.Channel))
    assert inherited <= set(FILESYSTEM_CHANNEL_METHODS), "a new override needs a recorded signature"
