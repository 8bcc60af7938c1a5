"""The SQLite store and API keys: hashes only, revocation, owner bootstrap, persistence."""

from __future__ import annotations

import hashlib
import sqlite3
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from olp.store import (
    MIGRATIONS,
    AsyncKeyStore,
    Database,
    KeyNameError,
    KeyStore,
    StoreError,
    hash_token,
)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    with Database(tmp_path / "olp.db") as database:
        yield database


@pytest.fixture
def keys(db: Database) -> KeyStore:
    return KeyStore(db)


def _all_db_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


def test_create_returns_a_fresh_olp_token_that_authenticates(keys: KeyStore) -> None:
    record, token = keys.create("alice")
    assert token.startswith("olp_") and len(token) == 4 + 43
    assert record.name == "alice" and record.tier == "guest" and record.active
    assert record.prefix == token[4:12]
    principal = keys.authenticate(token)
    assert principal is not None
    assert (principal.key_id, principal.name, principal.tier) == (record.id, "alice", "guest")
    assert not principal.is_owner
    _, other = keys.create("bob")
    assert other != token


def test_owner_tier(keys: KeyStore) -> None:
    _, token = keys.create("me", "owner")
    principal = keys.authenticate(token)
    assert principal is not None and principal.is_owner


@pytest.mark.parametrize("token", ["", "olp_", "olp_nope", "x" * 5000, "olp_\ud800"])
def test_unknown_tokens_fail(keys: KeyStore, token: str) -> None:
    keys.create("alice")
    assert keys.authenticate(token) is None


def test_revoke_by_name_and_by_id(keys: KeyStore) -> None:
    a, token_a = keys.create("alice")
    b, token_b = keys.create("bob")
    assert keys.revoke("alice")
    assert keys.authenticate(token_a) is None
    assert keys.revoke(str(b.id))
    assert keys.authenticate(token_b) is None
    assert not keys.revoke("alice")  # already revoked
    assert not keys.revoke(a.id)
    assert not keys.revoke("nobody")
    assert not keys.revoke(999)


def test_revoked_keys_stay_listed_and_free_their_name(keys: KeyStore) -> None:
    keys.create("alice")
    with pytest.raises(KeyNameError):
        keys.create("alice")
    assert keys.revoke("alice")
    _, token = keys.create("alice")
    listed = keys.list()
    assert [(r.name, r.active) for r in listed] == [("alice", False), ("alice", True)]
    assert listed[0].revoked_at is not None
    assert keys.authenticate(token) is not None


@pytest.mark.parametrize("name", ["", "   ", "123", "a" * 65, "bad\nname"])
def test_bad_names_are_refused(keys: KeyStore, name: str) -> None:
    with pytest.raises(KeyNameError):
        keys.create(name)


def test_only_hashes_reach_the_database(db: Database, keys: KeyStore, tmp_path: Path) -> None:
    tokens = [keys.create(f"k{i}")[1] for i in range(3)]
    owner = keys.ensure_owner(None)
    assert owner is not None
    env_token = "my-own-owner-token-0123456789"
    keys.ensure_owner(env_token)
    tokens += [owner, env_token]
    rows = db.read(lambda c: c.execute("SELECT * FROM api_keys").fetchall())
    hashes = db.read(lambda c: [h for (h,) in c.execute("SELECT hash FROM api_keys")])
    assert sorted(hashes) == sorted(hashlib.sha256(t.encode()).hexdigest() for t in tokens)
    db.close()
    raw = _all_db_bytes(tmp_path / "olp.db")
    assert hash_token(tokens[0]).encode() in raw  # we are reading the right bytes
    for token in tokens:
        assert token.encode() not in raw
        assert token[4:].encode() not in raw
        assert all(token not in str(cell) for row in rows for cell in row)
    for record_text in map(repr, KeyStore(Database(tmp_path / "olp.db")).list()):
        assert not any(token in record_text for token in tokens)


def test_database_file_is_private_and_uses_wal(db: Database) -> None:
    assert stat.S_IMODE(db.path.stat().st_mode) == 0o600
    assert db.read(lambda c: c.execute("PRAGMA journal_mode").fetchone()[0]) == "wal"
    assert db.read(lambda c: c.execute("PRAGMA synchronous").fetchone()[0]) == 1  # NORMAL
    assert db.schema_version == len(MIGRATIONS)


def test_keys_persist_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "olp.db"
    with Database(path) as db:
        _, token = KeyStore(db).create("alice")
        KeyStore(db).revoke(KeyStore(db).create("bob")[0].id)
    with Database(path) as db:  # migrations are not re-applied
        assert db.schema_version == len(MIGRATIONS)
        keys = KeyStore(db)
        assert keys.authenticate(token) is not None
        assert [(r.name, r.active) for r in keys.list()] == [("alice", True), ("bob", False)]


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "olp.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        Database(path)


