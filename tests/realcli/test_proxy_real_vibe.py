"""The real ``vibe`` CLI (PyPI ``mistral-vibe`` 3.0.2, installed by ``scripts/install-vibe``)
through ``olp start``, against the loopback mock Mistral API in ``tests/support/mock_mistral``,
driven by the official ``openai`` SDK.

Needs ``OLP_REAL_VIBE``; without it the tests skip on a developer's machine and fail in CI.
vibe takes ~5 s to start, so each test runs as few CLIs as it can. vibe's own retry budget is
set low (``api_retry_max_elapsed_time``) through the provider's ``home_files`` config.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from mock_mistral import CHAT_ROUTE, MockMistral, serve_mock
from olp_harness import alive, descendants, in_thread, real_cli, run_proxy, wait_until

ANSWER = "Hello from the mock upstream."
MODEL = "devstral-2-25-12"  # the registry's model behind the alias "devstral"
KEY = "mock-mistral-key-0000"
SYSTEM = "SYSTEM-MARKER-5d1e: you are terse."
USER = "USER-MARKER-9b2c: say hello in four words."
MESSAGES: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
# a different request (an identical one could be answered from OLP's cache)
STREAM_MESSAGES: list[Any] = [*MESSAGES[:1],
                              {"role": "user", "content": f"{USER} Stream it."}]


def vibe_config(mock: MockMistral) -> str:
    return "\n".join([
        "enable_telemetry = false",
        "enable_update_checks = false",
        "api_retry_max_elapsed_time = 3.0",
        "",
        "[[providers]]",
        'name = "mistral"',
        f'api_base = "{mock.api_base}"',
        'api_key_env_var = "MISTRAL_API_KEY"',
        'backend = "mistral"',
        "",
    ])


def config(vibe: str, mock: MockMistral, *, key_in_env: bool = True) -> dict[str, Any]:
    return {
        "providers": {
            "enabled": {"anthropic": False, "openai": False, "mistral": True},
            "mistral": {
                "binary": vibe,
                # the mock's API key is metered spend: the provider consents (registry models)
                "metered": True,
                "max_concurrent": 2,
                "env": {"MISTRAL_API_KEY": KEY} if key_in_env else {},
                "home_files": {".vibe/config.toml": vibe_config(mock)},
                "timeouts": {"first_output_s": 45, "idle_s": 20, "total_s": 55},
            },
        },
        "server": {"kill_grace_s": 1},
    }


async def start(nursery: trio.Nursery, scenario: str, **options: Any) -> MockMistral:
    mock: MockMistral = await nursery.start(
        lambda task_status: serve_mock(scenario=scenario, task_status=task_status, **options))
    return mock


async def test_answer_stdin_prompt_model_and_key_file(tmp_path: Path,
                                                      nursery: trio.Nursery) -> None:
    """Non-stream then stream. No key in any env: it comes from the user's ~/.vibe/.env,
    symlinked into the spawn's VIBE_HOME."""
    vibe = real_cli("OLP_REAL_VIBE")
    real_home = tmp_path / "realhome"
    (real_home / ".vibe").mkdir(parents=True)
    (real_home / ".vibe" / ".env").write_text(f"MISTRAL_API_KEY={KEY}\n")
    with trio.fail_after(60):
        mock = await start(nursery, "success")
        async with run_proxy(tmp_path / "home", config(vibe, mock, key_in_env=False),
                             env={"HOME": str(real_home)}) as proxy:
            response = await in_thread(
                lambda: proxy.client().chat.completions.with_raw_response.create(
                    model="devstral", messages=MESSAGES))

            def consume() -> list[str]:
                texts = []
                for chunk in proxy.client().chat.completions.create(
                        model="devstral", messages=STREAM_MESSAGES, stream=True):
                    if chunk.choices and chunk.choices[0].delta.content:
                        texts.append(chunk.choices[0].delta.content)
                return texts

            texts = await in_thread(consume)
            assert descendants(proxy.process.pid) == set()
    completion = response.parse()
    assert completion.choices[0].message.content == ANSWER
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == MODEL
    assert response.headers["x-olp-provider-used"] == "mistral"
    assert texts == [ANSWER]  # one whole message
    chats = mock.chat_requests()
    assert len(chats) == 2
    for request in chats:
        body = request["body"]
        assert body["model"] == MODEL  # VIBE_ACTIVE_MODEL + VIBE_MODELS
        assert body["stream"] is True
        assert request["credential_sha256"] == hashlib.sha256(KEY.encode()).hexdigest()
        system, user = body["messages"]
        assert system["role"] == "system" and SYSTEM not in system["content"]  # vibe's own
        assert user["role"] == "user"
        prompt = user["content"]  # from stdin: the system text first, then the conversation
        assert prompt.startswith(f"System instructions:\n{SYSTEM}")
        assert USER in prompt and prompt.index(SYSTEM) < prompt.index(USER)


