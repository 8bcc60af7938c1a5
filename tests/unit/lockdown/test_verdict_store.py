"""Kept lockdown verdicts (ADR 0024): ``$OLP_HOME/lockdown.json`` (0600, the newest
``MAX_KEPT``, only verdicts that judged something), :meth:`Verdict.line` as ``olp doctor``
prints it, and :func:`check_key`: a digest of everything that decides the verdict, with no
secret in it."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from olp.lockdown import Verdict, VerdictStore, _store, check_key
from olp.lockdown._store import CHECK_VERSION, MAX_KEPT, file_digest

SECRET = "sk-ant-secret-value-never-written-7f3c"
VERIFIED = Verdict("claude", "2.1.332")
FAILED = Verdict("claude", "2.1.332", offered=("Bash", "Read"),
                 problems=("offers Bash, Read",))
UNCHECKED = Verdict("claude", "2.1.332", problems=(
    "the CLI sent the mock no model request, so nothing could be checked",), checked=False)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- Verdict ----------------------------------------------------------------------------------

def test_line_of_a_verified_cli() -> None:
    assert VERIFIED.ok
    assert VERIFIED.line() == "verified (claude 2.1.332)"
    assert Verdict("claude", None).line() == "verified (claude version unknown)"
    assert Verdict("codex", "").line() == "verified (codex version unknown)"


def test_line_of_a_failed_cli() -> None:
    assert not FAILED.ok
    assert FAILED.line() == "FAILED: offers Bash, Read"
    two = Verdict("claude", "1", offered=("Bash",), problems=(
        "offers Bash", "contacted another host: statsig.anthropic.com:443"))
    assert two.line() == "FAILED: offers Bash; contacted another host: statsig.anthropic.com:443"


def test_an_unchecked_verdict_is_not_ok() -> None:
    assert not UNCHECKED.ok
    assert UNCHECKED.line() == ("FAILED: the CLI sent the mock no model request, so nothing "
                                "could be checked")
    assert Verdict("claude", "1", checked=False).line() == "FAILED: not verified"


# --- VerdictStore -----------------------------------------------------------------------------

def test_put_then_get(tmp_path: Path) -> None:
    store = VerdictStore(tmp_path / "lockdown.json")
    assert store.get("k1") is None
    store.put("k1", VERIFIED)
    store.put("k2", FAILED)
    assert store.get("k1") == VERIFIED
    assert store.get("k2") == FAILED
    assert store.get("k3") is None
    # another store on the same file (the next start) reads the same
    again = VerdictStore(tmp_path / "lockdown.json")
    kept = again.get("k2")
    assert kept == FAILED
    assert kept is not None and kept.offered == ("Bash", "Read") and kept.checked


def test_put_replaces_the_verdict_under_a_key(tmp_path: Path) -> None:
    store = VerdictStore(tmp_path / "lockdown.json")
    store.put("k", FAILED)
    store.put("k", VERIFIED)
    assert store.get("k") == VERIFIED
    assert list(json.loads(store.path.read_text())) == ["k"]


def test_the_file_is_0600_and_its_parent_is_created(tmp_path: Path) -> None:
    path = tmp_path / "home" / "olp" / "lockdown.json"
    store = VerdictStore(path)
    store.put("k", VERIFIED)
    assert path.is_file()
    assert mode(path) == 0o600
    assert mode(path.parent) & 0o077 == 0
    assert not path.with_name("lockdown.json.tmp").exists()


def test_a_world_readable_file_becomes_0600(tmp_path: Path) -> None:
    path = tmp_path / "lockdown.json"
    path.write_text("{}")
    path.chmod(0o644)
    VerdictStore(path).put("k", VERIFIED)
    assert mode(path) == 0o600


def test_an_unchecked_verdict_is_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "lockdown.json"
    store = VerdictStore(path)
    store.put("k", UNCHECKED)
    assert not path.exists()
    assert store.get("k") is None
    store.put("other", VERIFIED)
    store.put("k", UNCHECKED)
    assert store.get("k") is None
    assert list(json.loads(path.read_text())) == ["other"]


def test_only_the_newest_are_kept(tmp_path: Path) -> None:
    assert MAX_KEPT == 64
    store = VerdictStore(tmp_path / "lockdown.json")
    for i in range(MAX_KEPT):
        store.put(f"k{i}", Verdict("claude", str(i)))
    assert store.get("k0") == Verdict("claude", "0")
    store.put("k0", Verdict("claude", "0-again"))  # put again: now the newest
    store.put(f"k{MAX_KEPT}", Verdict("claude", "new"))
    kept = json.loads(store.path.read_text())
    assert len(kept) == MAX_KEPT
    assert store.get("k1") is None  # the oldest went
    assert store.get("k0") == Verdict("claude", "0-again")
    assert store.get("k2") == Verdict("claude", "2")
    assert store.get(f"k{MAX_KEPT}") == Verdict("claude", "new")
    assert list(kept)[-2:] == ["k0", f"k{MAX_KEPT}"]


@pytest.mark.parametrize("garbage", [
    b"", b"\x00\xff not json {", b"[1, 2, 3]", b'"a string"', b"null", b"{\"k\": ",
], ids=["empty", "binary", "list", "string", "null", "truncated"])
def test_a_corrupt_file_reads_as_empty_and_is_overwritten(tmp_path: Path,
                                                         garbage: bytes) -> None:
    path = tmp_path / "lockdown.json"
    path.write_bytes(garbage)
    store = VerdictStore(path)
    assert store.get("k") is None
    store.put("k", FAILED)
    assert json.loads(path.read_text()) == {"k": {
        "cli": "claude", "version": "2.1.332", "offered": ["Bash", "Read"],
        "problems": ["offers Bash, Read"], "checked": True}}
    assert store.get("k") == FAILED


@pytest.mark.parametrize("entry", [
    "not a dict", 42, None, [], {"version": "1"}, {"cli": "claude", "problems": 7},
], ids=["str", "int", "null", "list", "no-cli", "bad-problems"])
def test_a_malformed_entry_reads_as_none(tmp_path: Path, entry: Any) -> None:
    path = tmp_path / "lockdown.json"
    path.write_text(json.dumps({"bad": entry, "good": {"cli": "qwen", "version": "0.1"}}))
    store = VerdictStore(path)
    assert store.get("bad") is None
    assert store.get("good") == Verdict("qwen", "0.1")


def test_an_unreadable_path_reads_as_empty(tmp_path: Path) -> None:
    (tmp_path / "lockdown.json").mkdir()  # a directory where the file should be
    assert VerdictStore(tmp_path / "lockdown.json").get("k") is None


def test_a_put_waits_for_another_in_progress_and_both_are_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every provider's gate puts into the one file from its own worker thread: the second
    put reads only once the first has written, so neither verdict is lost."""
    read: Callable[[VerdictStore], dict[str, Any]] = VerdictStore._read
    first_in, release = threading.Event(), threading.Event()
    order: list[str] = []

    def read_slowly(self: VerdictStore) -> dict[str, Any]:
        data = read(self)
        order.append(threading.current_thread().name)
        if threading.current_thread().name == "claude":
            first_in.set()
            assert release.wait(10)
        return data

    monkeypatch.setattr(VerdictStore, "_read", read_slowly)
    path = tmp_path / "lockdown.json"
    claude = threading.Thread(target=VerdictStore(path).put, args=("claude-key", VERIFIED),
                              name="claude")
    codex = threading.Thread(target=VerdictStore(path).put, args=("codex-key", FAILED),
                             name="codex")
    claude.start()
    assert first_in.wait(10)
    codex.start()
    codex.join(0.2)
    assert codex.is_alive() and order == ["claude"]  # held back while claude's put runs
    release.set()
    claude.join(10)
    codex.join(10)
    monkeypatch.setattr(VerdictStore, "_read", read)
    assert order == ["claude", "codex"]
    assert set(json.loads(path.read_text())) == {"claude-key", "codex-key"}


