"""Every view names the account (issue #30): a request's trace carries the account that
answered (or was tried first) into its audit row and ledger rows, failed hops on their own
account; the metrics label every provider with its account (gauges split the actor's slot
name); the owner's usage view lists the account of each row and the quota view splits each
slot into provider and account."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import trio

from olp.accounting import AuditRow, Recorder, UsageDelta
from olp.engine import ChainFailed, Engine, HopRecord, Route, Router
from olp.http import Services, create_app
from olp.http._metrics import ActorGauge, Metrics
from olp.http._trace import Trace
from olp.ir import QuotaReport, Usage
from olp.store import Database

OWNER = "olp_owner_token_for_the_account_views"
LOOPBACK = {"client": ("127.0.0.1", 50001)}
_T = TypeVar("_T")


def record(hop: int, account: str, *, trigger: Any = "hard",
           provider: str = "anthropic") -> HopRecord:
    return HopRecord(hop=hop, provider=provider, model="m", code="RATE_LIMITED",
                     category="rate_limited", error_message="busy", trigger_type=trigger,
                     seconds=0.5 if trigger == "hard" else None, account=account)


def served_trace(records: list[HopRecord]) -> Trace:
    trace = Trace("POST /v1/chat/completions", key="3", key_name="kid", model_request=True)
    trace.served(provider="anthropic", account="bob", model="m", entry="sub",
                 index=len(records), cache="miss", records=records,
                 usage=Usage(prompt_tokens=7, completion_tokens=2), seconds=1.5)
    return trace


async def test_a_served_request_names_its_account_and_failed_hops_theirs() -> None:
    trace = served_trace([record(0, "work")])
    row = trace.audit_row(200, "ok")
    assert (row.provider, row.account) == ("anthropic", "bob")
    deltas = trace.usage_deltas("ok")
    assert [(d.provider, d.account, d.failed_hops, d.requests) for d in deltas] == [
        ("anthropic", "work", 1, 0), ("anthropic", "bob", 0, 1)]


async def test_a_failed_request_is_on_the_first_tried_hops_account() -> None:
    trace = Trace("POST /v1/chat/completions", key="3", key_name="kid", model_request=True)
    records = [record(0, "alice", trigger="soft"), record(1, "work"),
               record(2, "default", provider="codex")]
    trace.failed(ChainFailed(Route("smart", ()), records, None))
    assert (trace.provider, trace.account) == ("anthropic", "work")  # the skip is not tried
    assert trace.audit_row(429, "failed").account == "work"
    deltas = trace.usage_deltas("failed")
    assert [(d.provider, d.account) for d in deltas] == [
        ("anthropic", "work"), ("codex", "default"), ("anthropic", "work")]


async def test_a_request_no_hop_took_is_on_provider_and_account_dash() -> None:
    trace = Trace("POST /v1/chat/completions", key="3", key_name="kid", model_request=True)
    trace.refused = True
    [delta] = trace.usage_deltas("refused")
    assert (delta.provider, delta.account, delta.model) == ("-", "-", "-")
    assert trace.audit_row(429, "refused").account is None


async def test_metrics_lines_carry_the_account() -> None:
    metrics = Metrics(
        actors=lambda: {"anthropic": ActorGauge(0, 2, 0),
                        "anthropic@bob": ActorGauge(1, 3, 4)},
        health=lambda: {"cooldowns": [{"provider": "anthropic@bob", "remaining_s": 30.0}],
                        "circuits": []})
    trace = served_trace([record(0, "work"), record(1, "alice", trigger="soft")])
    trace.dialect = "openai"
    metrics.observe(trace, 200, "ok")
    refused = Trace("POST /v1/chat/completions", model_request=True, dialect="openai")
    metrics.observe(refused, 429, "refused")
    lines = metrics.render().decode().splitlines()
    for line in (
            'olp_requests_total{account="bob",dialect="openai",model="m",provider="anthropic",'
            'status="200"} 1.0',
            'olp_requests_total{account="-",dialect="openai",model="-",provider="-",'
            'status="429"} 1.0',
            'olp_failed_hops_total{account="work",category="rate_limited",'
            'provider="anthropic"} 1.0',
            'olp_skipped_hops_total{account="alice",code="RATE_LIMITED",'
            'provider="anthropic"} 1.0',
            'olp_fallbacks_total{account="bob",provider="anthropic"} 1.0',
            'olp_tokens_total{account="bob",kind="prompt",provider="anthropic"} 7.0',
            'olp_in_flight{account="bob",provider="anthropic"} 1.0',
            'olp_in_flight{account="default",provider="anthropic"} 0.0',
            'olp_max_concurrent{account="bob",provider="anthropic"} 3.0',
            'olp_spawn_refusals_total{account="bob",provider="anthropic"} 4.0',
            'olp_cooldown_active{account="bob",provider="anthropic"} 1.0',
            'olp_cooldown_active{account="default",provider="anthropic"} 0.0',
            'olp_circuit_open{account="bob",provider="anthropic"} 0.0'):
        assert line in lines


class _InlineDatabase(Database):
    async def write_async(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        await trio.lowlevel.checkpoint()
        return self.write(fn)


@dataclass(frozen=True)
class _Principal:
    name: str
    tier: str
    key_id: int = 1
    active: bool = True


class _Keys:
    async def authenticate(self, token: str) -> _Principal | None:
        await trio.lowlevel.checkpoint()
        return _Principal("owner", "owner") if token == OWNER else None


async def _get(services: Services, path: str) -> dict[str, Any]:
    client = create_app(services).test_client()
    with trio.fail_after(10):
        resp = await client.get(path, headers={"Authorization": f"Bearer {OWNER}"},
                                scope_base=LOOPBACK)
    assert resp.status_code == 200, await resp.get_data()
    body: dict[str, Any] = await resp.get_json()
    return body


def _services(db: Database, engine: Engine) -> Services:
    return Services(engine=engine, keys=_Keys(), models=lambda: [], db=db,
                    provider_info={"anthropic": {"binary": "claude"}})


async def test_the_usage_view_lists_each_rows_account(tmp_path: Path) -> None:
    now = time.time()
    with _InlineDatabase(tmp_path / "olp.db") as db:
        recorder = Recorder(db)
        for n, account in enumerate(("default", "bob", "bob")):
            recorder.record(
                AuditRow(at=now, request_id=f"req_{n}", key="1", key_name="owner",
                         endpoint="POST /v1/chat/completions", requested_model="smart",
                         provider="anthropic", model="m", entry="sub", hops=1, status=200,
                         cache="miss", stream=False, latency_ms=1, prompt_tokens=10,
                         completion_tokens=1, outcome="ok", account=account),
                [UsageDelta("anthropic", "m", account=account, requests=1,
                            prompt_tokens=10)])
        await recorder.flush()
        services = _services(db, Engine(Router(lambda m: None, providers=[]), {}))
        usage = await _get(services, "/v0/management/usage")
        audit = await _get(services, "/v0/management/audit")
    assert [(r["provider"], r["account"], r["requests"]) for r in usage["data"]] == [
        ("anthropic", "bob", 2), ("anthropic", "default", 1)]
    assert usage["totals"]["requests"] == 3
    assert [r["account"] for r in audit["data"]] == ["default", "bob", "bob"]


async def test_the_quota_view_splits_each_slot(tmp_path: Path) -> None:
    now = time.time()
    engine = Engine(Router(lambda m: None, providers=[]), {})
    engine.health.restore({"cooldowns": [
        {"provider": "anthropic@bob", "model": None, "category": "usage_window",
         "reason": "usage limit", "until": now + 600},
        {"provider": "gone@bob", "model": None, "category": "usage_window",
         "reason": "a provider no longer configured", "until": now + 600}]})
    engine.ledger.report("anthropic@bob", QuotaReport(window="five_hour", status="rejected",
                                                      utilization=1.0, resets_at=now + 900))
    with _InlineDatabase(tmp_path / "olp.db") as db:
        view = await _get(_services(db, engine), "/v0/management/quota")
    providers = view["providers"]
    assert list(providers) == ["anthropic", "anthropic@bob"]  # not gone@bob
    assert [(p["provider"], p["account"]) for p in providers.values()] == [
        ("anthropic", "default"), ("anthropic", "bob")]
    assert providers["anthropic@bob"]["reported"]["five_hour"]["status"] == "rejected"
    assert providers["anthropic"]["reported"] == {}
