"""Accounts inside a provider (issue #30) under MockClock with scripted actors: a key's
eligible accounts in order, a login's own failure moving to the key's next account before
the next entry, the binding, per-account cooldowns, circuits and soft triggers. Exact
virtual times, no leaks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing
from sample_requests import user_says
from test_engine_mockclock import OK, Scripted, fail

from olp.actors import CliConfig, CliRunner, ProviderActor, Timeouts
from olp.actors.testing import FakeSpawner, JsonLinesAdapter, Step
from olp.engine import ChainFailed, Engine, HealthBook, Hop, Ledger, Router, SoftLimits
from olp.engine._sources import RequestContext
from olp.failures import Code
from olp.http._errors import chain_error
from olp.store import slot_name

REQ = user_says("q", model="chain")
UNBOUND = RequestContext()

#: claude with three logins (alice and bob bound-only, default for everyone), then codex.
CLAUDE = Hop("claude", "sonnet", accounts=("default", "alice", "bob"), shared=("default",))
CODEX = Hop("codex", "gpt")


def build(scripts: dict[str, Sequence[Sequence[Step]]], hops: Sequence[Hop] = (CLAUDE, CODEX),
          *, ledger: Ledger | None = None) -> tuple[Engine, dict[str, FakeSpawner]]:
    """An engine whose actors are named by slot (``claude``, ``claude@alice``…)."""
    spawners = {slot: FakeSpawner(Scripted(s)) for slot, s in scripts.items()}
    actors = {slot: ProviderActor(slot, CliRunner(JsonLinesAdapter(), spawners[slot], CliConfig(
        binary=slot, timeouts=Timeouts(first_output_s=10, idle_s=5, total_s=60),
        proxy_env={})), max_concurrent=1) for slot in scripts}
    router = Router(lambda m: None, providers=["claude", "codex"], chains={"chain": hops})
    return Engine(router, actors, health=HealthBook(clock=trio.current_time),
                  ledger=ledger or Ledger(clock=trio.current_time)), spawners


def bound(*pairs: str) -> RequestContext:
    return RequestContext(accounts=tuple(tuple(p.split(":")) for p in pairs))  # type: ignore[misc]


async def start(engine: Engine, nursery: trio.Nursery) -> None:
    for actor in engine.actors.values():
        await nursery.start(actor.run)


async def served(engine: Engine, context: RequestContext = UNBOUND) -> str:
    answer = await engine.open(REQ, context)
    async for _ in answer:
        pass
    return answer.hop.slot


def clean(engine: Engine, spawners: dict[str, FakeSpawner]) -> bool:
    return all(s.alive == 0 for s in spawners.values()) and all(
        a.limiter.statistics().borrowed_tokens == 0 for a in engine.actors.values())


ALL = ("claude", "claude@alice", "claude@bob", "codex")


async def test_a_bound_key_uses_only_its_accounts_in_its_order(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({slot: [OK] for slot in ALL})
    await start(engine, nursery)
    assert await served(engine, bound("claude:bob", "claude:alice")) == "claude@bob"
    assert await served(engine, bound("claude:alice")) == "claude@alice"
    assert await served(engine) == "claude"  # unbound: the accounts serving every key
    assert [len(spawners[s].runs) for s in ALL] == [1, 1, 1, 0]
    assert trio.current_time() == 3
    await trio.testing.wait_all_tasks_blocked()
    assert clean(engine, spawners)


async def test_a_rate_limit_moves_to_the_keys_next_account_then_the_next_entry(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"claude": [OK], "claude@alice": [fail(1, "rate_limited")],
                              "claude@bob": [fail(2, "usage_window")], "codex": [OK]})
    await start(engine, nursery)
    answer = await engine.open(REQ, bound("claude:alice", "claude:bob"))
    assert answer.hop.slot == "codex" and trio.current_time() == 3.5
    assert [(r.provider, r.account, r.category) for r in answer.records] == [
        ("claude", "alice", "rate_limited"), ("claude", "bob", "usage_window")]
    answer.close()
    assert spawners["claude"].runs == []  # the default login is not this key's
    await trio.testing.wait_all_tasks_blocked()
    assert clean(engine, spawners)


async def test_a_failure_every_login_would_meet_goes_straight_to_the_next_entry(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"claude@alice": [fail(1, "unavailable", "CRASH")],
                              "claude@bob": [OK], "codex": [OK]})
    await start(engine, nursery)
    assert await served(engine, bound("claude:alice", "claude:bob")) == "codex"
    assert spawners["claude@bob"].runs == []
    assert trio.current_time() == 2


async def test_a_client_error_stops_before_the_other_accounts(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"claude@alice": [fail(1, "client_error", "BAD", status=400)],
                              "claude@bob": [OK], "codex": [OK]})
    await start(engine, nursery)
    with pytest.raises(ChainFailed):
        await engine.open(REQ, bound("claude:alice", "claude:bob"))
    assert spawners["claude@bob"].runs == [] and spawners["codex"].runs == []


async def test_an_expired_login_moves_to_the_next_account(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    # auth belongs to one login: the key's other login is tried, not the next entry's gate.
    engine, _ = build({"claude@alice": [fail(1, "auth", "UPSTREAM_AUTH")],
                       "claude@bob": [OK], "codex": [OK]})
    await start(engine, nursery)
    assert await served(engine, bound("claude:alice", "claude:bob")) == "claude@bob"


async def test_a_key_with_no_login_of_a_provider_skips_it_without_naming_any(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    only_bound = Hop("claude", "sonnet", accounts=("alice",), shared=())
    engine, spawners = build({"claude@alice": [OK], "codex": [OK]}, (only_bound, CODEX))
    await start(engine, nursery)
    answer = await engine.open(REQ, UNBOUND)
    assert answer.hop.slot == "codex"
    [record] = answer.records
    assert (record.code, record.trigger_type) == (Code.KEY_POLICY, "soft")
    assert "alice" not in record.error_message and record.account == "default"
    answer.close()
    assert spawners["claude@alice"].runs == []


async def test_a_binding_to_an_account_the_entry_cannot_use_is_not_tried(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"claude@alice": [OK], "codex": [OK]})
    await start(engine, nursery)
    assert await served(engine, bound("claude:carol", "codex:default")) == "codex"
    assert spawners["claude@alice"].runs == []


async def test_cooldowns_are_per_account(autojump_clock: trio.testing.MockClock,
                                         nursery: trio.Nursery) -> None:
    engine, spawners = build({
        "claude@alice": [fail(1, "usage_window", "USAGE", retry_after_s=100), OK],
        "claude@bob": [OK], "codex": [OK]})
    await start(engine, nursery)
    key = bound("claude:alice", "claude:bob")
    assert await served(engine, key) == "claude@bob"
    assert trio.current_time() == 2  # alice failed at 1, bob answered 1 s later
    answer = await engine.open(REQ, key)  # alice rests: skipped without a spawn
    assert answer.hop.slot == "claude@bob"
    assert [(r.account, r.code) for r in answer.records] == [("alice", Code.COOLDOWN)]
    assert answer.records[0].error_message.startswith("claude is resting")  # no account
    answer.close()
    assert len(spawners["claude@alice"].runs) == 1
    assert engine.health.check("claude@bob", "sonnet") is None
    assert engine.health.check("claude", "sonnet") is None
    await trio.sleep_until(101)
    assert await served(engine, key) == "claude@alice"


async def test_circuits_are_per_account(autojump_clock: trio.testing.MockClock,
                                        nursery: trio.Nursery) -> None:
    engine, _ = build({"claude": [OK], "claude@alice": [fail(0.5, "unavailable", "CRASH")],
                       "claude@bob": [OK], "codex": [OK]})
    await start(engine, nursery)
    for _ in range(3):
        assert await served(engine, bound("claude:alice")) == "codex"
    assert engine.health.check("claude@alice", "sonnet") is not None  # its circuit is open
    assert engine.health.check("claude", "sonnet") is None
    assert await served(engine) == "claude"


async def test_soft_triggers_count_each_account_on_its_own(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    ledger = Ledger({"claude": SoftLimits(daily_request_count_threshold=1)},
                    clock=trio.current_time)
    engine, _ = build({slot: [OK] for slot in ALL}, ledger=ledger)
    await start(engine, nursery)
    key = bound("claude:alice", "claude:bob")
    assert await served(engine, key) == "claude@alice"
    assert await served(engine, key) == "claude@bob"  # alice's one request today is spent
    assert await served(engine, key) == "codex"
    assert await served(engine) == "claude"  # the default login's count is its own


async def test_a_cancelled_walk_leaks_nothing_on_any_account(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"claude@alice": [fail(1, "rate_limited")],
                              "claude@bob": [[*fail(30, "unavailable")]], "codex": [OK]})
    await start(engine, nursery)
    with trio.move_on_after(5):
        await engine.open(REQ, bound("claude:alice", "claude:bob"))
    assert trio.current_time() == 5
    await trio.testing.wait_all_tasks_blocked()
    assert len(spawners["claude@bob"].runs) == 1 and spawners["claude@bob"].runs[0].killed
    assert clean(engine, spawners)


def test_slot_names() -> None:
    assert slot_name("claude", "default") == "claude"
    assert slot_name("claude", "alice") == "claude@alice"
    assert Hop("claude", "m", account="alice").slot == "claude@alice"


class Holder:
    """An actor stand-in that keeps (or not) the conversation's session."""

    def __init__(self, holds: bool) -> None:
        self.holds, self.asked = holds, 0

    async def holds_session(self, request: object, model: str, owner: str) -> bool:
        self.asked += 1
        return self.holds


