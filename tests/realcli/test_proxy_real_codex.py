"""The real ``codex`` CLI (pinned, from npm) through ``olp start``, against the loopback mock
OpenAI Responses API in ``tests/support/mock_openai_responses``, driven by the official
``openai`` SDK: on its app-server (the default ``codex_mode``) and, where a test says so, as
``codex exec`` (``mode="exec"``). A request leaves no process behind but the login's
long-lived app-server (:func:`olp_harness.spawned`).

codex is pointed at the mock by the provider's ``home_files`` (a ``.codex/config.toml`` with a
``model_provider`` whose ``base_url`` is the mock) and its key by the provider's ``env``; its
own retry knobs are set low, except in the test that proves the proxy abandons a retry storm.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from mock_openai_responses import MockResponses, serve_mock
from olp_harness import (
    FAKE_CLAUDE,
    alive,
    descendants,
    in_thread,
    real_cli,
    run_proxy,
    spawned,
    wait_until,
)

KEY = "sk-mock-0000"
MESSAGES: list[Any] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say hello in four words."},
]
ANSWER = "Hello from the mock upstream."
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQ"
                       "CgAf7gP9i18U1AAAAABJRU5ErkJggg==")


def codex_config_toml(mock: MockResponses, *, retries: bool = False) -> str:
    knobs = "" if retries else "request_max_retries = 1\nstream_max_retries = 1\n"
    return (
        'model_provider = "mock"\n'
        "check_for_update_on_startup = false\n\n"
        "[model_providers.mock]\n"
        'name = "Mock upstream"\n'
        f'base_url = "{mock.base_url}"\n'
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
        f"{knobs}\n"
        "[analytics]\nenabled = false\n"
    )


MODES = pytest.mark.parametrize("mode", ["app-server", "exec"])


def config(codex: str, mock: MockResponses, *, retries: bool = False,
           timeouts: dict[str, float] | None = None, mode: str = "app-server",
           ) -> dict[str, Any]:
    return {
        "providers": {
            "enabled": {"openai": True, "anthropic": False, "mistral": False},
            "openai": {
                "binary": codex,
                "codex_mode": mode,
                # the mock's API key is metered spend: the provider consents (registry models)
                "metered": True,
                "max_concurrent": 2,
                "home_files": {".codex/config.toml": codex_config_toml(mock, retries=retries)},
                "env": {"OPENAI_API_KEY": KEY},
                "timeouts": timeouts or {"first_output_s": 45, "idle_s": 20, "total_s": 55},
            },
        },
        "server": {"kill_grace_s": 1},
    }


def proxy_env(tmp_path: Path) -> dict[str, str]:
    # HOME is a fresh directory, so no developer's own ~/.codex login is linked into a spawn
    home = tmp_path / "user-home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home)}


async def start(nursery: trio.Nursery, scenario: str, **options: Any) -> MockResponses:
    mock: MockResponses = await nursery.start(
        lambda task_status: serve_mock(scenario=scenario, task_status=task_status, **options)
    )
    return mock


def user_texts(body: dict[str, Any]) -> list[str]:
    return [c.get("text", "") for m in body["input"] if m.get("role") == "user"
            for c in m["content"] if c.get("type") == "input_text"]


@MODES
async def test_stream_and_usage(tmp_path: Path, nursery: trio.Nursery, mode: str) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(60):
        mock = await start(nursery, "success")
        async with run_proxy(tmp_path / "home", config(codex, mock, mode=mode),
                             env=proxy_env(tmp_path)) as proxy:

            def consume() -> tuple[list[str], Any, dict[str, str], str]:
                with proxy.client().chat.completions.with_streaming_response.create(
                    model="gpt-5.5",
                    messages=MESSAGES,
                    stream=True,
                    stream_options={"include_usage": True},
                ) as response:
                    texts, usage, model = [], None, ""
                    for chunk in response.parse():
                        model = chunk.model
                        if chunk.choices and chunk.choices[0].delta.content:
                            texts.append(chunk.choices[0].delta.content)
                        if chunk.usage:
                            usage = chunk.usage
                    return texts, usage, dict(response.headers), model

            texts, usage, headers, model = await in_thread(consume)
            assert spawned(proxy.process.pid) == set()
    if mode == "exec":
        assert texts == [ANSWER]  # one whole agent_message: codex exec prints no deltas
    else:
        assert "".join(texts) == ANSWER and len(texts) > 1  # the mock's deltas, as they came
    assert usage.prompt_tokens == 25 and usage.completion_tokens == 7
    assert model == "gpt-5.5" and headers["x-olp-provider-used"] == "openai"
    [request] = mock.requests
    body = request["body"]
    assert body["model"] == "gpt-5.5" and body["stream"] is True
    assert request["credential_sha256"] == hashlib.sha256(KEY.encode()).hexdigest()
    # the prompt came on stdin, the system text at its head (codex has no system-prompt flag)
    prompt = user_texts(body)[-1]
    assert prompt.startswith("System instructions:\nYou are terse.")
    assert "Say hello in four words." in prompt
    developer = json.dumps([m for m in body["input"] if m.get("role") == "developer"])
    assert "You are terse." not in developer


async def test_non_stream(tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(60):
        mock = await start(nursery, "success", cached_tokens=10)
        async with run_proxy(tmp_path / "home", config(codex, mock),
                             env=proxy_env(tmp_path)) as proxy:
            completion = await in_thread(
                lambda: proxy.client().chat.completions.create(
                    model="gpt-5.5", messages=[MESSAGES[1]]))
    assert completion.choices[0].message.content == ANSWER
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    # codex's input_tokens already include the cached ones
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (25, 7)
    assert user_texts(mock.requests[0]["body"])[-1] == "Say hello in four words."


async def test_image_and_strict_json_schema(tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
              "additionalProperties": False}
    with trio.fail_after(60):
        mock = await start(nursery, "success")
        async with run_proxy(tmp_path / "home", config(codex, mock),
                             env=proxy_env(tmp_path)) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="gpt-5.5",
                messages=[{"role": "user", "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {
                        "url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}]}],
                response_format={"type": "json_schema", "json_schema": {
                    "name": "answer", "strict": True, "schema": schema}}))
    assert completion.choices[0].message.content == ANSWER
    body = mock.requests[0]["body"]
    assert body["text"]["format"]["type"] == "json_schema"
    assert body["text"]["format"]["schema"] == schema and body["text"]["format"]["strict"]
    parts = [c for m in body["input"] if m.get("role") == "user" for c in m["content"]]
    images = [c["image_url"] for c in parts if c.get("type") == "input_image"]
    assert len(images) == 1 and images[0].startswith("data:image/png;base64,")
    assert base64.b64decode(images[0].split(",", 1)[1]).startswith(b"\x89PNG")
    assert not any("could not read" in c.get("text", "") for c in parts)


@pytest.mark.parametrize(
    ("scenario", "status", "code"),
    [
        ("rate_limit", 429, "rate_limited"),
        ("quota", 429, "billing"),
        ("usage_limit", 429, "usage_window"),
        ("auth", 502, "upstream_auth_failed"),
    ],
)
@MODES
async def test_upstream_errors(
    tmp_path: Path, nursery: trio.Nursery, scenario: str, status: int, code: str, mode: str
) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(60):
        mock = await start(nursery, scenario)
        async with run_proxy(tmp_path / "home", config(codex, mock, mode=mode),
                             env=proxy_env(tmp_path)) as proxy:

            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(model="gpt-5.5", messages=MESSAGES)
                return info.value

            err = await in_thread(call)
            assert spawned(proxy.process.pid) == set()
    assert err.status_code == status
    assert err.response.json()["error"]["code"] == code
    assert "127.0.0.1" not in err.response.json()["error"]["message"]  # no upstream URL
    if scenario == "usage_limit":  # "try again at <local time>" (the mock: in an hour)
        assert 3000 <= int(err.response.headers["retry-after"]) <= 3660
    assert mock.request_count == (2 if scenario == "auth" else 1)  # stream_max_retries = 1


@MODES
async def test_a_silent_upstream_is_cut_by_the_proxy_deadline(
    tmp_path: Path, nursery: trio.Nursery, mode: str
) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(60):
        mock = await start(nursery, "hang")  # codex itself would wait forever
        async with run_proxy(tmp_path / "home", config(
                codex, mock, timeouts={"first_output_s": 3, "idle_s": 3, "total_s": 30},
                mode=mode),
                env=proxy_env(tmp_path)) as proxy:

            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(model="gpt-5.5", messages=MESSAGES)
                return info.value

            err = await in_thread(call)
            assert await wait_until(lambda: spawned(proxy.process.pid) == set(), within=2.0)
            record = await mock.wait_for_outcome(1)
    assert err.status_code == 503
    assert err.response.json()["error"]["code"] == "first_output_timeout"
    # the killed codex (exec), or the interrupted turn (app-server), hung up
    assert record["outcome"] == "client_disconnected"


@MODES
async def test_a_retry_storm_is_abandoned_for_the_next_hop(
    tmp_path: Path, nursery: trio.Nursery, mode: str
) -> None:
    """codex's default retries against a 500 make 30 requests in ~24 s; the first
    ``Reconnecting... 1/5`` line is enough for the proxy to kill it and advance."""
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(60):
        mock = await start(nursery, "server_error")
        cfg = config(codex, mock, retries=True, mode=mode)
        cfg["providers"]["enabled"]["anthropic"] = True
        cfg["providers"]["anthropic"] = {"binary": str(FAKE_CLAUDE), "env": {
            "FAKE_CLAUDE_SCENARIO": "success", "ANTHROPIC_API_KEY": "sk-ant-fake"}}
        cfg["routing"] = {"chains": {"gpt-then-claude": [
            # both spend API keys (codex OPENAI_API_KEY against the mock, the fake claude
            # ANTHROPIC_API_KEY): metered entries, each with its consent
            {"provider": "openai", "model": "gpt-5.5", "metered": True},
            {"provider": "anthropic", "model": "claude-sonnet-4-6", "metered": True}]}}
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            raw = await in_thread(lambda: proxy.client().chat.completions.with_raw_response
                                  .create(model="gpt-then-claude", messages=MESSAGES))
            assert await wait_until(lambda: spawned(proxy.process.pid) == set(), within=2.0)
            count = mock.request_count
    assert raw.parse().choices[0].message.content == ANSWER
    assert raw.headers["x-olp-provider-used"] == "anthropic"
    [detail] = json.loads(raw.headers["x-olp-fallback-detail"])
    assert (detail["provider"], detail["category"], detail["code"]) == (
        "openai", "unavailable", "RETRY_ABANDONED")
    assert 1 <= count < 30  # not waited out


async def test_disconnect_before_the_answer_leaves_no_codex(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(60):
        mock = await start(nursery, "slow", interval=0.5)  # the answer never completes
        # exec: a client that sees nothing gives up (app-server streams: its own test)
        async with run_proxy(tmp_path / "home", config(codex, mock, mode="exec"),
                             env=proxy_env(tmp_path)) as proxy:
            seen: dict[str, set[int]] = {}

            def ask_then_give_up() -> Exception:
                # codex prints content only once the whole message is done, so nothing (not
                # even headers) reaches the client; it gives up and closes the connection
                client = proxy.client().with_options(timeout=8)
                try:
                    for _ in client.chat.completions.create(
                            model="gpt-5.5", messages=MESSAGES, stream=True):
                        pass
                except openai.APIError as exc:
                    return exc
                raise AssertionError("the stream ended cleanly")

            async def snapshot() -> None:
                await mock.wait_for_requests(1)  # codex is running and streaming
                seen["cli"] = descendants(proxy.process.pid)

            async with trio.open_nursery() as inner:
                inner.start_soon(snapshot)
                exc = await in_thread(ask_then_give_up)
            assert isinstance(exc, openai.APITimeoutError)
            assert seen["cli"]  # the node wrapper and its native codex child
            gone = await wait_until(lambda: not any(alive(p) for p in seen["cli"]), within=2.0)
            assert gone, "a codex process outlived the client's disconnect"
            assert descendants(proxy.process.pid) == set()
            record = await mock.wait_for_outcome(1)
            assert record["outcome"] == "client_disconnected"
            health = await in_thread(lambda: proxy.get("/health").json())
            assert health["providers"]["openai"]["in_flight"] == 0
