"""The REAL ``codex`` (0.171.0) on its app-server through ``olp start``
(``providers.openai.codex_mode: "app-server"``, issue #43), against the loopback mock Responses
API, driven by the official ``openai`` SDK.

Each test asserts what only a streaming, long-lived server gives: token deltas reaching the
client before the upstream has finished (causal: the mock holds its last delta until the
client has read the first), one server for successive requests, the login's usage windows
reaching ``olp quota``, a killed server failing over before content and restarting, and a
client that disconnects leaving no thread and no process.

Needs ``OLP_REAL_CODEX`` (printed by ``scripts/install-real-clis``): skips without it, fails in
CI (``CI=true``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import trio
from mock_openai_responses import MockResponses, offered_tools
from olp_harness import OWNER_TOKEN, descendants, in_thread, real_cli, run_proxy, wait_until
from test_accounts_real import ask, codex_login, new_key, sha, write_config
from test_codex_rate_limits import snapshot_headers
from test_proxy_real_codex import KEY, codex_config_toml, proxy_env, start

MODEL = "gpt-5.5"
DELTAS = ("One", " two", " three", " four", " five.")
HANG_GUARD_S = 90


def config(codex: str, mock: MockResponses, **provider: Any) -> dict[str, Any]:
    return {
        "providers": {
            "enabled": {"openai": True, "anthropic": False, "mistral": False},
            "openai": {
                "binary": codex,
                "codex_mode": "app-server",
                "metered": True,
                "max_concurrent": 4,
                "home_files": {".codex/config.toml": codex_config_toml(mock)},
                "env": {"OPENAI_API_KEY": KEY},
                "timeouts": {"first_output_s": 45, "idle_s": 20, "total_s": 55},
                **provider,
            },
        },
        "server": {"kill_grace_s": 1},
    }


def app_servers(pid: int) -> list[int]:
    """The ``codex app-server`` processes under the proxy (the native binary's argv)."""
    found = []
    for child in descendants(pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"app-server" in argv and not any(a.endswith(b"bwrap") for a in argv[:1]):
            found.append(child)
    return found


def stream_texts(proxy: Any, messages: list[dict[str, Any]], *,
                 on_first: Any = None) -> tuple[list[str], dict[str, str]]:
    """Stream one chat completion; ``on_first`` is called once the first content arrived."""
    texts: list[str] = []
    with proxy.client().chat.completions.with_streaming_response.create(
            model=MODEL, messages=messages, stream=True) as response:
        for chunk in response.parse():
            if chunk.choices and chunk.choices[0].delta.content:
                texts.append(chunk.choices[0].delta.content)
                if len(texts) == 1 and on_first is not None:
                    on_first()
        return texts, dict(response.headers)


async def test_deltas_reach_the_client_before_the_upstream_finishes(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(HANG_GUARD_S):
        mock = await start(nursery, "success", deltas=DELTAS, delay=0.05)
        release = trio.Event()
        token = trio.lowlevel.current_trio_token()
        mock.hold_last_delta = release  # the mock sends its last delta only once released
        async with run_proxy(tmp_path / "home", config(codex, mock),
                             env=proxy_env(tmp_path)) as proxy:
            texts, headers = await in_thread(lambda: stream_texts(
                proxy, [{"role": "user", "content": "Count to five."}],
                on_first=lambda: token.run_sync_soon(release.set)))
            # a second request on the same server, in a fresh thread
            again, _ = await in_thread(lambda: stream_texts(
                proxy, [{"role": "user", "content": "Count again."}]))
            server = proxy.get("/health").json()["providers"]["openai"]["app_server"]
    assert "".join(texts) == "".join(DELTAS)
    assert len(texts) >= 3, texts  # token deltas, not one whole message
    assert "".join(again) == "".join(DELTAS)
    assert headers["x-olp-provider-used"] == "openai"
    assert (server["running"], server["started"], server["served"]) == (True, 1, 2), server
    assert mock.request_count == 2
    bodies = [r["body"] for r in mock.requests]
    assert all("Count to five." not in json.dumps(b) for b in bodies[1:])  # no shared history


def chat(proxy: Any, text: str) -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/chat/completions", timeout=60,
                      headers={"Authorization": f"Bearer {proxy.token}"},
                      json={"model": MODEL, "messages": [{"role": "user", "content": text}]})


def health(proxy: Any) -> dict[str, Any]:
    return proxy.get("/health").json()["providers"]["openai"]  # type: ignore[no-any-return]


async def test_rate_limit_windows_reach_olp_quota_and_rest_the_login(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    now = int(time.time())
    with trio.fail_after(HANG_GUARD_S):
        mock = await start(nursery, "success",
                           response_headers=snapshot_headers(now, primary=42, secondary=13))
        cfg = config(codex, mock)
        cfg["routing"] = {"soft_triggers": {"openai": {
            "five_hour_window_percent_threshold": 90}}}
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            first = await in_thread(lambda: chat(proxy, "Say hello."))
            view = (await in_thread(lambda: proxy.get("/v0/management/quota"))).json()
            printed = await in_thread(lambda: subprocess.run(
                [sys.executable, "-m", "olp", "quota"], capture_output=True, text=True,
                timeout=30, check=True, env={"PATH": "/usr/bin:/bin",
                                             "OLP_HOME": str(tmp_path / "home"),
                                             "OLP_OWNER_TOKEN": OWNER_TOKEN,
                                             "OLP_PORT": proxy.url.rsplit(":", 1)[1]}).stdout)
            mock.set_scenario("success", response_headers=snapshot_headers(
                now, primary=95, secondary=20))
            second = await in_thread(lambda: chat(proxy, "Say hello again."))
            third = await in_thread(lambda: chat(proxy, "And once more."))
    assert first.status_code == 200 and second.status_code == 200
    windows = {w: (r["status"], r["utilization"], r["resets_at"])
               for w, r in view["providers"]["openai"]["reported"].items()}
    assert windows == {"five_hour": ("allowed", 0.42, now + 3 * 3600),
                       "seven_day": ("allowed", 0.13, now + 4 * 86400)}
    assert "five_hour:allowed@42%" in printed and "seven_day:allowed@13%" in printed
    # 95 % of the five-hour window used, as codex reported it: the login rests until its reset
    assert third.status_code == 429, third.text
    detail = json.loads(third.headers["x-olp-fallback-detail"])
    assert [(d["code"], d["trigger_type"]) for d in detail] == [("SOFT_TRIGGER", "soft")]
    assert mock.request_count == 2


async def test_a_killed_server_fails_its_turn_over_and_the_next_request_restarts_it(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(HANG_GUARD_S):
        mock = await start(nursery, "stall", deltas=("Partial",), delay=0.05)
        async with run_proxy(tmp_path / "home", config(codex, mock),
                             env=proxy_env(tmp_path)) as proxy:
            got: list[str] = []
            failed: list[BaseException] = []

            def read() -> None:
                try:
                    got.extend(stream_texts(proxy, [{"role": "user", "content": "Hi."}])[0])
                except Exception as exc:  # the stream breaks off: content already went out
                    failed.append(exc)

            async with trio.open_nursery() as inner:
                inner.start_soon(in_thread, read)
                assert await wait_until(lambda: mock.request_count == 1, within=30)
                await trio.sleep(0.5)  # the first delta is out (stall: then silence)
                for pid in app_servers(proxy.process.pid):
                    os.kill(pid, signal.SIGKILL)
            mock.set_scenario("success")
            after = await in_thread(lambda: chat(proxy, "Hello again."))
            server = health(proxy)["app_server"]
            left = app_servers(proxy.process.pid)
    assert got == ["Partial"] or failed, (got, failed)  # never a fallback after content
    assert after.status_code == 200, after.text
    assert after.json()["choices"][0]["message"]["content"] == "Hello from the mock upstream."
    assert server["started"] == 2 and server["running"], server
    assert left, "the restarted server is running"


async def test_a_client_that_disconnects_leaves_no_thread_and_no_turn(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(HANG_GUARD_S):
        mock = await start(nursery, "stall", deltas=("Partial",), delay=0.05)
        async with run_proxy(tmp_path / "home", config(codex, mock),
                             env=proxy_env(tmp_path)) as proxy:

            def read_one_then_leave() -> str:
                with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", timeout=60,
                                  headers={"Authorization": f"Bearer {proxy.token}"},
                                  json={"model": MODEL, "stream": True, "messages": [
                                      {"role": "user", "content": "Hi."}]}) as response:
                    for line in response.iter_lines():
                        if "Partial" in line:
                            return line
                return ""

            assert "Partial" in await in_thread(read_one_then_leave)
            assert await wait_until(lambda: health(proxy)["in_flight"] == 0, within=20)
            server = health(proxy)["app_server"]
            # the upstream request was abandoned: the turn was interrupted, not left running
            assert await wait_until(
                lambda: mock.requests[0]["outcome"] == "client_disconnected", within=20), \
                mock.requests[0]["outcome"]
            servers = app_servers(proxy.process.pid)
    assert server["threads"] == 0 and server["running"], server
    assert servers, "the server itself stays up for the next request"


TOOLS: list[Any] = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


async def test_parallel_tool_calls_come_back_in_one_turn_and_the_results_are_answered(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(HANG_GUARD_S):
        mock = await start(nursery, "success")
        async with run_proxy(tmp_path / "home", config(codex, mock),
                             env=proxy_env(tmp_path)) as proxy:
            client = proxy.client()
            ask: list[Any] = [{"role": "user",
                               "content": "What is the weather in Paris and in Tokyo?"}]
            first = await in_thread(lambda: client.chat.completions.create(
                model=MODEL, messages=ask, tools=TOOLS))
            choice = first.choices[0]
            calls = choice.message.tool_calls or []
            history = [*ask, choice.message.model_dump(exclude_none=True),
                       *({"role": "tool", "tool_call_id": c.id, "content": f"Sunny in {n}"}
                         for c, n in zip(calls, ("Paris", "Tokyo"), strict=False))]

            def stream() -> str:
                chunks = client.chat.completions.create(model=MODEL, messages=history,
                                                        tools=TOOLS, stream=True)
                return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

            answer = await in_thread(stream)
            single = await in_thread(lambda: client.chat.completions.create(
                model=MODEL, messages=ask, tools=TOOLS, parallel_tool_calls=False))
            server = health(proxy)["app_server"]
    assert choice.finish_reason == "tool_calls"
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"})]
    assert len({c.id for c in calls}) == 2
    # the upstream saw only the client's tool: no built-in, no bridge
    assert offered_tools(mock.requests[0]["body"]) == ["get_weather"]
    # one model request per turn: codex never got an answer to its calls (interrupted)
    assert mock.request_count == 3
    assert "Sunny in Paris" in answer and "Sunny in Tokyo" in answer
    assert len(single.choices[0].message.tool_calls or []) == 1
    assert server["started"] == 1 and server["served"] == 3


async def test_a_conversation_continues_in_its_kept_thread_with_only_the_new_turns(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(HANG_GUARD_S):
        mock = await start(nursery, "success")
        async with run_proxy(tmp_path / "home", config(codex, mock),
                             env=proxy_env(tmp_path)) as proxy:
            client = proxy.client()
            history: list[Any] = [{"role": "system", "content": "You are terse."},
                                  {"role": "user", "content": "FIRST-MARKER hello"}]
            states = []
            for text in ("SECOND-MARKER more", "THIRD-MARKER and more"):
                sent = list(history)
                raw = await in_thread(lambda: client.chat.completions.with_raw_response
                                      .create(model=MODEL, messages=sent))  # noqa: B023
                states.append(raw.headers["x-olp-session"])
                history += [{"role": "assistant",
                             "content": raw.parse().choices[0].message.content},
                            {"role": "user", "content": text}]
            raw = await in_thread(lambda: client.chat.completions.with_raw_response.create(
                model=MODEL, messages=history))
            states.append(raw.headers["x-olp-session"])
            server = health(proxy)["app_server"]
    assert states == ["new", "resumed", "resumed"]
    bodies = [r["body"] for r in mock.requests]
    assert len({b["prompt_cache_key"] for b in bodies}) == 1  # one codex thread throughout
    last_users = [[c["text"] for m in b["input"] if m.get("role") == "user"
                   for c in m["content"]][-1] for b in bodies]
    # each turn sent only its new user text; the thread held the rest
    assert last_users[1] == "SECOND-MARKER more" and last_users[2] == "THIRD-MARKER and more"
    assert sum("FIRST-MARKER" in json.dumps(m) for m in bodies[2]["input"]) == 1
    assert server["served"] == 3 and server["started"] == 1


async def test_a_tool_loop_goes_on_in_the_turn_codex_paused(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(HANG_GUARD_S):
        mock = await start(nursery, "success")
        async with run_proxy(tmp_path / "home", config(codex, mock),
                             env=proxy_env(tmp_path)) as proxy:
            client = proxy.client()
            ask: list[Any] = [{"role": "user",
                               "content": "What is the weather in Paris and in Tokyo?"}]
            first = await in_thread(lambda: client.chat.completions.create(
                model=MODEL, messages=ask, tools=TOOLS))
            message = first.choices[0].message
            calls = message.tool_calls or []
            history = [*ask, message.model_dump(exclude_none=True),
                       *({"role": "tool", "tool_call_id": c.id, "content": f"Sunny in {n}"}
                         for c, n in zip(calls, ("Paris", "Tokyo"), strict=False))]
            raw = await in_thread(lambda: client.chat.completions.with_raw_response.create(
                model=MODEL, messages=history, tools=TOOLS))
            answer = raw.parse().choices[0].message.content or ""
    assert len(calls) == 2 and raw.headers["x-olp-session"] == "resumed"
    assert "Sunny in Paris" in answer and "Sunny in Tokyo" in answer
    assert mock.request_count == 2
    second = mock.requests[1]["body"]
    # codex's own loop went on: the results as function_call_output of its calls, once each
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    assert [o["output"] for o in outputs] == ["Sunny in Paris", "Sunny in Tokyo"]
    assert second["prompt_cache_key"] == mock.requests[0]["body"]["prompt_cache_key"]


async def test_two_logins_each_answer_on_their_own_server(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    home = tmp_path / "olp"
    with trio.fail_after(HANG_GUARD_S):
        mock = await start(nursery, "success")
        tokens = {a: codex_login(home / "accounts" / "openai" / a, a) for a in ("alice", "bob")}
        toml = codex_config_toml(mock).replace('env_key = "OPENAI_API_KEY"\n',
                                               "requires_openai_auth = true\n")
        cfg = {"auth": {"fallback_detail_header_policy": "all"}, "providers": {
            "enabled": {"openai": True, "anthropic": False, "mistral": False},
            "openai": {"binary": codex, "codex_mode": "app-server", "max_concurrent": 2,
                       "home_files": {".codex/config.toml": toml},
                       "accounts": {"alice": {}, "bob": {}},
                       "timeouts": {"first_output_s": 45, "idle_s": 20, "total_s": 55}}},
            "routing": {"chains": {"c": [{"provider": "openai", "model": MODEL}]}},
            "server": {"kill_grace_s": 1}}
        write_config(home, cfg)
        keys = {a: new_key(home, a, f"openai:{a}") for a in ("alice", "bob")}
        owner_home = tmp_path / "owner"
        owner_home.mkdir()
        async with run_proxy(home, cfg, env={"HOME": str(owner_home)}) as proxy:
            seen = []
            for n, account in enumerate(["alice", "bob", "alice", "bob"]):
                mock.clear_requests()
                _, headers = await in_thread(
                    lambda account=account, n=n: ask(proxy, keys[account], "c", f"Hi {n}."))
                seen.append((headers["x-olp-account"],
                             {r["credential_sha256"] for r in mock.requests}))
            providers = proxy.get("/health").json()["providers"]
    assert seen == [(a, {sha(tokens[a])}) for a in ("alice", "bob", "alice", "bob")]
    for slot in ("openai@alice", "openai@bob"):
        server = providers[slot]["app_server"]
        assert (server["started"], server["served"]) == (1, 2), (slot, server)


async def test_a_tool_round_trip_in_the_responses_dialect(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    tool = {"type": "function", "name": "get_weather",
            "description": "Get the current weather for a city.",
            "parameters": TOOLS[0]["function"]["parameters"]}
    with trio.fail_after(HANG_GUARD_S):
        mock = await start(nursery, "success")
        async with run_proxy(tmp_path / "home", config(codex, mock),
                             env=proxy_env(tmp_path)) as proxy:
            client = proxy.client()
            first = await in_thread(lambda: client.responses.create(
                model=MODEL, input="What is the weather in Paris?", tools=[tool]))
            [call] = [item for item in first.output if item.type == "function_call"]
            second = await in_thread(lambda: client.responses.create(
                model=MODEL, previous_response_id=first.id, tools=[tool],
                input=[{"type": "function_call_output", "call_id": call.call_id,
                        "output": "Sunny, 22 C"}]))
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
    assert "Sunny, 22 C" in second.output_text
