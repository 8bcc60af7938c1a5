"""A family's keys against a running ``olp start``: limits that hold under a concurrent burst,
provider allow-lists, limits changed while the proxy runs, and each key seeing only its own
usage. The keys are made with ``olp keys`` in another process on the same ``OLP_HOME``."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import trio
from mock_openai_upstream import serve_mock
from olp_harness import FAKE_CLAUDE, Proxy, in_thread, run_proxy, wait_until

MARKER = "purple-elephant-7731"  # a prompt word no row of the ledger or the trail may hold


def config(**extra: Any) -> dict[str, Any]:
    providers: dict[str, Any] = {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "max_concurrent": 8,
                      "env": {"CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"}},
        **extra}
    return {"providers": providers,
            "routing": {"chains": {"smart": [
                {"name": "sub", "provider": "anthropic", "model": "claude-sonnet-4-6"}]}}}


def olp(home: Path, *args: str) -> Any:
    done = subprocess.run([sys.executable, "-m", "olp", *args],
                          env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(home)},
                          capture_output=True, text=True, timeout=30, check=True)
    return json.loads(done.stdout) if "--json" in args and "audit" not in args else \
        [json.loads(line) for line in done.stdout.splitlines()] if "--json" in args \
        else done.stdout


def chat(proxy: Proxy, key: str, text: str = "hi", model: str = "smart",
         **extra: Any) -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/chat/completions", timeout=30,
                      headers={"Authorization": f"Bearer {key}"},
                      json={"model": model, "messages": [{"role": "user", "content": text}],
                            **extra})


async def test_a_burst_of_20_from_a_key_limited_to_5_a_minute_serves_exactly_5(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    with trio.fail_after(90):
        async with run_proxy(home, config()) as proxy:
            kid = (await in_thread(lambda: olp(home, "keys", "create", "kid", "--per-minute",
                                               "5", "--json")))["key"]
            results: list[httpx.Response] = []

            async def one(i: int) -> None:
                results.append(await in_thread(lambda: chat(proxy, kid, f"q{i % 3}")))

            async with trio.open_nursery() as burst:
                for i in range(20):
                    burst.start_soon(one, i)
            assert await wait_until(lambda: _audit_count(home, "kid") == 20, within=5)
            usage = await in_thread(lambda: olp(home, "usage", "--key", "kid", "--json"))
            listed = await in_thread(lambda: olp(home, "keys", "list", "--json"))
    served = [r for r in results if r.status_code == 200]
    refused = [r for r in results if r.status_code == 429]
    assert len(served) == 5 and len(refused) == 15
    assert sorted(r.headers["x-ratelimit-remaining-requests"] for r in served) == \
        ["0", "1", "2", "3", "4"]
    for r in served + refused:
        assert r.headers["x-ratelimit-limit-requests"] == "5"
        assert r.headers["x-ratelimit-reset-requests"].endswith("s")
    for r in refused:
        error = r.json()["error"]
        assert error["code"] == "rate_limit_exceeded"
        assert "5 requests per minute" in error["message"]
        assert 1 <= int(r.headers["retry-after"]) <= 60
        assert r.headers["x-ratelimit-remaining-requests"] == "0"
    totals = {k: sum(row[k] for row in usage) for k in ("requests", "served", "refused")}
    assert totals == {"requests": 20, "served": 5, "refused": 15}
    [kid_row] = [k for k in listed if k["name"] == "kid"]
    assert kid_row["limits"] == {"per_minute": 5} and kid_row["today"]["requests"] == 20


async def test_limits_and_allow_lists_change_while_the_proxy_runs(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    mock = await nursery.start(serve_mock)
    router = {"kind": "openai-compatible", "base_url": mock.base_url, "metered": True,
              "api_key_env": "ROUTER_KEY"}
    cfg = config(router=router)
    cfg["routing"]["chains"]["pair"] = [
        {"name": "api", "provider": "router", "model": "gpt-x", "metered": True},
        {"name": "sub", "provider": "anthropic", "model": "claude-sonnet-4-6"}]
    cfg["auth"] = {"fallback_detail_header_policy": "owner_only"}
    home = tmp_path / "home"
    with trio.fail_after(90):
        async with run_proxy(home, cfg, env={"ROUTER_KEY": "sk-router"}) as proxy:
            made = await in_thread(lambda: olp(home, "keys", "create", "teen", "--providers",
                                               "anthropic", "--per-day", "100", "--json"))
            teen = made["key"]
            assert made["providers"] == ["anthropic"]
            admin = (await in_thread(lambda: olp(home, "keys", "create", "admin", "--owner",
                                                 "--providers", "anthropic", "--json")))["key"]
            # the router hop is outside both allow-lists: skipped, and said so to the owner
            guest = await in_thread(lambda: chat(proxy, teen, model="pair"))
            owner = await in_thread(lambda: chat(proxy, admin, "owner", model="pair"))
            # no hop of `router-only` is allowed: 403, and the request is not counted
            await in_thread(lambda: olp(home, "keys", "update", "teen", "--providers",
                                        "router", "--json"))
            denied = await _until_status(lambda: chat(proxy, teen, "x"), 403)
            await in_thread(lambda: olp(home, "keys", "update", "teen", "--all-providers",
                                        "--clear-limits", "--per-day", "1", "--json"))
            limited = await _until_status(lambda: chat(proxy, teen, "y"), 429)
            await in_thread(lambda: olp(home, "keys", "update", "teen", "--clear-limits",
                                        "--json"))
            freed = await _until_status(lambda: chat(proxy, teen, "z"), 200)
    assert guest.status_code == 200 and guest.headers["x-olp-provider-used"] == "anthropic"
    assert guest.headers["x-olp-fallback-hops"] == "1"
    assert "x-olp-fallback-detail" not in guest.headers  # a guest never sees it
    assert owner.status_code == 200
    [record] = json.loads(owner.headers["x-olp-fallback-detail"])
    assert (record["provider"], record["code"], record["trigger_type"]) == \
        ("router", "KEY_POLICY", "soft")
    assert mock.requests == []  # the router was never called
    error = denied.json()["error"]
    assert (error["type"], error["code"]) == ("permission_error", "provider_not_allowed")
    assert limited.json()["error"]["code"] == "rate_limit_exceeded"
    assert limited.headers["x-ratelimit-limit-requests"] == "1"
    assert "x-ratelimit-limit-requests" not in freed.headers  # no limits: no headers


async def test_each_key_sees_only_its_own_usage_and_the_owner_sees_all(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    with trio.fail_after(90):
        async with run_proxy(home, config()) as proxy:
            alice = (await in_thread(lambda: olp(home, "keys", "create", "alice",
                                                 "--json")))["key"]
            bob = (await in_thread(lambda: olp(home, "keys", "create", "bob", "--json")))["key"]
            for key, n in ((alice, 2), (bob, 3)):
                for i in range(n):
                    assert (await in_thread(lambda k=key, i=i: chat(
                        proxy, k, f"{MARKER} {i}"))).status_code == 200
            await in_thread(lambda: chat(proxy, "olp_not_a_key"))
            assert await wait_until(lambda: _audit_count(home, None) >= 6, within=5)
            mine = await in_thread(lambda: proxy.get("/v0/usage", alice))
            theirs = await in_thread(lambda: proxy.get("/v0/management/usage?key=bob", alice))
            trail = await in_thread(lambda: proxy.get("/v0/management/audit", alice))
            everyone = await in_thread(lambda: proxy.get("/v0/management/usage"))
            audit = await in_thread(lambda: proxy.get(
                "/v0/management/audit?key=bob&since=2026-01-01&limit=2"))
            latest = await in_thread(lambda: proxy.get("/v0/management/audit?key=bob&limit=1"))
            more = await in_thread(lambda: proxy.get(
                f"/v0/management/audit?key=bob&cursor={audit.json()['next_cursor']}"))
            bad = await in_thread(lambda: proxy.get("/v0/management/audit?since=yesterday"))
    assert mine.status_code == 200
    assert {r["key_name"] for r in mine.json()["data"]} == {"alice"}
    assert mine.json()["totals"]["requests"] == 2 and mine.json()["totals"]["served"] == 2
    assert theirs.status_code == 403 and trail.status_code == 403
    assert everyone.json()["keys"]["bob"]["requests"] == 3
    assert everyone.json()["keys"]["alice"]["requests"] == 2
    rows = audit.json()["data"]
    assert [r["key_name"] for r in rows] == ["bob", "bob"]
    [third] = more.json()["data"]  # the page after the first two
    assert latest.json()["data"] == [third]  # the latest row alone
    assert rows[0]["endpoint"] == "POST /v1/chat/completions"
    assert rows[0]["provider"] == "anthropic" and rows[0]["status"] == 200
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "since"
    with sqlite3.connect(home / "olp.db") as db:
        dumped = json.dumps([db.execute("SELECT * FROM audit").fetchall(),
                             db.execute("SELECT * FROM usage").fetchall()])
        unauthenticated = db.execute("SELECT status, outcome FROM audit WHERE key IS NULL"
                                     ).fetchall()
    assert MARKER not in dumped and alice not in dumped and bob not in dumped
    assert unauthenticated == [(401, "invalid_api_key")]


async def _until_status(call: Any, status: int) -> httpx.Response:
    """Repeat ``call`` until it answers ``status`` (a running proxy sees key changes within
    its 2 s lookup memo)."""
    with trio.move_on_after(10):
        while (resp := await in_thread(call)).status_code != status:  # noqa: ASYNC110
            await trio.sleep(0.2)  # polls another process (the 2 s memo), not a task
    assert resp.status_code == status, resp.text
    return resp


def _audit_count(home: Path, key_name: str | None) -> int:
    with sqlite3.connect(home / "olp.db") as db:
        if key_name is None:
            return int(db.execute("SELECT COUNT(*) FROM audit").fetchone()[0])
        return int(db.execute("SELECT COUNT(*) FROM audit WHERE key_name = ?",
                              (key_name,)).fetchone()[0])


async def test_audit_rows_of_answered_requests_survive_kill_9_after_one_second(
        tmp_path: Path) -> None:
    """The promise in docs/keys-limits-audit.md: a row for a request whose answer has
    completed is durable within 1 s, so ``kill -9`` loses at most the last second."""
    home = tmp_path / "home"
    with trio.fail_after(60):
        async with run_proxy(home, config()) as proxy:
            ids = []
            for i in range(6):
                resp = await in_thread(lambda i=i: chat(proxy, proxy.token, f"n{i}",
                                                        stream=i % 2 == 1))
                assert resp.status_code == 200
                ids.append(resp.headers["x-request-id"])
            refused = await in_thread(lambda: chat(proxy, proxy.token, model="no-such"))
            ids.append(refused.headers["x-request-id"])
            await trio.sleep(1.0)
            proxy.process.kill()  # SIGKILL: no drain, no final flush
            await proxy.process.wait()
    with sqlite3.connect(home / "olp.db") as db:
        rows = dict(db.execute("SELECT request_id, status FROM audit").fetchall())
        served = db.execute("SELECT SUM(served), SUM(requests) FROM usage").fetchone()
    assert {i: rows.get(i) for i in ids} == {**{i: 200 for i in ids[:-1]}, ids[-1]: 404}
    assert served == (6, 7)
