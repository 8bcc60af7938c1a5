"""The recorder: rows are queued with no I/O, committed in one batch every 250 ms of
(virtual) time and at the end, ledger additions are summed into one row per key x provider x
model x day, a failed write keeps its rows for the next batch, and old rows are pruned."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
import trio

from olp.accounting import (
    AuditRow,
    Recorder,
    Retention,
    UsageDelta,
    audit_page,
    load_counts,
    usage_report,
)
from olp.store import Database

NOW = time.time()
_T = TypeVar("_T")


class InlineDatabase(Database):
    """A real SQLite database whose writes run on the Trio thread, so MockClock times are
    exact (the thread hop is the Database's own business, tested with it)."""

    async def write_async(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        await trio.lowlevel.checkpoint()
        return self.write(fn)


def row(n: int, *, key: str | None = "3", at: float = NOW, status: int = 200) -> AuditRow:
    return AuditRow(at=at, request_id=f"req_{n}", key=key, key_name=key and "kid",
                    endpoint="POST /v1/chat/completions", requested_model="smart",
                    provider="anthropic", model="m", entry="sub", hops=1, status=status,
                    cache="miss", stream=False, latency_ms=12, prompt_tokens=5,
                    completion_tokens=7, outcome="ok")


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(tmp_path / "olp.db")
    yield database  # type: ignore[misc]
    database.close()


def count(db: Database) -> int:
    return int(db.read(lambda c: c.execute("SELECT COUNT(*) FROM audit").fetchone()[0]))


async def test_rows_are_committed_in_batches_every_quarter_second(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    db = InlineDatabase(tmp_path / "olp.db")
    recorder = Recorder(db)
    async with trio.open_nursery() as nursery:
        await nursery.start(recorder.run)
        recorder.record(row(1), [UsageDelta("anthropic", "m", requests=1, served=1,
                                            prompt_tokens=5, completion_tokens=7)])
        recorder.record(row(2), [UsageDelta("anthropic", "m", requests=1, served=1,
                                            prompt_tokens=1, completion_tokens=2),
                                 UsageDelta("codex", "g", failed_hops=1, spawn_seconds=0.5)])
        assert count(db) == 0 and recorder.pending == 2  # queued: nothing written yet
        await trio.sleep(0.249)
        assert count(db) == 0  # the first batch is due at 0.25 s
        await trio.sleep(0.002)
        assert (count(db), recorder.batches) == (2, 1)  # both rows in one transaction
        recorder.record(row(3))
        await trio.sleep(0.25)
        assert (count(db), recorder.batches) == (3, 2)
        nursery.cancel_scope.cancel()
    rows = usage_report(db, NOW, days=1)
    by_provider = {r["provider"]: r for r in rows}
    assert by_provider["anthropic"]["requests"] == 2
    assert by_provider["anthropic"]["prompt_tokens"] == 6
    assert by_provider["codex"]["failed_hops"] == 1
    assert by_provider["codex"]["spawn_seconds"] == pytest.approx(0.5)
    assert load_counts(db, NOW)["3"].day == 2 and load_counts(db, NOW)["3"].tokens_today == 15
    db.close()


async def test_flush_writes_what_is_left_and_the_ledger_adds_up_across_batches(
        db: Database) -> None:
    recorder = Recorder(db)
    for n in range(3):
        recorder.record(row(n), [UsageDelta("anthropic", "m", requests=1, refused=1)])
        await recorder.flush()
    recorder.record(row(9, key=None, status=401))  # no key: audited, not in the ledger
    await recorder.flush()
    [only] = usage_report(db, NOW, days=1)
    assert (only["requests"], only["refused"]) == (3, 3)
    assert load_counts(db, NOW)["3"].day == 0  # refused requests do not count
    rows, cursor = audit_page(db)
    assert [r["request_id"] for r in rows] == ["req_0", "req_1", "req_2", "req_9"]
    assert rows[-1]["key"] is None and cursor == rows[-1]["id"]
    assert audit_page(db, key_name="kid", limit=2)[0][-1]["request_id"] == "req_2"


async def test_cached_input_tokens_add_up_beside_the_prompt_tokens_they_are_part_of(
        db: Database) -> None:
    recorder = Recorder(db)
    recorder.record(row(1), [UsageDelta("anthropic", "m", requests=1, prompt_tokens=1200,
                                        cached_tokens=1024, completion_tokens=5)])
    recorder.record(row(2), [UsageDelta("anthropic", "m", requests=1, prompt_tokens=30,
                                        completion_tokens=2)])
    await recorder.flush()
    recorder.record(row(3), [UsageDelta("anthropic", "m", requests=1, prompt_tokens=1100,
                                        cached_tokens=1000, completion_tokens=3)])
    await recorder.flush()
    [only] = usage_report(db, NOW, days=1)
    assert (only["prompt_tokens"], only["cached_tokens"], only["completion_tokens"]) == (
        2330, 2024, 10)
    assert load_counts(db, NOW)["3"].tokens_today == 2340  # limits count every token


async def test_a_failed_write_keeps_its_rows_for_the_next_batch(db: Database) -> None:
    recorder = Recorder(db)
    recorder.record(row(1), [UsageDelta("anthropic", "m", requests=1)])
    db.write(lambda c: c.execute("ALTER TABLE audit RENAME TO audit_away"))
    await recorder.flush()  # fails: logged, kept
    assert recorder.pending == 1
    recorder.record(row(2), [UsageDelta("anthropic", "m", requests=1)])
    db.write(lambda c: c.execute("ALTER TABLE audit_away RENAME TO audit"))
    await recorder.flush()
    assert [r["request_id"] for r in audit_page(db)[0]] == ["req_1", "req_2"]
    assert usage_report(db, NOW, days=1)[0]["requests"] == 2


def test_old_and_surplus_rows_are_pruned(db: Database) -> None:
    recorder = Recorder(db, retention=Retention(max_age_days=1, max_rows=3, usage_days=2),
                        clock=lambda: NOW)
    recorder.record(row(0, at=NOW - 3 * 86400), [UsageDelta("a", "m", requests=1)])
    for n in range(1, 6):
        recorder.record(row(n), [UsageDelta("a", "m", requests=1)])
    trio.run(recorder.flush)
    db.write(recorder._prune)
    assert [r["request_id"] for r in audit_page(db)[0]] == ["req_3", "req_4", "req_5"]
    with sqlite3.connect(db.path) as c:
        days = [d for (d,) in c.execute("SELECT day FROM usage")]
    assert len(days) == 1  # the row three days old is gone from the ledger too