async def test_usage_from_export_json(tmp_path: Path, nursery: trio.Nursery) -> None:
    vibe = real_cli("OLP_REAL_VIBE")
    with trio.fail_after(60):
        mock = await start(nursery, "success")
        async with run_proxy(tmp_path / "home", config(vibe, mock)) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="devstral", messages=MESSAGES))

            def stream_usage() -> Any:
                usage = None
                for chunk in proxy.client().chat.completions.create(
                        model="devstral", messages=STREAM_MESSAGES, stream=True,
                        stream_options={"include_usage": True}):
                    usage = chunk.usage or usage
                return usage

            usage = await in_thread(stream_usage)
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (25, 7)
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (25, 7)


@pytest.mark.parametrize(("scenario", "status", "code", "max_chats"), [
    ("rate_limit", 429, "rate_limited", 10),  # vibe retries within its 3 s budget, then exit 2
    ("auth", 502, "upstream_auth_failed", 1),  # 401: no retry, exit 1
])
async def test_upstream_errors(tmp_path: Path, nursery: trio.Nursery, scenario: str,
                               status: int, code: str, max_chats: int) -> None:
    vibe = real_cli("OLP_REAL_VIBE")
    with trio.fail_after(60):
        mock = await start(nursery, scenario)
        async with run_proxy(tmp_path / "home", config(vibe, mock)) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(model="devstral", messages=MESSAGES)
                return info.value

            err = await in_thread(call)
            assert descendants(proxy.process.pid) == set()
    assert err.status_code == status
    assert err.response.json()["error"]["code"] == code
    assert 1 <= len(mock.chat_requests()) <= max_chats


async def test_client_gone_mid_answer_leaves_no_vibe(tmp_path: Path,
                                                     nursery: trio.Nursery) -> None:
    vibe = real_cli("OLP_REAL_VIBE")
    with trio.fail_after(60):
        mock = await start(nursery, "slow", interval=0.5)  # streams " chunkN" forever
        async with run_proxy(tmp_path / "home", config(vibe, mock)) as proxy:
            client = openai.AsyncOpenAI(base_url=f"{proxy.url}/v1", api_key=proxy.token,
                                        max_retries=0)
            async with client:
                async with trio.open_nursery() as inner:
                    async def ask() -> None:
                        await client.chat.completions.create(
                            model="devstral", messages=MESSAGES, stream=True)

                    inner.start_soon(ask)
                    # vibe is mid-answer: the mock is streaming chunks to it ...
                    await mock.wait_for_requests(1, route=CHAT_ROUTE)
                    await trio.sleep(1.5)
                    seen = descendants(proxy.process.pid)
                    assert seen  # vibe-rs, vibe-app-server
                    inner.cancel_scope.cancel()  # ... and the client hangs up
            gone = await wait_until(lambda: not any(alive(p) for p in seen), within=5.0)
            assert gone, "a vibe process outlived the client's disconnect"
            assert descendants(proxy.process.pid) == set()
            [chat] = mock.chat_requests()
            with trio.fail_after(5):
                record = await mock.wait_for_outcome(chat["n"])
            assert record["outcome"] == "client_disconnected"
            health = await in_thread(lambda: proxy.get("/health").json())
            assert health["providers"]["mistral"]["in_flight"] == 0
