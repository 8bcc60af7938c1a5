"""The CLI sessions kept between turns (issue #25): taken out while a turn runs, only a
clean turn puts one back, scoped to one key and provider, bounded, and kept across a
restart."""

from __future__ import annotations

from pathlib import Path

from olp.store import AsyncSessionStore, Database, SessionStore, StoredSession
from olp.store._sessions import Bounds


def session(digest: str, *, key: str = "1", provider: str = "anthropic", used: float = 100.0,
            size: int = 10) -> StoredSession:
    return StoredSession(digest, key, provider, f"sid-{digest}",
                         {".claude/projects/-olp-job-work/s.jsonl": b"x" * size},
                         created_at=used, used_at=used)


def test_a_session_is_taken_once_and_only_by_its_key_and_provider(tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db:
        store = SessionStore(db)
        assert store.put(session("d1"))
        assert store.take("d1", key="2", provider="anthropic", newer_than=0) is None
        assert store.take("d1", key="1", provider="codex", newer_than=0) is None
        got = store.take("d1", key="1", provider="anthropic", newer_than=0)
        assert got is not None and got.session_id == "sid-d1"
        assert got.files == {".claude/projects/-olp-job-work/s.jsonl": b"x" * 10}
        assert store.take("d1", key="1", provider="anthropic", newer_than=0) is None  # in use
        assert store.count() == (0, 0)


def test_an_idle_session_is_dropped_when_asked_for(tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db:
        store = SessionStore(db)
        store.put(session("old", used=50.0))
        assert store.take("old", key="1", provider="anthropic", newer_than=60.0) is None
        assert store.count() == (0, 0)  # gone, not left for later
        store.put(session("a", used=10.0))
        store.put(session("b", used=70.0))
        assert store.prune(older_than=60.0) == 1
        assert store.count() == (1, 10)


def test_bounds_drop_the_least_recently_used(tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db:
        store = SessionStore(db, Bounds(sessions=3, total_bytes=100, session_bytes=60))
        for i in range(5):
            store.put(session(f"d{i}", used=float(i)))
        assert store.count() == (3, 30)
        assert store.take("d1", key="1", provider="anthropic", newer_than=-1) is None
        assert store.take("d4", key="1", provider="anthropic", newer_than=-1) is not None
        assert not store.put(session("huge", size=61))  # larger than one may be
        store.put(session("big", used=9.0, size=60))
        assert store.count() == (3, 80)
        store.put(session("new", used=10.0, size=30))  # 110 bytes: the oldest (d2) goes
        assert store.count() == (3, 100)
        assert store.take("d2", key="1", provider="anthropic", newer_than=-1) is None


def test_sessions_and_clearing_survive_a_restart(tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db:
        store = SessionStore(db)
        store.put(session("a", key="1"))
        store.put(session("b", key="2"))
    with Database(tmp_path / "olp.db") as db:
        store = SessionStore(db)
        assert store.count() == (2, 20)
        assert store.clear("1") == 1
        assert store.take("b", key="2", provider="anthropic", newer_than=0) is not None


async def test_the_async_store_runs_in_threads(tmp_path: Path) -> None:
    db = await Database.open_async(tmp_path / "olp.db")
    try:
        store = AsyncSessionStore(SessionStore(db))
        assert await store.put(session("a"))
        assert await store.put(session("b"))
        assert await store.take("a", key="1", provider="anthropic", newer_than=0) is not None
        assert await store.prune(older_than=0) == 0
        assert await store.clear() == 1
    finally:
        db.close()


def test_keeping_a_session_drops_its_providers_idle_ones(tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db:
        store = SessionStore(db)
        store.put(session("idle", used=10.0))
        store.put(session("other-cli", provider="codex", used=10.0))
        store.put(session("fresh", used=100.0), expire_before=50.0)
        assert store.count() == (2, 20)  # the codex one has its own TTL
        assert store.take("idle", key="1", provider="anthropic", newer_than=0) is None
