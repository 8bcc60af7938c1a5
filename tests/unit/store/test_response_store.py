"""Responses answers kept for ``previous_response_id`` (issue #25): only the key that asked
gets one back, a kept answer can be continued more than once, and the store is bounded by
count, bytes and idle age and survives a restart."""

from __future__ import annotations

from pathlib import Path

import trio

from olp.store import AsyncResponseStore, Database, ResponseStore
from olp.store._responses import ResponseBounds


def test_only_its_key_gets_a_kept_answer_back_as_often_as_asked(tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db:
        store = ResponseStore(db)
        assert store.put("resp_a", key="1", history=b"conversation", now=100.0)
        assert store.get("resp_a", key="2", now=101.0) is None
        assert store.get("resp_a", key="1", now=102.0) == b"conversation"
        assert store.get("resp_a", key="1", now=103.0) == b"conversation"  # a fork
        assert store.get("resp_b", key="1", now=103.0) is None
        assert store.count() == (1, len(b"conversation"))


def test_idle_past_the_ttl_is_forgotten_and_use_keeps_one(tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db:
        store = ResponseStore(db, ResponseBounds(ttl_s=50.0))
        store.put("resp_old", key="1", history=b"o", now=100.0)
        store.put("resp_used", key="1", history=b"u", now=100.0)
        assert store.get("resp_used", key="1", now=140.0) == b"u"  # used: idle from 140
        assert store.get("resp_old", key="1", now=150.0) is None
        store.put("resp_new", key="1", history=b"n", now=185.0)  # drops what idled past 135
        assert store.get("resp_used", key="1", now=186.0) == b"u"
        assert store.count() == (2, 2)


def test_bounds_drop_the_least_recently_used(tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db:
        store = ResponseStore(db, ResponseBounds(responses=2, total_bytes=25,
                                                 response_bytes=20))
        assert not store.put("resp_big", key="1", history=b"x" * 21, now=1.0)
        store.put("resp_1", key="1", history=b"x" * 10, now=1.0)
        store.put("resp_2", key="1", history=b"x" * 10, now=2.0)
        store.get("resp_1", key="1", now=3.0)
        store.put("resp_3", key="1", history=b"x" * 10, now=4.0)  # count: resp_2 goes
        assert store.get("resp_2", key="1", now=5.0) is None
        store.put("resp_4", key="1", history=b"x" * 20, now=6.0)  # bytes: the rest go
        assert store.count() == (1, 20)


def test_kept_across_a_restart_and_cleared_per_key(tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db:
        ResponseStore(db).put("resp_1", key="1", history=b"a", now=1.0)
        ResponseStore(db).put("resp_2", key="2", history=b"b", now=1.0)
    with Database(tmp_path / "olp.db") as db:
        store = ResponseStore(db)
        assert store.get("resp_1", key="1", now=2.0) == b"a"
        assert store.clear("1") == 1
        assert store.get("resp_1", key="1", now=2.0) is None
        assert store.get("resp_2", key="2", now=2.0) == b"b"
        assert store.clear() == 1


async def test_the_async_store_runs_in_threads(tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db:
        store = AsyncResponseStore(ResponseStore(db))
        with trio.fail_after(10):
            assert await store.put("resp_1", key="1", history=b"a", now=1.0)
            assert await store.get("resp_1", key="1", now=2.0) == b"a"
            assert await store.clear("1") == 1
