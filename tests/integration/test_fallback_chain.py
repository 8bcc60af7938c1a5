"""Fallback chains over real sockets: a CLI hop and metered HTTP hops against loopback
mocks, driven by the official SDK. The fault tier of the openai-compatible provider itself is
in test_openai_compat_faults.py; this is the engine's side (docs/adr/0005-fallback-engine.md)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio
from mock_openai_upstream import MockOpenAI, serve_mock
from olp_harness import FAKE_CLAUDE, Proxy, in_thread, run_proxy

BODY: dict[str, Any] = {"model": "smart", "messages": [{"role": "user", "content": "hi"}]}


def router(mock: MockOpenAI) -> dict[str, Any]:
    return {"kind": "openai-compatible", "base_url": mock.base_url, "api_key_env": "ROUTER_KEY",
            "metered": True, "timeouts": {"first_output_s": 5, "idle_s": 5, "total_s": 20}}


def config(*, primary: dict[str, Any], chain: list[dict[str, Any]],
           backup: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    providers: dict[str, Any] = {"enabled": {"openai": False, "mistral": False}, **primary}
    if backup:
        providers.update(backup)
    return {"providers": providers, "routing": {"chains": {"smart": chain}, **extra},
            "auth": {"fallback_detail_header_policy": "all"}}


def fake_claude(scenario: str) -> dict[str, Any]:
    return {"anthropic": {"binary": str(FAKE_CLAUDE), "env": {
        # a subscription token: an API key would make claude metered (its entries consent)
        "FAKE_CLAUDE_SCENARIO": scenario, "CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"}}}


def post(proxy: Proxy, **extra: Any) -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/chat/completions", json={**BODY, **extra},
                      headers={"Authorization": f"Bearer {proxy.token}"}, timeout=30)


def detail(resp: httpx.Response) -> list[tuple[str, str, str]]:
    return [(d["provider"], d["code"], d["trigger_type"])
            for d in json.loads(resp.headers.get("x-olp-fallback-detail", "[]"))]


async def test_cli_429_falls_back_to_a_metered_hop_with_its_model_and_usage(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    mock = await nursery.start(serve_mock)
    cfg = config(primary=fake_claude("rate_limit"), backup={"router": router(mock)}, chain=[
        {"name": "sub", "provider": "anthropic", "model": "claude-sonnet-4-6"},
        {"name": "api", "provider": "router", "model": "gpt-x", "metered": True}])
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg, env={"ROUTER_KEY": "sk-router"}) as proxy:
            resp = await in_thread(lambda: post(proxy))
            streamed = await in_thread(lambda: post(
                proxy, stream=True, stream_options={"include_usage": True},
                messages=[{"role": "user", "content": "again"}]))
    assert resp.status_code == 200
    body = resp.json()
    assert body["choices"][0]["message"]["content"] == "Hello from the mock upstream."
    assert body["model"] == "gpt-x-2025-01-01"  # the model that served, as the upstream named it
    assert body["usage"]["prompt_tokens"] > 0
    assert resp.headers["x-olp-served-by"] == "api"
    assert resp.headers["x-olp-model-used"] == "gpt-x"
    assert resp.headers["x-olp-credential"] == "metered"
    assert resp.headers["x-olp-fallback-hops"] == "1"
    # claude announced it was retrying a 429: abandoned at once for the next hop
    assert detail(resp) == [("anthropic", "RETRY_ABANDONED", "hard")]
    assert streamed.status_code == 200 and streamed.text.endswith("data: [DONE]\n\n")
    assert '"usage":{"prompt_tokens"' in streamed.text


async def test_a_primary_down_for_a_while_opens_its_circuit_then_recovers(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    primary = await nursery.start(serve_mock)
    backup = await nursery.start(serve_mock)
    primary.set_scenario("unavailable")
    cfg = config(primary={"main": router(primary)}, backup={"spare": router(backup)}, chain=[
        {"provider": "main", "model": "m1", "metered": True},
        {"provider": "spare", "model": "m2", "metered": True}],
        resilience={"circuit_failures": 2, "probe_after_s": 1})
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg, env={"ROUTER_KEY": "sk-router"}) as proxy:
            for i in range(2):  # two failures (each retried once on the hop) open the circuit
                resp = await in_thread(lambda i=i: post(proxy, user=f"{i}", messages=[
                    {"role": "user", "content": f"q{i}"}]))
                assert resp.headers["x-olp-provider-used"] == "spare"
                assert detail(resp) == [("main", "UPSTREAM_5XX", "hard")]
            assert primary.request_count == 4
            resp = await in_thread(lambda: post(proxy, messages=[{"role": "user",
                                                                 "content": "q2"}]))
            assert detail(resp) == [("main", "CIRCUIT_OPEN", "soft")]
            assert primary.request_count == 4  # skipped without a request
            health = await in_thread(lambda: proxy.get("/health").json())
            assert health["providers"]["main"]["circuit_open"] is True
            primary.set_scenario("success")  # it recovers
            await trio.sleep(1.2)
            resp = await in_thread(lambda: post(proxy, messages=[{"role": "user",
                                                                 "content": "q3"}]))
            assert resp.headers["x-olp-provider-used"] == "main" and detail(resp) == []
            health = await in_thread(lambda: proxy.get("/health").json())
            assert health["resilience"]["circuits"] == []


async def test_client_errors_are_returned_at_once_never_fallen_back(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    primary = await nursery.start(serve_mock)
    backup = await nursery.start(serve_mock)
    primary.set_scenario("content_policy")
    cfg = config(primary={"main": router(primary)}, backup={"spare": router(backup)}, chain=[
        {"provider": "main", "model": "m1", "metered": True},
        {"provider": "spare", "model": "m2", "metered": True}])
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg, env={"ROUTER_KEY": "sk-router"}) as proxy:
            resp = await in_thread(lambda: post(proxy))
    assert resp.status_code == 400
    assert "safety system" in resp.json()["error"]["message"]  # the provider's reason
    assert detail(resp) == [("main", "CONTENT_POLICY", "client_error")]
    assert backup.request_count == 0


async def test_metered_entries_need_consent_and_can_be_forbidden(tmp_path: Path,
                                                                 nursery: trio.Nursery) -> None:
    mock = await nursery.start(serve_mock)
    chain = [{"provider": "anthropic", "model": "claude-sonnet-4-6"},
             {"provider": "router", "model": "gpt-x"}]  # no "metered": true
    cfg = config(primary=fake_claude("rate_limit"), backup={"router": router(mock)}, chain=chain)
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "a", cfg, env={"ROUTER_KEY": "k"}) as proxy:
            resp = await in_thread(lambda: post(proxy))
            logs = json.dumps(proxy.logs)
    assert resp.status_code == 429 and mock.request_count == 0  # pruned: never reached
    assert "metered" in logs and "pruned" in logs
    # Only metered entries left, and metered fallback forbidden: the proxy still starts, and
    # the chain answers 503 naming why.
    cfg = config(primary={}, backup={"router": router(mock)},
                 chain=[{"provider": "router", "model": "gpt-x", "metered": True}])
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "b", cfg, env={
                "ROUTER_KEY": "k", "OLP_FORBID_METERED_FALLBACK": "1"}) as proxy:
            resp = await in_thread(lambda: post(proxy))
    assert resp.status_code == 503 and mock.request_count == 0
    assert "OLP_FORBID_METERED_FALLBACK" in resp.json()["error"]["message"]


async def test_the_per_hop_retry_is_configurable(tmp_path: Path,
                                                 nursery: trio.Nursery) -> None:
    primary = await nursery.start(serve_mock)
    backup = await nursery.start(serve_mock)
    primary.set_scenario("unavailable")
    main = {**router(primary), "retry": {"server_errors": 0}}
    cfg = config(primary={"main": main}, backup={"spare": router(backup)}, chain=[
        {"provider": "main", "model": "m1", "metered": True},
        {"provider": "spare", "model": "m2", "metered": True}])
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg, env={"ROUTER_KEY": "sk-router"}) as proxy:
            resp = await in_thread(lambda: post(proxy))
    assert resp.headers["x-olp-provider-used"] == "spare"
    assert primary.request_count == 1  # advanced at once: no retry on the failing hop


async def silent_then_hang_up(*, task_status: trio.TaskStatus[tuple[str, list[int]]]
                             = trio.TASK_STATUS_IGNORED) -> None:
    """An upstream that reads each request, stays silent for 1.5 s, then closes the
    connection without a byte (a gateway giving up on a dead backend). Reports its base URL
    and a list that grows by one per request."""
    requests: list[int] = []

    async def handle(stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                data += chunk
            requests.append(1)
            await trio.sleep(1.5)  # the fault itself, not synchronisation

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        task_status.started((f"http://127.0.0.1:{port}/v1", requests))


async def test_an_upstream_that_hangs_up_after_a_silence_is_not_retried(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    url, requests = await nursery.start(silent_then_hang_up)
    backup = await nursery.start(serve_mock)
    main = {**router(backup), "base_url": url}
    cfg = config(primary={"main": main}, backup={"spare": router(backup)}, chain=[
        {"provider": "main", "model": "m1", "metered": True},
        {"provider": "spare", "model": "m2", "metered": True}])
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg, env={"ROUTER_KEY": "sk-router"}) as proxy:
            resp = await in_thread(lambda: post(proxy))
    assert resp.status_code == 200 and resp.headers["x-olp-provider-used"] == "spare"
    assert detail(resp) == [("main", "CONNECTION_FAILED", "hard")]
    assert len(requests) == 1  # the silent route got exactly one request


async def test_a_silent_upstream_is_left_at_once_for_the_next_hop(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    primary = await nursery.start(serve_mock)
    backup = await nursery.start(serve_mock)
    primary.set_scenario("hang")  # reads the request, never answers
    main = {**router(primary), "timeouts": {"first_output_s": 1, "idle_s": 5, "total_s": 20}}
    cfg = config(primary={"main": main}, backup={"spare": router(backup)}, chain=[
        {"provider": "main", "model": "m1", "metered": True},
        {"provider": "spare", "model": "m2", "metered": True}])
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg, env={"ROUTER_KEY": "sk-router"}) as proxy:
            resp = await in_thread(lambda: post(proxy))
    assert resp.status_code == 200 and resp.headers["x-olp-provider-used"] == "spare"
    assert detail(resp) == [("main", "FIRST_OUTPUT_TIMEOUT", "hard")]
    assert primary.request_count == 1  # the silent route got exactly one request


async def test_a_cli_rate_limited_on_a_one_entry_chain_answers_429_not_a_timeout(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    # claude retries a 429 on its own (a retry line every 3 s) past the first-output deadline
    claude = fake_claude("rate_limit")
    claude["anthropic"]["env"]["FAKE_CLAUDE_DELAY_S"] = "3"
    claude["anthropic"]["timeouts"] = {"first_output_s": 8}
    cfg = config(primary=claude, chain=[{"provider": "anthropic", "model": "claude-sonnet-4-6"}])
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg) as proxy:
            resp = await in_thread(lambda: post(proxy))
    assert resp.status_code == 429  # the storm's cause, not 503 first_output_timeout
    assert resp.headers["retry-after"] == "5"  # from claude's retry line (4.1-4.5 s)
    assert detail(resp) == [("anthropic", "RATE_LIMITED", "hard")]
