"""AsyncKeyStore looks keys up in memory (issue #42): a wrong key is a dictionary miss, so a
flood of them costs one read of the key table per ``miss_s``, never one per key; a key made by
another process works at once, one revoked there stops within ``memo_s``, one revoked here at
once."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from olp.store import AsyncKeyStore, Database, KeyStore, Principal


class CountingKeys(KeyStore):
    """The SQLite key store, counting its reads of the key table."""

    reads = 0

    def active_keys(self) -> dict[str, Principal]:
        self.reads += 1
        return super().active_keys()


async def test_keys_are_checked_in_memory_and_changes_arrive(tmp_path: Path) -> None:
    now = [100.0]
    with Database(tmp_path / "olp.db") as db:
        keys = CountingKeys(db)
        store = AsyncKeyStore(keys, memo_s=2.0, miss_s=0.25, clock=lambda: now[0])
        _, alice = keys.create("alice")
        _, bob = keys.create("bob")
        assert (await store.authenticate(alice)) is not None
        assert (await store.authenticate(bob)) is not None
        assert keys.reads == 1  # one read of the table for both
        _, carol = keys.create("carol")  # as `olp keys create` would, in another process
        now[0] += 0.3
        assert (await store.authenticate(carol)) is not None  # a miss reads again: at once
        assert keys.reads == 2
        assert await store.revoke("alice")
        assert await store.authenticate(alice) is None  # revoked here: forgotten at once
        keys.revoke("bob")  # as another process (`olp keys revoke`) would
        assert (await store.authenticate(bob)) is not None  # still in memory ...
        now[0] += 2.5
        assert await store.authenticate(bob) is None  # ... for at most memo_s
        assert await store.authenticate("") is None
        assert await store.authenticate("x" * 5000) is None


async def test_a_flood_of_wrong_keys_costs_no_query_each(
        autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db:
        keys = CountingKeys(db)
        store = AsyncKeyStore(keys, memo_s=2.0, miss_s=0.25, clock=trio.current_time)
        _, good = keys.create("good")
        assert (await store.authenticate(good)) is not None
        for n in range(1000):  # 1,000 wrong keys in 10 s of virtual time
            assert await store.authenticate(f"olp_wrong_{n}") is None
            await trio.sleep(0.01)
        # a read each 0.25 s at most (40 in 10 s), and at least every 2 s: never one per key
        assert 5 <= keys.reads <= 1 + 10 / 0.25 + 1
        assert (await store.authenticate(good)) is not None


async def test_concurrent_checks_share_one_read(autojump_clock: trio.testing.MockClock,
                                                tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db:
        keys = CountingKeys(db)
        store = AsyncKeyStore(keys, clock=trio.current_time)
        _, good = keys.create("good")
        found: list[Principal | None] = []

        async def check(token: str) -> None:
            found.append(await store.authenticate(token))

        async with trio.open_nursery() as nursery:
            for n in range(20):
                nursery.start_soon(check, good if n % 2 else f"olp_wrong_{n}")
        assert keys.reads == 1
        assert sum(p is not None for p in found) == 10
