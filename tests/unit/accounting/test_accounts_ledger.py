"""Accounts in the trail and the ledger (issue #30): an audit row keeps the account that
answered, the ledger keeps one row per key x provider x account x model x day (two accounts
of one provider stay two rows, and sum to the provider's), a request no hop took is on
account ``-``, and the quota figures and view name provider and account apart."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
import trio

from olp.accounting import (
    AuditRow,
    Recorder,
    UsageDelta,
    audit_page,
    bounded,
    load_counts,
    quota_figures,
    quota_view,
    usage_report,
    usage_totals,
)
from olp.store import Database

NOW = time.time()


def row(n: int, *, account: str | None = "bob", provider: str | None = "anthropic"
        ) -> AuditRow:
    return AuditRow(at=NOW, request_id=f"req_{n}", key="3", key_name="kid",
                    endpoint="POST /v1/chat/completions", requested_model="smart",
                    provider=provider, model="m", entry="sub", hops=1, status=200,
                    cache="miss", stream=False, latency_ms=12, prompt_tokens=5,
                    completion_tokens=7, outcome="ok", account=account)


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(tmp_path / "olp.db")
    yield database  # type: ignore[misc]
    database.close()


def test_an_audit_row_keeps_its_account(db: Database) -> None:
    recorder = Recorder(db)
    recorder.record(row(1, account="bob"))
    recorder.record(row(2, account=None, provider=None))  # no hop took it
    trio.run(recorder.flush)
    rows, _ = audit_page(db)
    assert [(r["request_id"], r["provider"], r["account"]) for r in rows] == [
        ("req_1", "anthropic", "bob"), ("req_2", None, None)]


def test_the_account_column_is_bounded_like_the_others() -> None:
    long = dataclasses.replace(row(1), account="a" * 5000)
    assert bounded(long).account is not None
    assert len(bounded(long).account or "") <= 200
    assert bounded(row(1)).account == "bob"


def test_two_accounts_of_one_provider_stay_two_rows_and_sum(db: Database) -> None:
    recorder = Recorder(db)
    for n, account, tokens in ((1, "default", 10), (2, "bob", 20), (3, "bob", 30),
                               (4, "default", 40)):
        recorder.record(row(n, account=account), [UsageDelta(
            "anthropic", "m", account=account, requests=1, served=1, prompt_tokens=tokens)])
    recorder.record(row(5, account="bob"), [UsageDelta("anthropic", "m", account="bob",
                                                       failed_hops=1, spawn_seconds=0.5)])
    trio.run(recorder.flush)
    recorder.record(row(6, account="bob"), [UsageDelta("anthropic", "m", account="bob",
                                                       requests=1, prompt_tokens=1)])
    trio.run(recorder.flush)  # a later batch adds to the same row
    rows = usage_report(db, NOW, days=1)
    by_account = {r["account"]: r for r in rows}
    assert [(r["provider"], r["account"], r["model"]) for r in rows] == [
        ("anthropic", "bob", "m"), ("anthropic", "default", "m")]
    assert (by_account["bob"]["requests"], by_account["bob"]["prompt_tokens"],
            by_account["bob"]["failed_hops"]) == (3, 51, 1)
    assert (by_account["default"]["requests"], by_account["default"]["prompt_tokens"]) == \
        (2, 50)
    totals = usage_totals(rows)
    assert (totals["requests"], totals["prompt_tokens"], totals["failed_hops"]) == (5, 101, 1)
    assert load_counts(db, NOW)["3"].day == 5  # a key's limits count every account's


def test_a_request_no_hop_took_is_on_account_dash() -> None:
    assert UsageDelta("-", "-", requests=1).account == "-"
    assert UsageDelta("-", "-", account="default", requests=1).account == "-"
    assert UsageDelta("anthropic", "m").account == "default"


def test_quota_figures_are_kept_per_account(db: Database) -> None:
    recorder = Recorder(db)
    recorder.record(row(1, account="default"), [UsageDelta("anthropic", "m", requests=1,
                                                           prompt_tokens=5)])
    recorder.record(row(2, account="bob"), [UsageDelta("anthropic", "m", account="bob",
                                                       requests=1, prompt_tokens=5)])
    recorder.record(row(3, account="bob"), [UsageDelta("anthropic", "m", account="bob",
                                                       requests=1, prompt_tokens=5)])
    recorder.record(row(4, account=None), [])  # an audit row from before accounts
    trio.run(recorder.flush)
    figures = quota_figures(db, NOW)
    assert set(figures) == {"anthropic", "anthropic@bob"}
    assert figures["anthropic"]["five_hour"]["requests"] == 2  # the old row is default's
    assert figures["anthropic@bob"]["five_hour"]["requests"] == 2
    assert figures["anthropic"]["day"]["requests"] == 1
    assert figures["anthropic@bob"]["day"]["requests"] == 2


def test_the_quota_view_splits_each_slot_into_provider_and_account() -> None:
    health = {"cooldowns": [{"provider": "anthropic@bob", "model": None, "reason": "limit",
                             "until": NOW + 600}], "circuits": []}
    view = quota_view(["anthropic", "anthropic@bob", "codex@work"], health=health,
                      reported={"anthropic@bob": {"five_hour": {"status": "rejected",
                                                                "resets_at": NOW + 900}}},
                      soft={}, unavailable={"codex": "codex not found on PATH"},
                      figures={"anthropic@bob": {"five_hour": {"requests": 4, "tokens": 9},
                                                 "day": {"requests": 6, "failed_hops": 0,
                                                         "tokens": 9}}},
                      now=NOW)
    providers = view["providers"]
    assert {n: (p["provider"], p["account"], p["state"]) for n, p in providers.items()} == {
        "anthropic": ("anthropic", "default", "ok"),
        "anthropic@bob": ("anthropic", "bob", "cooling"),
        "codex@work": ("codex", "work", "unavailable")}  # its provider cannot run
    assert providers["anthropic@bob"]["ledger"]["day"]["requests"] == 6
    assert providers["anthropic"]["ledger"]["day"]["requests"] == 0
    assert providers["anthropic@bob"]["reported"]["five_hour"]["status"] == "rejected"
    assert view["soonest_reset"] == NOW + 600