def test_each_put_writes_its_own_temporary_file_and_leaves_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sources: list[str] = []
    real_replace = os.replace

    def spy(src: Any, dst: Any) -> None:
        sources.append(str(src))
        real_replace(src, dst)

    monkeypatch.setattr(_store.os, "replace", spy)
    path = tmp_path / "lockdown.json"
    VerdictStore(path).put("claude-key", VERIFIED)
    VerdictStore(path).put("codex-key", FAILED)
    assert len(set(sources)) == 2 and all(Path(s).parent == tmp_path for s in sources)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lockdown.json"]


def test_a_failed_write_leaves_the_kept_file_and_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "lockdown.json"
    VerdictStore(path).put("claude-key", VERIFIED)

    def full(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_store.os, "replace", full)
    with pytest.raises(OSError):
        VerdictStore(path).put("codex-key", FAILED)
    assert set(json.loads(path.read_text())) == {"claude-key"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lockdown.json"]


# --- check_key --------------------------------------------------------------------------------

@pytest.fixture
def binary(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "claude"
    path.parent.mkdir()
    path.write_bytes(b"#!/bin/sh\necho claude 2.1.332\n")
    return path


def key_of(binary: Path, **changes: Any) -> str:
    args: dict[str, Any] = {
        "version": "2.1.332", "confined": True, "extra_args": ["--verbose"],
        "env": {"ANTHROPIC_API_KEY": SECRET, "DEBUG": "0"},
        "home_files": {".claude/settings.json": "{}"},
        "spawn": {"argv": ["claude", "-p", "--tools", ""], "login": False}}
    args.update(changes)
    return check_key("claude", str(binary), **args)


def test_check_key_is_stable(binary: Path) -> None:
    key = key_of(binary)
    assert key == key_of(binary)
    assert len(key) == 64 and int(key, 16) >= 0
    # the order of env and home_files does not matter
    assert key == key_of(binary, env={"DEBUG": "0", "ANTHROPIC_API_KEY": SECRET})
    assert key == key_of(binary, home_files={".claude/settings.json": "{}"})


def test_check_key_follows_a_symlink_to_the_same_content(binary: Path) -> None:
    link = binary.parent / "claude-link"
    link.symlink_to(binary)
    assert key_of(link) == key_of(binary)


def test_check_key_changes_with_the_binary_content(binary: Path) -> None:
    before = key_of(binary)
    data = binary.read_bytes()
    binary.write_bytes(data.replace(b"332", b"333"))  # same size, other bytes
    assert binary.stat().st_size == len(data)
    assert key_of(binary) != before
    binary.write_bytes(data)
    assert key_of(binary) == before


@pytest.mark.parametrize("change", [
    {"version": "2.1.333"},
    {"version": None},
    {"confined": False},
    {"extra_args": []},
    {"extra_args": ["--verbose", "--tools", "Bash"]},
    {"env": {"ANTHROPIC_API_KEY": SECRET, "DEBUG": "1"}},
    {"env": {"ANTHROPIC_API_KEY": SECRET + "x", "DEBUG": "0"}},
    {"env": {"DEBUG": "0"}},
    {"home_files": {".claude/settings.json": '{"permissions": {"allow": ["Bash"]}}'}},
    {"home_files": {}},
    {"spawn": {"argv": ["claude", "-p"], "login": False}},
    {"spawn": {"argv": ["claude", "-p", "--tools", ""], "login": True}},
    {"spawn": None},
], ids=lambda c: f"{next(iter(c))}={next(iter(c.values()))!r}"[:40])
def test_check_key_changes_with_what_decides_the_verdict(binary: Path,
                                                         change: dict[str, Any]) -> None:
    assert key_of(binary, **change) != key_of(binary)


def test_check_key_changes_with_the_cli_olp_and_check_versions(
        binary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = key_of(binary)
    common: dict[str, Any] = {"version": "2.1.332", "confined": True,
                              "extra_args": ["--verbose"],
                              "env": {"ANTHROPIC_API_KEY": SECRET, "DEBUG": "0"},
                              "home_files": {".claude/settings.json": "{}"},
                              "spawn": {"argv": ["claude", "-p", "--tools", ""],
                                        "login": False}}
    assert check_key("claude", str(binary), **common) == key
    assert check_key("codex", str(binary), **common) != key
    monkeypatch.setattr(_store, "CHECK_VERSION", CHECK_VERSION + 1)
    assert key_of(binary) != key
    monkeypatch.setattr(_store, "CHECK_VERSION", CHECK_VERSION)
    monkeypatch.setattr(_store, "__version__", "0.0.0-other")
    assert key_of(binary) != key


def test_check_key_of_a_missing_binary_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        key_of(tmp_path / "gone")


def test_env_values_appear_neither_in_the_key_nor_the_file(binary: Path,
                                                           tmp_path: Path) -> None:
    key = key_of(binary)
    assert SECRET not in key
    store = VerdictStore(tmp_path / "lockdown.json")
    store.put(key, FAILED)
    text = store.path.read_text()
    assert SECRET not in text and "ANTHROPIC_API_KEY" not in text
    assert key in text


def test_file_digest_is_the_sha256_of_the_resolved_file(binary: Path) -> None:
    import hashlib

    link = binary.parent / "link"
    os.symlink(binary, link)
    expected = hashlib.sha256(binary.read_bytes()).hexdigest()
    assert file_digest(str(binary)) == expected == file_digest(str(link))
