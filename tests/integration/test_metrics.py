"""``GET /metrics`` on a running ``olp start``: parsed with ``prometheus_client``'s own parser,
its counters move with the requests (answers, a cache hit, a fallback, a key over its limit,
a stream's first token), every one labelled with a provider labelled with its account too; its
gauges read the actors; the owner's key is needed unless
``server.metrics`` is ``"loopback"`` (then no key from 127.0.0.1), and ``"off"`` hides it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from olp_harness import FAKE_CLAUDE, Proxy, in_thread, run_proxy
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def config(metrics: str = "owner") -> dict[str, Any]:
    claude = {"binary": str(FAKE_CLAUDE), "max_concurrent": 3,
              "env": {"CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"}}
    return {"providers": {"enabled": {"openai": False, "mistral": False},
                          "anthropic": claude},
            "routing": {"chains": {"smart": [
                {"name": "sub", "provider": "anthropic", "model": "claude-sonnet-4-6"}]}},
            "server": {"metrics": metrics}}


def scrape(proxy: Proxy, token: str | None = None) -> Samples:
    resp = httpx.get(f"{proxy.url}/metrics", timeout=10,
                     headers={"Authorization": f"Bearer {token or proxy.token}"})
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(resp.text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def chat(proxy: Proxy, key: str, text: str, **extra: Any) -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/chat/completions", timeout=30,
                      headers={"Authorization": f"Bearer {key}"},
                      json={"model": "smart", "messages": [{"role": "user", "content": text}],
                            **extra})


async def test_counters_move_with_requests_and_gauges_read_the_actors(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cfg = config()
    with trio.fail_after(60):
        async with run_proxy(home, cfg) as proxy:
            before = await in_thread(lambda: scrape(proxy))
            kid = json.loads((await in_thread(lambda: subprocess.run(
                [sys.executable, "-m", "olp", "keys", "create", "kid", "--per-minute", "1",
                 "--json"], env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(home)},
                capture_output=True, text=True, timeout=30, check=True))).stdout)["key"]
            assert (await in_thread(lambda: chat(proxy, proxy.token, "one"))).status_code \
                == 200
            assert (await in_thread(lambda: chat(proxy, proxy.token, "one"))).status_code \
                == 200  # the cache's
            streamed = await in_thread(lambda: chat(proxy, proxy.token, "two", stream=True))
            assert streamed.status_code == 200
            assert (await in_thread(lambda: chat(proxy, kid, "three"))).status_code == 200
            assert (await in_thread(lambda: chat(proxy, kid, "four"))).status_code == 429
            after = await in_thread(lambda: scrape(proxy))
            guest = await in_thread(lambda: httpx.get(
                f"{proxy.url}/metrics", headers={"Authorization": f"Bearer {kid}"}))
            nobody = await in_thread(lambda: httpx.get(f"{proxy.url}/metrics"))

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    me = {"provider": "anthropic", "account": "default"}
    ok = {**me, "model": "claude-sonnet-4-6", "status": "200", "dialect": "openai"}
    assert moved("olp_requests_total", **ok) == 4
    assert moved("olp_requests_total", provider="-", account="-", model="-", status="429",
                 dialect="openai") == 1
    assert moved("olp_cache_results_total", result="hit") == 1
    assert moved("olp_cache_results_total", result="miss") == 3
    assert moved("olp_key_limit_refusals_total", status="429") == 1
    assert moved("olp_spawn_duration_seconds_count", **me) == 3
    assert moved("olp_time_to_first_token_seconds_count", **me) == 1
    assert moved("olp_tokens_total", **me, kind="completion") > 0
    assert value(after, "olp_in_flight", **me) == 0
    assert value(after, "olp_max_concurrent", **me) == 3
    assert value(after, "olp_cooldown_active", **me) == 0
    assert ("olp_circuit_open", (("account", "default"), ("provider", "anthropic"))) in after
    assert guest.status_code == 403 and nobody.status_code == 401


async def test_failed_and_fallback_hops_are_counted_by_category(tmp_path: Path) -> None:
    cfg = config()
    # nothing listens on port 9: the connection is refused, the chain moves on
    cfg["providers"]["broken"] = {"kind": "openai-compatible", "base_url":
                                  "http://127.0.0.1:9/v1", "metered": True,
                                  "api_key_env": "BROKEN_KEY",
                                  "retry": {"connection_errors": 0}}
    cfg["routing"]["chains"]["smart"].insert(0, {"name": "down", "provider": "broken",
                                                 "model": "x", "metered": True})
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg, env={"BROKEN_KEY": "k"}) as proxy:
            before = await in_thread(lambda: scrape(proxy))
            resp = await in_thread(lambda: chat(proxy, proxy.token, "fall back"))
            after = await in_thread(lambda: scrape(proxy))
    assert resp.status_code == 200 and resp.headers["x-olp-fallback-hops"] == "1"
    down = {"provider": "broken", "account": "default", "category": "unavailable"}
    failed = value(after, "olp_failed_hops_total", **down) \
        - value(before, "olp_failed_hops_total", **down)
    assert failed == 1
    assert value(after, "olp_fallbacks_total", provider="anthropic", account="default") == 1


@pytest.mark.parametrize(("mode", "status"), [("loopback", 200), ("off", 404)])
async def test_loopback_needs_no_key_and_off_hides_it(tmp_path: Path, mode: str,
                                                      status: int) -> None:
    cfg = config(mode)
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg) as proxy:
            resp = await in_thread(lambda: httpx.get(f"{proxy.url}/metrics", timeout=10))
            owner = await in_thread(lambda: httpx.get(
                f"{proxy.url}/metrics", timeout=10,
                headers={"Authorization": f"Bearer {proxy.token}"}))
            health = await in_thread(lambda: httpx.get(f"{proxy.url}/health", timeout=10))
    assert resp.status_code == (200 if mode == "loopback" else 401)  # no key
    assert owner.status_code == status
    assert health.status_code == 401  # nothing else opens up