async def test_a_continued_conversation_goes_first_to_the_account_keeping_it() -> None:
    from olp.engine._routes import Route
    from olp.engine._walk import conversation_first, for_key

    route = for_key(Route("chain", (CLAUDE, CODEX)),
                    bound("claude:alice", "claude:bob").accounts)
    assert [h.slot for h in route.hops] == ["claude@alice", "claude@bob", "codex"]
    actors: dict[str, Any] = {"claude@alice": Holder(False), "claude@bob": Holder(True),
                              "codex": Holder(True)}
    keyed = RequestContext(namespace="7")
    moved = await conversation_first(route, REQ, keyed, actors)
    assert [h.slot for h in moved.hops] == ["claude@bob", "claude@alice", "codex"]
    assert actors["codex"].asked == 0  # an entry with one account is not asked
    # Without a key (no session scope), or with one account per entry, nothing is read.
    assert await conversation_first(route, REQ, RequestContext(), actors) is route
    single = for_key(Route("chain", (CLAUDE, CODEX)), bound("claude:alice").accounts)
    assert await conversation_first(single, REQ, keyed, actors) is single


class EndedLogin:
    """A login whose refresh was refused for good (issue #41): ``ended()`` says why."""

    generation = 1

    def __init__(self, why: str) -> None:
        self.why = why

    def ended(self) -> str | None:
        return self.why

    def status(self) -> dict[str, Any]:
        return {"state": "expired", "problem": self.why}

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        task_status.started()
        await trio.sleep_forever()


