"""What the audit trail keeps is bounded (issue #29): client-controlled text is cut to a fixed
length with a visible marker, and 401/404 rows beyond a small burst per source and window are
dropped but counted, the count written as one ``suppressed`` summary row per status. The
windows run on an injected clock (``MockClock`` or a list), so nothing here is timed."""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio
import trio.testing

from olp.accounting import (
    MAX_ENDPOINT_CHARS,
    MAX_MODEL_CHARS,
    AuditRow,
    AuditThrottle,
    Recorder,
    audit_page,
    bounded,
    clip,
)
from olp.store import Database

NOW = time.time()
_T = TypeVar("_T")


class InlineDatabase(Database):
    """Writes on the Trio thread, so MockClock times are exact."""

    async def write_async(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        await trio.lowlevel.checkpoint()
        return self.write(fn)


def row(n: int = 0, *, status: int = 401, key: str | None = None,
        endpoint: str = "GET /v1/models", model: str | None = None) -> AuditRow:
    return AuditRow(at=NOW + n, request_id=f"req_{n}", key=key, key_name=key and "kid",
                    endpoint=endpoint, requested_model=model, provider=None, model=None,
                    entry=None, hops=0, status=status, cache=None, stream=False,
                    latency_ms=1, prompt_tokens=None, completion_tokens=None,
                    outcome="invalid_api_key" if status == 401 else str(status))


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = InlineDatabase(tmp_path / "olp.db")
    yield database
    database.close()


def stored(db: Database) -> list[dict[str, Any]]:
    def read(c: sqlite3.Connection) -> list[dict[str, Any]]:
        c.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in c.execute("SELECT * FROM audit ORDER BY id")]
        finally:
            c.row_factory = None
    return db.read(read)


# --- the lengths ---------------------------------------------------------------------------

def test_clip_keeps_short_text_and_marks_what_it_cut() -> None:
    assert clip("sonnet", 200) == "sonnet"
    text = "x" * 1000
    cut = clip(text, 200)
    assert len(cut) <= 200
    kept, marker = cut.split("…")
    assert marker == f"[+{1000 - len(kept)} chars]" and text.startswith(kept)
    assert clip("a\x1b[2Jb\nc", 200) == "a\ufffd[2Jb\ufffdc"  # no terminal escapes


async def test_a_4_mb_model_name_is_stored_bounded_with_its_marker(db: Database) -> None:
    huge = "m" * (4 * 1024 * 1024)
    recorder = Recorder(db)
    recorder.record(row(status=404, key="3", model=huge,
                        endpoint="POST /v1/chat/completions"))
    await recorder.flush()
    [kept] = stored(db)
    model = kept["requested_model"]
    assert len(model) <= MAX_MODEL_CHARS
    head, marker = model.split("…")
    assert marker == f"[+{len(huge) - len(head)} chars]" and len(head) > 150


async def test_a_64_kb_path_is_stored_bounded(db: Database) -> None:
    path = "GET /" + "p" * 65_536
    recorder = Recorder(db)
    recorder.record(row(endpoint=path))
    await recorder.flush()
    [kept] = stored(db)
    assert len(kept["endpoint"]) <= MAX_ENDPOINT_CHARS
    assert kept["endpoint"].startswith("GET /ppp")
    assert kept["endpoint"].endswith(f"[+{len(path) - kept['endpoint'].index('…')} chars]")


def test_every_text_column_is_bounded() -> None:
    long = "z" * 10_000
    texts = {f.name: long for f in dataclasses.fields(AuditRow)
             if f.name not in ("at", "hops", "status", "stream", "latency_ms", "prompt_tokens",
                               "completion_tokens", "suppressed")}
    assert "action" in texts
    cut = bounded(dataclasses.replace(row(), **texts))
    for name in texts:
        assert len(getattr(cut, name)) <= MAX_ENDPOINT_CHARS, name


def test_rows_stored_before_the_bound_are_read_back_bounded(db: Database) -> None:
    """A trail written by an older OLP may hold a 4 MB row: the views cut it on the way out."""
    huge = "m" * 1_000_000
    db.write(lambda c: c.execute(
        "INSERT INTO audit (at, request_id, endpoint, requested_model, status, latency_ms, "
        "outcome) VALUES (?, 'req_old', ?, ?, 404, 1, 'model_not_found')",
        (NOW, "POST /" + huge, huge)))
    [old], _ = audit_page(db)
    assert len(old["requested_model"]) <= MAX_MODEL_CHARS
    assert len(old["endpoint"]) <= MAX_ENDPOINT_CHARS
    assert old["action"] is None and old["suppressed"] is None


# --- the 401/404 burst ---------------------------------------------------------------------

async def test_1000_401s_from_one_source_keep_the_burst_and_count_the_rest(
        db: Database, autojump_clock: trio.testing.MockClock) -> None:
    throttle = AuditThrottle(burst=10, window_s=60, monotonic=trio.current_time)
    recorder = Recorder(db, throttle=throttle)
    async with trio.open_nursery() as nursery:
        await nursery.start(recorder.run)
        for n in range(1000):
            recorder.record(row(n, endpoint=f"GET /probe/{n % 3}"), client="203.0.113.9")
            if n == 500:  # a valid request and another client's 401 meanwhile
                recorder.record(row(n, status=200, key="3", endpoint="POST /v1/chat/completions"),
                                client="203.0.113.9")
                recorder.record(row(n, endpoint="GET /v1/models"), client="198.51.100.4")
            await trio.sleep(0.01)  # 10 s for the 1,000
        await trio.sleep(30)
        assert [r["outcome"] for r in stored(db)].count("suppressed") == 0  # window still open
        await trio.sleep(21)  # the window (60 s from the first 401) has ended: its summary
        nursery.cancel_scope.cancel()
    rows = stored(db)
    flood = [r for r in rows
             if r["endpoint"].startswith("GET /probe") and r["outcome"] != "suppressed"]
    summaries = [r for r in rows if r["outcome"] == "suppressed"]
    assert len(flood) == 10
    assert [(s["status"], s["suppressed"], s["key"]) for s in summaries] == [(401, 990, None)]
    assert summaries[0]["endpoint"] == "GET /probe/1 (and other endpoints)"
    assert summaries[0]["at"] == NOW + 10  # the first row it stands for
    assert summaries[0]["request_id"].startswith("sup_")
    others = [r for r in rows if r["request_id"] == "req_500"]
    assert {(r["status"], r["endpoint"]) for r in others} >= {
        (200, "POST /v1/chat/completions"), (401, "GET /v1/models")}
    assert len(rows) == 10 + 1 + 2
    assert recorder.suppressed == 990


