"""vibe credential discovery, spawn environment, home links and the AUTH_MISSING check."""

from __future__ import annotations

from pathlib import Path

import pytest

from olp.ir import Error
from olp.providers.vibe import ADAPTER
from olp.providers.vibe import _credentials as creds

ALWAYS = {"VIBE_ENABLE_TELEMETRY": "false", "VIBE_ENABLE_UPDATE_CHECKS": "false"}


def env_file(path: Path, text: str = "MISTRAL_API_KEY=sk-from-file\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_spawn_env_passes_only_the_key_and_the_auth_path() -> None:
    adapter = ADAPTER
    proxy_env = {"MISTRAL_API_KEY": "k", "MISTRAL_VIBE_AUTH_PATH": "/a/.env",
                 "VIBE_HOME": "/v", "VIBE_ACTIVE_MODEL": "x", "PATH": "/bin", "HOME": "/root",
                 "OPENAI_API_KEY": "no"}
    assert adapter.spawn_env(proxy_env) == {**ALWAYS, "MISTRAL_API_KEY": "k",
                                            "MISTRAL_VIBE_AUTH_PATH": "/a/.env"}
    assert adapter.spawn_env({"PATH": "/bin"}) == ALWAYS
    assert adapter.spawn_env({"MISTRAL_API_KEY": ""}) == ALWAYS


def test_the_users_vibe_home_becomes_the_auth_path() -> None:
    # VIBE_HOME itself is never passed on: each spawn has its own
    assert ADAPTER.spawn_env({"VIBE_HOME": "/srv/vibe"}) == {
        **ALWAYS, "MISTRAL_VIBE_AUTH_PATH": "/srv/vibe/.env"}


def test_home_links_default_location(tmp_path: Path) -> None:
    adapter = ADAPTER
    assert adapter.home_links({}, tmp_path) == {}
    path = env_file(tmp_path / ".vibe" / ".env")
    assert adapter.home_links({}, tmp_path) == {".vibe/.env": path}


def test_home_links_ignore_the_spawns_own_vibe_home(tmp_path: Path) -> None:
    real = env_file(tmp_path / "real" / ".vibe" / ".env")
    spawn_home = tmp_path / "job" / "home"
    env = {"HOME": str(spawn_home), "VIBE_HOME": str(spawn_home / ".vibe")}
    assert ADAPTER.home_links(env, tmp_path / "real") == {".vibe/.env": real}


def test_home_links_honour_vibe_home_and_auth_path(tmp_path: Path) -> None:
    env_file(tmp_path / ".vibe" / ".env")
    other = env_file(tmp_path / "other" / ".env")
    assert ADAPTER.home_links({"VIBE_HOME": str(tmp_path / "other")}, tmp_path) == {
        ".vibe/.env": other}
    chosen = env_file(tmp_path / "secrets" / "mistral.env")
    env = {"VIBE_HOME": str(tmp_path / "other"), "MISTRAL_VIBE_AUTH_PATH": str(chosen)}
    assert ADAPTER.home_links(env, tmp_path) == {".vibe/.env": chosen}
    # MISTRAL_VIBE_AUTH_PATH is exclusive: a missing file there means no link at all
    env = {"MISTRAL_VIBE_AUTH_PATH": str(tmp_path / "missing.env")}
    assert ADAPTER.home_links(env, tmp_path) == {}


def test_preflight_accepts_a_key_in_the_env(tmp_path: Path) -> None:
    assert ADAPTER.preflight({"MISTRAL_API_KEY": "k"}, tmp_path) is None


def test_preflight_accepts_a_key_file(tmp_path: Path) -> None:
    env_file(tmp_path / ".vibe" / ".env", '# comment\nexport MISTRAL_API_KEY="sk-1"\n')
    assert ADAPTER.preflight({}, tmp_path) is None
    path = env_file(tmp_path / "elsewhere" / ".env")
    assert ADAPTER.preflight({"MISTRAL_VIBE_AUTH_PATH": str(path)}, tmp_path / "x") is None
    assert ADAPTER.preflight({"VIBE_HOME": str(path.parent)}, tmp_path / "x") is None


@pytest.mark.parametrize("text", ["", "MISTRAL_API_KEY=\n", "OTHER_KEY=1\n",
                                  "MISTRAL_API_KEY=''\n", "# MISTRAL_API_KEY=sk\n"])
def test_preflight_rejects_a_file_without_a_key(tmp_path: Path, text: str) -> None:
    env_file(tmp_path / ".vibe" / ".env", text)
    missing = ADAPTER.preflight({}, tmp_path)
    assert isinstance(missing, Error)
    assert (missing.code, missing.category) == ("AUTH_MISSING", "auth")
    assert "MISTRAL_API_KEY" in missing.message and "~/.vibe/.env" in missing.message


def test_preflight_without_anything(tmp_path: Path) -> None:
    assert isinstance(ADAPTER.preflight({"MISTRAL_API_KEY": ""}, tmp_path), Error)
    # an auth path that does not exist is not rescued by ~/.vibe/.env
    env_file(tmp_path / ".vibe" / ".env")
    env = {"MISTRAL_VIBE_AUTH_PATH": str(tmp_path / "nope.env")}
    assert isinstance(ADAPTER.preflight(env, tmp_path), Error)


def test_has_key_tolerates_unreadable_files(tmp_path: Path) -> None:
    assert not creds.has_key(tmp_path / "missing")
    assert not creds.has_key(tmp_path)  # a directory
    big = tmp_path / "big.env"
    big.write_bytes(b"MISTRAL_API_KEY=k\n" + b"#" * (2 << 20))
    assert not creds.has_key(big)
