"""The per-data-dir secret: created once with mode 0600, reused after restarts, never guessed."""

import logging
import stat
import threading
from pathlib import Path

import pytest

from engine.contract import BlendSettings
from engine.kvstore.disk import DiskTier
from engine.kvstore.secret import (
    SECRET_BYTES,
    SecretFileError,
    chunk_kv_secret,
    load_or_create_secret,
)
from tests.unit.kv_entries import key_of, make_entry, same


def test_first_use_creates_a_private_random_secret(tmp_path: Path) -> None:
    path = tmp_path / "chunk_kv" / "secret"
    secret = load_or_create_secret(path)
    assert len(secret) == SECRET_BYTES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().strip() == secret.hex()
    assert [p.name for p in path.parent.iterdir()] == ["secret"]  # no temp file left
    assert load_or_create_secret(tmp_path / "elsewhere") != secret


def test_the_secret_survives_a_restart_and_keeps_disk_entries_valid(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    entry = make_entry(0)
    DiskTier(tmp_path / "store", load_or_create_secret(path)).put(key_of(entry), entry)
    restarted = DiskTier(tmp_path / "store", load_or_create_secret(path))
    assert same(restarted.get(key_of(entry)), entry)


def test_servers_starting_together_agree_on_one_secret(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    found: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: found.append(load_or_create_secret(path))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 8 and len(set(found)) == 1


@pytest.mark.parametrize(
    "content",
    [b"", b"abc\n", b"zz" * SECRET_BYTES, b"ab" * (SECRET_BYTES + 1), b"\xff" * 64],
    ids=["empty", "short", "not-hex", "long", "binary"],
)
def test_a_malformed_secret_file_is_a_clear_error_and_is_left_alone(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "secret"
    path.write_bytes(content)
    with pytest.raises(SecretFileError, match=r"malformed.*Delete it") as raised:
        load_or_create_secret(path)
    assert str(path) in str(raised.value)
    assert path.read_bytes() == content


def test_a_secret_path_that_is_a_folder_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "secret").mkdir()
    with pytest.raises(SecretFileError, match="cannot read"):
        load_or_create_secret(tmp_path / "secret")


def test_a_secret_readable_by_others_is_used_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "secret"
    secret = load_or_create_secret(path)
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="engine.kvstore.secret"):
        assert load_or_create_secret(path) == secret
    assert "chmod 600" in caplog.text


def test_an_unusable_secret_is_refused_by_the_disk_tier(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="bytes"):
        DiskTier(tmp_path, b"short")


def test_a_shared_hex_secret_replaces_the_secret_file(tmp_path: Path) -> None:
    shared = "ab" * 32
    assert chunk_kv_secret(tmp_path / "secret", shared) == bytes.fromhex(shared)
    assert not (tmp_path / "secret").exists()
    assert chunk_kv_secret(tmp_path / "secret") == load_or_create_secret(tmp_path / "secret")


@pytest.mark.parametrize("text", ["not hex", "ab" * 8, "ab" * 65])
def test_a_shared_secret_that_is_not_16_to_64_hex_bytes_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="secret"):
        chunk_kv_secret("unused", text)


def test_the_shared_secret_stays_out_of_the_settings_repr() -> None:
    settings = BlendSettings("m", "/data", 1, None, (1,), shared_secret_hex="cd" * 32)
    assert "cd" * 32 not in repr(settings)
    assert BlendSettings.from_extra_config(settings.to_extra_config()) == settings