def step_clock() -> tuple[list[float], Callable[[], float]]:
    now = [0.0]
    return now, lambda: now[0]


def test_the_summary_comes_before_the_next_row_let_through() -> None:
    now, clock = step_clock()
    throttle = AuditThrottle(burst=2, window_s=60, monotonic=clock)
    kept = [r for n in range(5) for r in throttle.admit(row(n), "a")]
    assert [r.request_id for r in kept] == ["req_0", "req_1"]
    now[0] = 59.9
    assert throttle.admit(row(5), "a") == [] and throttle.expire() == []
    now[0] = 60.0
    first, nxt = throttle.admit(row(6), "a")
    assert (first.outcome, first.suppressed, first.endpoint) == ("suppressed", 4,
                                                                 "GET /v1/models")
    assert nxt.request_id == "req_6"
    assert throttle.expire() == [] and throttle.close() == []  # nothing left to tell


def test_other_statuses_are_never_dropped() -> None:
    """Of a request with a key, only 404s count; a keyless request's 5xx is kept too."""
    _, clock = step_clock()
    throttle = AuditThrottle(burst=1, window_s=60, monotonic=clock)
    for status in (200, 201, 204, 400, 403, 405, 413, 429, 500, 502, 503):
        for n in range(50):
            keyed = row(n, status=status, key="3")
            assert throttle.admit(keyed, "a") == [keyed]
    for status in (200, 500, 503):
        for n in range(50):
            assert throttle.admit(row(n, status=status), "a") == [row(n, status=status)]
    assert throttle.close() == [] and throttle.dropped == 0


def test_a_keyless_requests_other_refusals_share_the_burst() -> None:
    """The wrong-key back-off's 429 and a Host rule's 403 cost their sender as little as a
    401."""
    _, clock = step_clock()
    throttle = AuditThrottle(burst=2, window_s=60, monotonic=clock)
    kept = [r for n, status in enumerate([401, 429, 429, 403, 401, 429])
            for r in throttle.admit(row(n, status=status), "a")]
    assert [r.status for r in kept] == [401, 429]
    assert sorted((s.status, s.suppressed) for s in throttle.close()) == [
        (401, 1), (403, 1), (429, 2)]


def test_401s_and_404s_share_a_burst_and_are_summed_per_status() -> None:
    now, clock = step_clock()
    throttle = AuditThrottle(burst=3, window_s=60, monotonic=clock)
    kept = [r for n in range(10) for r in throttle.admit(row(n, status=(401, 404)[n % 2]), "a")]
    assert len(kept) == 3
    summaries = throttle.close()
    assert sorted((s.status, s.suppressed) for s in summaries) == [(401, 3), (404, 4)]


def test_a_keyed_source_is_its_key_and_a_keyless_one_its_address() -> None:
    _, clock = step_clock()
    throttle = AuditThrottle(burst=1, window_s=60, monotonic=clock)
    assert throttle.admit(row(0, status=404, key="3"), "10.0.0.1")
    assert throttle.admit(row(1, status=404, key="4"), "10.0.0.1")  # same address, other key
    assert throttle.admit(row(2), "10.0.0.1")  # keyless
    assert not throttle.admit(row(3, status=404, key="3"), "10.0.0.2")  # key 3's second
    [summary] = throttle.close()
    assert (summary.key, summary.key_name, summary.suppressed) == ("3", "kid", 1)


def test_tracked_sources_are_capped_and_new_ones_share_one_overflow_window() -> None:
    _, clock = step_clock()
    throttle = AuditThrottle(burst=2, window_s=60, max_sources=4, global_burst=1000,
                             monotonic=clock)
    kept = [r for n in range(100) for r in throttle.admit(row(n), f"10.0.0.{n}")]
    assert len(kept) == 4 + 2  # four sources tracked, then the overflow's burst
    assert throttle.tracked == 5
    [summary] = throttle.close()
    assert summary.suppressed == 100 - 6 and throttle.tracked == 0


def test_a_global_burst_bounds_the_rows_of_many_sources() -> None:
    _, clock = step_clock()
    throttle = AuditThrottle(burst=5, window_s=60, max_sources=1000, global_burst=20,
                             monotonic=clock)
    kept = [r for n in range(500) for r in throttle.admit(row(n), f"10.0.{n // 256}.{n % 256}")]
    assert len(kept) == 20
    assert sum(s.suppressed or 0 for s in throttle.close()) == 480


async def test_shutdown_writes_the_open_windows_summaries(db: Database) -> None:
    _, clock = step_clock()
    recorder = Recorder(db, throttle=AuditThrottle(burst=1, window_s=60, monotonic=clock))
    for n in range(7):
        recorder.record(row(n), client="a")
    recorder.end_windows()
    await recorder.flush()
    assert [(r["outcome"], r["suppressed"]) for r in stored(db)] == [
        ("invalid_api_key", None), ("suppressed", 6)]
