"""Clearing a key's cache also forgets the CLI sessions and the Responses answers kept for
its conversations (issue #25); the owner's dashboard button does the same."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing
from test_hardening_auth import OWNER, _Keys

from olp.engine import Engine, Router
from olp.http import Services, create_app
from olp.store import Database, ResponseStore, SessionStore, StoredSession


def kept(db: Database, key: str) -> None:
    SessionStore(db).put(StoredSession(f"digest-{key}", key, "anthropic", "sid",
                                       {"s.jsonl": b"x\n"}, 1.0, 1.0))


async def test_delete_cache_of_a_key_forgets_its_sessions(tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db:
        for key in ("1", "2"):
            kept(db, key)
            ResponseStore(db).put(f"resp_{key}", key=key, history=b"h", now=1.0)
        app = create_app(Services(engine=Engine(Router(lambda m: None, providers=[]), {}),
                                  keys=_Keys(), models=lambda: [], db=db))
        with trio.fail_after(10):
            resp = await app.test_client().delete(
                "/cache", query_string={"key": "1"},
                headers={"Authorization": f"Bearer {OWNER}"})
        assert resp.status_code == 200
        assert await resp.get_json() == {"deleted": 0, "sessions_deleted": 1,
                                          "responses_deleted": 1}
        store = SessionStore(db)
        assert store.take("digest-1", key="1", provider="anthropic", newer_than=0) is None
        assert store.take("digest-2", key="2", provider="anthropic", newer_than=0) is not None
        assert ResponseStore(db).get("resp_1", key="1", now=2.0) is None
        assert ResponseStore(db).get("resp_2", key="2", now=2.0) == b"h"
