"""A key's binding to accounts (issue #30), kept in ``api_keys.accounts``: stored in order, read
back by every path (list, authenticate, update), kept, replaced or cleared by an update, a
contradiction with the allow-list refused, a damaged value reported, and an old database
migrated with no binding."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from olp.store import Database, KeyPolicy, KeyStore, StoreError
from olp.store._db import MIGRATIONS, _statements

ALICE = (("anthropic", "alice"), ("anthropic", "alice-work"), ("openai", "default"))


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    with Database(tmp_path / "olp.db") as database:
        yield database


@pytest.fixture
def keys(db: Database) -> KeyStore:
    return KeyStore(db)


def _stored(db: Database, key_id: int) -> object:
    row = db.read(lambda c: c.execute("SELECT accounts FROM api_keys WHERE id = ?",
                                      (key_id,)).fetchone())
    return row[0]


def test_a_binding_round_trips_in_its_order(db: Database, keys: KeyStore) -> None:
    record, token = keys.create("alice", policy=KeyPolicy(accounts=ALICE))
    assert record.policy.accounts == ALICE
    assert _stored(db, record.id) == "anthropic:alice,anthropic:alice-work,openai:default"
    [listed] = keys.list()
    assert listed.policy.accounts == ALICE
    principal = keys.authenticate(token)
    assert principal is not None and principal.policy.accounts == ALICE


def test_the_order_given_is_kept_not_sorted(keys: KeyStore) -> None:
    backwards = (("openai", "zed"), ("anthropic", "bob"), ("anthropic", "alice"))
    record, _ = keys.create("bob", policy=KeyPolicy(accounts=backwards))
    assert record.policy.accounts == backwards
    assert keys.list()[0].policy.accounts == backwards


def test_repeats_are_dropped_on_the_way_in(keys: KeyStore) -> None:
    twice = (("anthropic", "alice"), ("openai", "default"), ("anthropic", "alice"))
    record, _ = keys.create("carol", policy=KeyPolicy(accounts=twice))
    assert record.policy.accounts == twice[:2]


def test_no_binding_is_null_and_reads_as_empty(db: Database, keys: KeyStore) -> None:
    record, token = keys.create("dan")
    assert record.policy.accounts == ()
    assert _stored(db, record.id) is None
    principal = keys.authenticate(token)
    assert principal is not None and principal.policy.accounts == ()


def test_update_keeps_replaces_and_clears_the_binding(db: Database, keys: KeyStore) -> None:
    record, _ = keys.create("alice", policy=KeyPolicy(accounts=ALICE))
    kept = keys.update("alice", limits={"per_day": 5})
    assert kept is not None
    assert kept.policy.accounts == ALICE and kept.policy.limits.per_day == 5
    replaced = keys.update(record.id, accounts=(("openai", "work"),))
    assert replaced is not None
    assert replaced.policy.accounts == (("openai", "work"),)
    assert replaced.policy.limits.per_day == 5  # the rest of the policy is kept
    cleared = keys.update("alice", accounts=())
    assert cleared is not None and cleared.policy.accounts == ()
    assert _stored(db, record.id) is None
    assert keys.update("nobody", accounts=ALICE) is None


def test_an_update_of_providers_alone_keeps_the_binding(keys: KeyStore) -> None:
    keys.create("alice", policy=KeyPolicy(accounts=ALICE))
    updated = keys.update("alice", providers=frozenset({"anthropic", "openai"}))
    assert updated is not None and updated.policy.accounts == ALICE


def test_a_binding_the_allow_list_excludes_is_refused(db: Database, keys: KeyStore) -> None:
    with pytest.raises(ValueError, match="anthropic:alice"):
        keys.create("x", policy=KeyPolicy(frozenset({"openai"}), accounts=ALICE[:1]))
    assert keys.list() == []
    keys.create("alice", policy=KeyPolicy(accounts=ALICE))
    with pytest.raises(ValueError, match="exclude"):
        keys.update("alice", providers=frozenset({"anthropic"}))  # openai:default left out
    [unchanged] = keys.list()  # the transaction rolled back
    assert unchanged.policy.providers is None and unchanged.policy.accounts == ALICE


def test_a_pair_that_is_not_provider_account_is_refused(keys: KeyStore) -> None:
    keys.create("alice")
    with pytest.raises(ValueError, match="PROVIDER:ACCOUNT"):
        keys.update("alice", accounts=(("anthropic", "Not An Account"),))
    assert keys.list()[0].policy.accounts == ()


@pytest.mark.parametrize("stored", ["anthropic", "anthropic:", ":alice", "anthropic:ALICE"])
def test_a_damaged_stored_binding_is_a_store_error(db: Database, keys: KeyStore,
                                                    stored: str) -> None:
    record, token = keys.create("alice")
    db.write(lambda c: c.execute("UPDATE api_keys SET accounts = ? WHERE id = ?",
                                 (stored, record.id)))
    for read in (keys.list, lambda: keys.authenticate(token),
                 lambda: keys.update("alice", limits={"per_day": 1})):
        with pytest.raises(StoreError, match="stored accounts are not valid"):
            read()


def test_a_stored_binding_that_is_not_text_is_a_store_error(db: Database,
                                                            keys: KeyStore) -> None:
    record, _ = keys.create("alice")
    db.write(lambda c: c.execute("UPDATE api_keys SET accounts = 7 WHERE id = ?",
                                 (record.id,)))
    with pytest.raises(StoreError, match="stored accounts"):
        keys.list()


def test_an_empty_stored_binding_is_no_binding(db: Database, keys: KeyStore) -> None:
    record, _ = keys.create("alice")
    db.write(lambda c: c.execute("UPDATE api_keys SET accounts = '' WHERE id = ?",
                                 (record.id,)))
    assert keys.list()[0].policy.accounts == ()


def test_a_database_from_before_accounts_migrates_with_no_binding(tmp_path: Path) -> None:
    path = tmp_path / "olp.db"
    before = 11  # the schema before migration 12 added the column
    with sqlite3.connect(path) as c:
        for script in MIGRATIONS[:before]:
            for statement in _statements(script):
                c.execute(statement)
        c.execute(f"PRAGMA user_version = {before}")
        columns = [r[1] for r in c.execute("PRAGMA table_info(api_keys)")]
        assert "accounts" not in columns
        c.execute("INSERT INTO api_keys (name, tier, hash, prefix, source, created_at, "
                  "providers, limits) VALUES ('old', 'guest', 'h', 'p', 'cli', 1.0, "
                  "'anthropic', '{\"per_day\": 3}')")
    c.close()
    with Database(path) as db:
        assert db.schema_version == len(MIGRATIONS)
        [old] = KeyStore(db).list()
    assert old.name == "old" and old.policy.accounts == ()
    assert old.policy.providers == frozenset({"anthropic"}) and old.policy.limits.per_day == 3