def test_failed_write_rolls_back(db: Database) -> None:
    def boom(c: sqlite3.Connection) -> None:
        c.execute("INSERT INTO api_keys (name, tier, hash, prefix, created_at) "
                  "VALUES ('x', 'guest', 'h', 'p', 0)")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        db.write(boom)
    assert db.read(lambda c: c.execute("SELECT count(*) FROM api_keys").fetchone()[0]) == 0


# -- owner bootstrap ------------------------------------------------------------------------


def test_first_start_generates_an_owner_token_once(keys: KeyStore) -> None:
    token = keys.ensure_owner(None)
    assert token is not None and token.startswith("olp_")
    principal = keys.authenticate(token)
    assert principal is not None and principal.is_owner
    assert keys.ensure_owner(None) is None
    assert keys.ensure_owner("") is None
    assert [r.tier for r in keys.list()] == ["owner"]


def test_a_revoked_bootstrap_owner_is_replaced_on_next_start(keys: KeyStore) -> None:
    first = keys.ensure_owner(None)
    assert first is not None
    assert keys.revoke("owner")
    second = keys.ensure_owner(None)
    assert second is not None and second != first
    assert keys.authenticate(first) is None
    assert keys.authenticate(second) is not None


def test_an_existing_owner_key_means_no_bootstrap(keys: KeyStore) -> None:
    keys.create("me", "owner")
    assert keys.ensure_owner(None) is None


def test_env_owner_token(keys: KeyStore) -> None:
    bootstrap = keys.ensure_owner(None)
    assert bootstrap is not None
    first, second = "first-env-owner-token-abcdef", "second-env-owner-token-ghijk"
    assert keys.ensure_owner(first) is None
    assert keys.ensure_owner(first) is None  # idempotent
    principal = keys.authenticate(first)
    assert principal is not None and principal.is_owner

    assert keys.ensure_owner(second) is None  # the env token changed: it replaces the old one
    assert keys.authenticate(first) is None
    assert keys.authenticate(second) is not None
    assert keys.authenticate(bootstrap) is not None  # other owner keys are untouched
    env_keys = [r for r in keys.list() if r.source == "env"]
    assert [r.active for r in env_keys] == [False, True]
    assert env_keys[1].display_prefix == "(custom)"  # no part of a custom token is shown

    assert keys.ensure_owner(first) is None  # switching back reactivates the first
    assert keys.authenticate(first) is not None and keys.authenticate(second) is None
    assert keys.ensure_owner(None) is None


def test_an_explicitly_revoked_env_token_stops_the_start(keys: KeyStore) -> None:
    env = "leaked-env-owner-token-123456"
    keys.ensure_owner(env)
    assert keys.revoke("owner-env")
    with pytest.raises(StoreError, match="revoked") as info:
        keys.ensure_owner(env)
    assert env not in str(info.value)
    assert keys.authenticate(env) is None


def test_an_env_token_equal_to_a_guest_key_is_refused(keys: KeyStore) -> None:
    _, token = keys.create("guest")
    with pytest.raises(StoreError, match="guest"):
        keys.ensure_owner(token)
    principal = keys.authenticate(token)
    assert principal is not None and principal.tier == "guest"


def test_owner_names_avoid_taken_names(keys: KeyStore) -> None:
    keys.create("owner")  # a guest called "owner"
    assert keys.ensure_owner(None) is not None
    assert sorted((r.name, r.tier) for r in keys.list()) == [
        ("owner", "guest"), ("owner-2", "owner")]


# -- async layer ----------------------------------------------------------------------------


async def test_async_key_store_runs_in_worker_threads(db: Database) -> None:
    keys = AsyncKeyStore(KeyStore(db))
    owner = await keys.ensure_owner(None)
    assert owner is not None
    record, token = await keys.create("alice")
    principal = await keys.authenticate(token)
    assert principal is not None and principal.key_id == record.id
    assert [r.name for r in await keys.list()] == ["owner", "alice"]
    assert await keys.revoke("alice")
    assert await keys.authenticate(token) is None
    assert await keys.ensure_owner(None) is None
    loop_thread = threading.get_ident()
    assert await db.read_async(lambda c: threading.get_ident()) != loop_thread


async def test_concurrent_async_calls_share_one_connection(tmp_path: Path) -> None:
    db = await Database.open_async(tmp_path / "olp.db")
    keys = AsyncKeyStore(KeyStore(db))
    results: list[bool] = []

    async def one(i: int) -> None:
        _, token = await keys.create(f"user{i}")
        results.append(await keys.authenticate(token) is not None)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(one, i)
    assert results == [True] * 20
    assert len(await keys.list()) == 20
    db.close()


# -- fuzz -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_keys() -> Iterator[KeyStore]:
    with tempfile.TemporaryDirectory() as tmp, Database(Path(tmp) / "olp.db") as db:
        KeyStore(db).create("someone")
        yield KeyStore(db)


@settings(max_examples=200, deadline=None)
@given(token=st.text())
def test_authenticate_never_raises(fuzz_keys: KeyStore, token: str) -> None:
    assert fuzz_keys.authenticate(token) is None
