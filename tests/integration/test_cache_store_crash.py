"""The cache survives ``kill -9`` in the middle of writes (SQLite WAL, one transaction per put).

A child process writes large entries in a loop and reports each key once ``put`` returned
(committed). The test SIGKILLs it at an arbitrary moment, several times over the same
database; after each kill the store must open, hold every reported entry intact (and only
intact entries), pass SQLite's integrity check, and accept writes.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import msgspec
import trio

from olp.cache import CacheStore
from olp.ir import Event, Start, Stop, TextDelta
from olp.store import Database

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 6

CHILD = r"""
import sys
import trio
from olp.cache import CacheStore
from olp.ir import Start, Stop, TextDelta
from olp.store import Database


def answer(key: str, i: int) -> list:
    return [Start(model="m"),
            *[TextDelta(text=f"{key}:{j}:" + "x" * 2000) for j in range(20 + i % 80)], Stop()]


async def main(path: str, prefix: str) -> None:
    db = await Database.open_async(path)
    store = CacheStore(db, ttl_s=1e9, max_entry_bytes=10**8, max_total_bytes=10**10,
                       max_entries_per_namespace=10**6)
    i = 0
    while True:
        key = f"{prefix}-{i}"
        assert await store.put(f"ns{i % 3}", key, "p", answer(key, i))
        sys.stdout.write(f"{key} {i}\n")
        sys.stdout.flush()
        i += 1


trio.run(main, sys.argv[1], sys.argv[2])
"""


def answer(key: str, i: int) -> list[Event]:  # must match the child's
    return [Start(model="m"),
            *[TextDelta(text=f"{key}:{j}:" + "x" * 2000) for j in range(20 + i % 80)], Stop()]


def store_on(db: Database) -> CacheStore:
    return CacheStore(db, ttl_s=1e9, max_entry_bytes=10**8, max_total_bytes=10**10,
                      max_entries_per_namespace=10**6)


async def write_until_killed(db_path: Path, prefix: str, rnd: random.Random,
                             stderr_path: Path) -> list[tuple[str, int]]:
    """Run the child until it reported a few commits, SIGKILL it at an arbitrary moment, and
    return every (key, i) it reported."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with stderr_path.open("wb") as stderr:
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-c", CHILD, str(db_path), prefix], cwd=REPO, env=env,
            stdout=subprocess.PIPE, stderr=stderr)
        assert proc.stdout is not None
        output = b""
        try:
            target = rnd.randint(3, 12)
            while output.count(b"\n") < target:
                chunk = await proc.stdout.receive_some()
                assert chunk, f"the writer died early; its stderr is in {stderr_path}"
                output += chunk
            await trio.sleep(rnd.uniform(0, 0.05))  # land somewhere inside a later put
            proc.kill()
            while chunk := await proc.stdout.receive_some():
                output += chunk
        finally:
            proc.kill()
            await proc.wait()
            await proc.stdout.aclose()
    assert proc.returncode == -signal.SIGKILL
    lines = output.decode().split("\n")[:-1]  # a torn last line was never fully reported
    return [(key, int(i)) for key, i in (line.split() for line in lines)]


async def test_committed_entries_survive_repeated_kill_9(tmp_path: Path) -> None:
    db_path = tmp_path / "home" / "olp.db"
    rnd = random.Random(1234)
    reported: list[tuple[str, int]] = []
    with trio.fail_after(120):
        for round_ in range(ROUNDS):
            reported += await write_until_killed(db_path, f"r{round_}", rnd,
                                                 tmp_path / f"stderr-{round_}")
            db = await Database.open_async(db_path)
            try:
                assert db.read(lambda c: c.execute("PRAGMA integrity_check").fetchall()) == [
                    ("ok",)]
                store = store_on(db)
                for key, i in reported:
                    assert await store.get(f"ns{i % 3}", key) == answer(key, i), key
                # Whatever else is there (a put committed just before its report) is whole.
                rows = db.read(lambda c: c.execute(
                    "SELECT key, size, length(events), events FROM cache_entries").fetchall())
                assert {k for k, *_ in rows} >= {k for k, _ in reported}
                assert len(rows) <= len(reported) + round_ + 1
                for key, size, length, blob in rows:
                    assert size == length
                    events = msgspec.json.decode(blob, type=list[Event])
                    assert events == answer(key, int(key.split("-")[1])) and key.startswith("r")
                # ...and it still accepts writes.
                assert await store.put("after", f"after-{round_}", "p", answer("after", 1))
                assert await store.get("after", f"after-{round_}") == answer("after", 1)
                await db.write_async(lambda c: c.execute(
                    "DELETE FROM cache_entries WHERE namespace = 'after'"))
            finally:
                db.close()
    assert len(reported) >= 3 * ROUNDS


def test_the_database_is_in_wal_mode(tmp_path: Path) -> None:
    # Crash safety above rests on this (and on synchronous=NORMAL being durable across a
    # process crash in WAL mode; only power loss can drop the last commits).
    with Database(tmp_path / "olp.db"):
        pass
    conn = sqlite3.connect(tmp_path / "olp.db")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()
