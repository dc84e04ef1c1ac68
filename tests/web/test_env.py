"""holodeck_web/env.py in process: each reader's default, its accepted spellings, and the one
line that names a malformed variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from holodeck_web.env import env_bool, env_choice, env_int, env_list, env_url, secret_key

NAME = "HOLODECK_TEST_SETTING"


@pytest.fixture(autouse=True)
def unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (NAME, "SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        *[("1", True), ("true", True), (" Yes ", True), ("ON", True)],
        *[("0", False), ("false", False), ("no", False), ("Off", False), ("", False)],
    ],
)
def test_a_boolean_accepts_the_usual_spellings(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool
) -> None:
    monkeypatch.setenv(NAME, raw)
    assert env_bool(NAME, not expected) is expected


def test_an_unset_boolean_is_its_default() -> None:
    assert env_bool(NAME, True) is True
    assert env_bool(NAME, False) is False


def test_a_malformed_boolean_names_the_variable_and_the_spellings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(NAME, "maybe")
    with pytest.raises(ImproperlyConfigured) as caught:
        env_bool(NAME, False)
    assert str(caught.value) == (f"{NAME}='maybe' is not a boolean (use 1/0, true/false, yes/no)")


def test_an_integer_is_read_and_an_unset_or_blank_one_is_its_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert env_int(NAME, 7) == 7
    monkeypatch.setenv(NAME, "  ")
    assert env_int(NAME, 7) == 7
    monkeypatch.setenv(NAME, "42")
    assert env_int(NAME, 7, minimum=42) == 42


@pytest.mark.parametrize(
    ("raw", "message"),
    [("zero", f"{NAME}='zero' is not an integer"), ("0", f"{NAME}='0' must be >= 1")],
)
def test_a_malformed_or_too_small_integer_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, raw: str, message: str
) -> None:
    monkeypatch.setenv(NAME, raw)
    with pytest.raises(ImproperlyConfigured) as caught:
        env_int(NAME, 5, minimum=1)
    assert str(caught.value) == message


def test_a_choice_is_read_in_any_case_and_names_the_choices_when_wrong(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    choices = ("DEBUG", "INFO", "WARNING")
    assert env_choice(NAME, "INFO", choices) == "INFO"
    monkeypatch.setenv(NAME, " debug ")
    assert env_choice(NAME, "INFO", choices) == "DEBUG"
    monkeypatch.setenv(NAME, "loud")
    with pytest.raises(ImproperlyConfigured) as caught:
        env_choice(NAME, "INFO", choices)
    assert str(caught.value) == f"{NAME}='loud' must be one of DEBUG, INFO, WARNING"


def test_a_list_is_comma_separated_with_blanks_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    assert env_list(NAME, ["default"]) == ["default"]
    monkeypatch.setenv(NAME, " a.example.com, ,b.example.com ,")
    assert env_list(NAME, ["default"]) == ["a.example.com", "b.example.com"]
    monkeypatch.setenv(NAME, "")
    assert env_list(NAME, ["default"]) == []  # set but empty: nothing, not the default


def test_a_url_must_have_an_allowed_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    assert env_url(NAME, schemes={"redis"}) is None
    monkeypatch.setenv(NAME, " redis://127.0.0.1:6379/0 ")
    assert env_url(NAME, schemes={"redis"}) == "redis://127.0.0.1:6379/0"
    monkeypatch.setenv(NAME, "http://127.0.0.1:6379")
    with pytest.raises(ImproperlyConfigured) as caught:
        env_url(NAME, schemes={"rediss", "redis"})
    assert str(caught.value) == (
        f"{NAME}='http://127.0.0.1:6379': the scheme must be one of redis, rediss"
    )


def test_without_secret_key_one_is_generated_once_and_kept_private(tmp_path: Path) -> None:
    data = tmp_path / "data"

    key = secret_key(data, debug=False)

    assert len(key) >= 50
    key_file = data / "secret_key"
    assert key_file.read_text() == key
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert secret_key(data, debug=False) == key  # the next start reads the same key


def test_a_secret_key_from_the_environment_wins_and_must_be_long_unless_debugging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_KEY", "k" * 40)
    assert secret_key(tmp_path, debug=False) == "k" * 40
    assert not (tmp_path / "secret_key").exists()
    monkeypatch.setenv("SECRET_KEY", "short")
    assert secret_key(tmp_path, debug=True) == "short"
    with pytest.raises(ImproperlyConfigured) as caught:
        secret_key(tmp_path, debug=False)
    assert str(caught.value) == "SECRET_KEY must be at least 32 characters long"
