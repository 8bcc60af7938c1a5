"""Prompt-cache reuse on the dashboard (issue #25): the state endpoint carries each key's
prompt tokens today beside its cached ones (the page shows "600 (60 %)"), and per provider
today's input and cached input tokens of every key, every provider listed (those with no
traffic today too), read from the ledger."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
from test_hardening_auth import _Keys, login

from olp.accounting import day_of
from olp.engine import Engine, Router
from olp.http import Services, create_app
from olp.store import Database

INFO = {"anthropic": {"binary": "claude"}, "openai": {"binary": "codex"},
        "gemini": {"binary": "gemini"}}


@dataclass(frozen=True)
class _Key:
    id: int
    name: str
    tier: str
    active: bool = True


class _ListedKeys(_Keys):
    """The hardening tests' key store, which also lists its keys (as the dashboard asks)."""

    async def list(self) -> list[_Key]:
        await trio.lowlevel.checkpoint()
        return [_Key(1, "owner", "owner"), _Key(2, "kid", "guest"), _Key(3, "idle", "guest")]


def ledger(db: Database, day: str, key: str, provider: str, account: str = "default",
           **counters: int) -> None:
    """One usage row, as the recorder would have written it (unnamed counters 0; account
    ``-`` for provider ``-``)."""
    account = "-" if provider == "-" else account
    db.write(lambda c: c.execute(
        "INSERT INTO usage (day, key, key_name, provider, account, model, "
        f"{', '.join(counters)}) VALUES (?, ?, ?, ?, ?, ?{', ?' * len(counters)})",
        [day, key, {"1": "owner", "2": "kid"}[key], provider, account, f"{provider}-model",
         *counters.values()]))


async def state_of(db: Database | None) -> dict[str, Any]:
    app = create_app(Services(engine=Engine(Router(lambda m: None, providers=[]), {}),
                              keys=_ListedKeys(), models=lambda: [], dashboard="on", db=db,
                              provider_info=INFO))
    client = app.test_client()
    with trio.fail_after(10):
        status, _ = await login(client)
        assert status == 303
        resp = await client.get("/dashboard/api/state")
    assert resp.status_code == 200
    body: dict[str, Any] = await resp.get_json()
    return body


async def test_each_key_carries_its_prompt_and_cached_tokens_today(tmp_path: Path) -> None:
    now = time.time()
    today, yesterday = day_of(now), day_of(now - 86400)
    with Database(tmp_path / "olp.db") as db:
        ledger(db, today, "2", "anthropic", requests=1, prompt_tokens=1000, cached_tokens=600,
               completion_tokens=20)
        ledger(db, today, "2", "openai", requests=2, prompt_tokens=500, cached_tokens=0,
               completion_tokens=5)
        ledger(db, today, "2", "-", requests=1, cache_hits=1)  # a cache hit: no provider
        ledger(db, yesterday, "2", "anthropic", requests=9, prompt_tokens=9000,
               cached_tokens=9000)  # not today
        ledger(db, today, "1", "anthropic", requests=1, prompt_tokens=200, cached_tokens=50)
        state = await state_of(db)
    keys = {k["name"]: k["today"] for k in state["keys"]}
    assert keys["kid"] == {"requests": 4, "tokens": 1525, "prompt_tokens": 1500,
                           "cached_tokens": 600}
    assert keys["owner"] == {"requests": 1, "tokens": 200, "prompt_tokens": 200,
                             "cached_tokens": 50}
    assert keys["idle"] == {"requests": 0, "tokens": 0, "prompt_tokens": 0, "cached_tokens": 0}


async def test_per_provider_reuse_is_every_keys_today_and_lists_idle_providers(
        tmp_path: Path) -> None:
    now = time.time()
    today, yesterday = day_of(now), day_of(now - 86400)
    with Database(tmp_path / "olp.db") as db:
        ledger(db, today, "2", "anthropic", requests=1, prompt_tokens=1000, cached_tokens=600)
        ledger(db, today, "1", "anthropic", requests=2, prompt_tokens=3000, cached_tokens=1800)
        ledger(db, today, "2", "openai", requests=1, prompt_tokens=40)
        ledger(db, yesterday, "1", "gemini", requests=5, prompt_tokens=700, cached_tokens=7)
        ledger(db, today, "1", "mistral", requests=1, prompt_tokens=10, cached_tokens=5)
        ledger(db, today, "1", "-", requests=3, refused=3)  # refused: no provider took them
        state = await state_of(db)
    cache = state["prompt_cache"]
    assert list(cache) == ["anthropic", "openai", "gemini", "mistral"]  # configured first,
    assert cache["anthropic"] == {"requests": 3, "prompt_tokens": 4000,  # then the ledger's
                                  "cached_tokens": 2400}
    assert cache["openai"] == {"requests": 1, "prompt_tokens": 40, "cached_tokens": 0}
    assert cache["gemini"] == {"requests": 0, "prompt_tokens": 0, "cached_tokens": 0}
    assert cache["mistral"] == {"requests": 1, "prompt_tokens": 10, "cached_tokens": 5}
    assert "-" not in cache


async def test_a_providers_reuse_sums_its_accounts(tmp_path: Path) -> None:
    today = day_of(time.time())
    with Database(tmp_path / "olp.db") as db:
        ledger(db, today, "2", "anthropic", requests=1, prompt_tokens=1000, cached_tokens=600)
        ledger(db, today, "2", "anthropic", "bob", requests=2, prompt_tokens=500,
               cached_tokens=100)
        state = await state_of(db)
    assert state["prompt_cache"]["anthropic"] == {"requests": 3, "prompt_tokens": 1500,
                                                  "cached_tokens": 700}
    assert {k["name"]: k["today"]["requests"] for k in state["keys"]}["kid"] == 3


async def test_without_a_database_the_fields_are_there_and_zero() -> None:
    state = await state_of(None)
    assert state["prompt_cache"] == {name: {"requests": 0, "prompt_tokens": 0,
                                            "cached_tokens": 0} for name in INFO}
    assert all(k["today"]["prompt_tokens"] == 0 for k in state["keys"])

