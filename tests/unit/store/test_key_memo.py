"""AsyncKeyStore remembers successful lookups briefly; revocations still take effect."""

from __future__ import annotations

from pathlib import Path

from olp.store import AsyncKeyStore, Database, KeyStore, Principal


class CountingKeys(KeyStore):
    lookups = 0

    def authenticate(self, token: str) -> Principal | None:
        self.lookups += 1
        return super().authenticate(token)


async def test_lookups_are_remembered_briefly_and_revokes_take_effect(tmp_path: Path) -> None:
    now = [100.0]
    with Database(tmp_path / "olp.db") as db:
        keys = CountingKeys(db)
        store = AsyncKeyStore(keys, memo_s=2.0, clock=lambda: now[0])
        _, alice = keys.create("alice")
        _, bob = keys.create("bob")
        assert (await store.authenticate(alice)) is not None
        assert (await store.authenticate(alice)) is not None
        assert keys.lookups == 1  # the second came from memory
        assert await store.authenticate("olp_nope") is None
        assert await store.authenticate("olp_nope") is None
        assert keys.lookups == 3  # failures are never remembered
        assert await store.revoke("alice")
        assert await store.authenticate(alice) is None  # revoked here: forgotten at once
        assert (await store.authenticate(bob)) is not None
        keys.revoke("bob")  # as another process (`olp keys revoke`) would
        assert (await store.authenticate(bob)) is not None  # still remembered ...
        now[0] += 2.5
        assert await store.authenticate(bob) is None  # ... for at most memo_s
