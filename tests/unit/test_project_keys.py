"""API keys name projects: entries parse or fail naming the setting; the key file rotates keys."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from gateway.callers import Caller, parse_entries
from gateway.http.projects import KeyRing
from gateway.settings import Settings


def _bearer(key: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {key}".encode())]


def test_entries_name_a_project_and_an_admin() -> None:
    callers = parse_entries([" k1 ", "k2:team-a", "k3:team_b:admin", "", "# note"], "keys")
    assert callers == {
        "k1": Caller("default", admin=False),
        "k2": Caller("team-a", admin=False),
        "k3": Caller("team_b", admin=True),
    }


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        (":team", "empty key"),
        ("k:team:owner", "only be 'admin'"),
        ("k:a:admin:x", "not key, key:project"),
        ("k:", "names project ''"),
        ("k:te am", "names project 'te am'"),
        ("k:-team", "names project '-team'"),
    ],
)
def test_a_bad_entry_is_refused_at_start_naming_the_setting(entry: str, why: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(model="m", api_keys=f"good,{entry}")
    message = str(caught.value)
    assert "RAGBLEND_API_KEYS entry 2" in message and why in message


def test_a_key_given_two_projects_is_refused() -> None:
    with pytest.raises(ValueError, match="repeats a key"):
        parse_entries(["k:a", "k:b"], "RAGBLEND_API_KEYS")
    assert parse_entries(["k:a", "k:a"], "RAGBLEND_API_KEYS") == {"k": Caller("a")}


def test_an_empty_key_file_setting_is_no_key_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGBLEND_API_KEYS_FILE", "")  # what compose passes when it is unset
    assert Settings(model="m").api_keys_file is None


def test_the_old_format_keeps_meaning_the_default_project() -> None:
    settings = Settings(model="m", api_keys="one, two")
    assert settings.api_keys == ["one", "two"]
    assert set(settings.key_callers.values()) == {Caller("default")}
    keys = KeyRing(settings.key_callers, None)
    assert keys.caller(_bearer("two")) == Caller("default")
    assert keys.caller(_bearer("three")) is None
    assert keys.caller([]) is None
    assert keys.projects == ["default"]


def test_the_key_file_adds_keys_and_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("# rotated weekly\nfile-key:team-a\n")
    keys = KeyRing(parse_entries(["env-key:ops:admin"], "RAGBLEND_API_KEYS"), path)
    assert keys.caller(_bearer("file-key")) == Caller("team-a")
    assert keys.caller(_bearer("env-key")) == Caller("ops", admin=True)
    assert keys.projects == ["ops", "team-a"]
    path.write_text("new-key:team-b\n")
    os.utime(path, ns=(1, 1))  # another modification time, however coarse the clock
    assert keys.caller(_bearer("file-key")) is None
    assert keys.caller(_bearer("new-key")) == Caller("team-b")


def test_a_broken_key_file_keeps_the_keys_read_before(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("file-key:team-a\n")
    keys = KeyRing({}, path)
    path.write_text("file-key:team a\n")
    keys.reload()  # as on SIGHUP
    assert keys.caller(_bearer("file-key")) == Caller("team-a")
    path.unlink()
    keys.reload()
    assert keys.caller(_bearer("file-key")) == Caller("team-a")


def test_a_bad_key_file_stops_the_start(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("ok\nk:a:b\n")
    with pytest.raises(ValueError, match=r"RAGBLEND_API_KEYS_FILE \(.*\) entry 2"):
        KeyRing({}, path)
    with pytest.raises(OSError):
        KeyRing({}, tmp_path / "missing")


def test_the_file_cannot_move_a_key_of_the_setting_to_another_project(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("k:b\n")
    with pytest.raises(ValueError, match="another project"):
        KeyRing(parse_entries(["k:a"], "RAGBLEND_API_KEYS"), path)