async def test_an_ended_login_is_skipped_as_auth_without_a_spawn(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"claude@alice": [OK], "claude@bob": [OK], "codex": [OK]})
    why = "the refresh token was refused (invalid_grant): log in again with `olp login`"
    alice = engine.actors["claude@alice"]
    alice.login = EndedLogin(why)  # type: ignore[assignment]
    await start(engine, nursery)
    answer = await engine.open(REQ, bound("claude:alice", "claude:bob"))
    assert answer.hop.slot == "claude@bob" and trio.current_time() == 0.5  # at once
    assert [(r.account, r.code, r.category, r.trigger_type, r.error_message)
            for r in answer.records] == [
        ("alice", Code.LOGIN_EXPIRED, "auth", "soft", f"login expired: {why}")]
    answer.close()
    assert spawners["claude@alice"].runs == []
    await trio.testing.wait_all_tasks_blocked()
    assert clean(engine, spawners)


async def test_a_chain_whose_every_login_ended_fails_without_an_attempt(
        autojump_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    engine, spawners = build({"claude@alice": [OK], "claude@bob": [OK]}, hops=(CLAUDE,))
    for slot in ("claude@alice", "claude@bob"):
        engine.actors[slot].login = EndedLogin("refused")  # type: ignore[assignment]
    await start(engine, nursery)
    with pytest.raises(ChainFailed) as failed:
        await engine.open(REQ, bound("claude:alice", "claude:bob"))
    assert failed.value.first is None and failed.value.skip_codes == {Code.LOGIN_EXPIRED}
    assert all(not s.runs for s in spawners.values())
    error = chain_error(REQ, failed.value)  # the app's answer: upstream auth, not a rest
    assert (error.error.status, error.error.code) == (502, "upstream_auth_failed")
    assert "has expired" in error.error.message
    public = chain_error(REQ, failed.value, public=True)
    assert "refused" not in public.error.message and public.error.status == 502
