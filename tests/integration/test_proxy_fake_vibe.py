"""``olp start`` over a real socket with the ``mistral`` provider and a fake ``vibe`` that replays
the real CLI's transcripts (tests/support/fakes/fake_vibe.py). The official ``openai`` SDK is the
client. Real clock; every test has a hang guard.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from olp_harness import REPO, alive, in_thread, pids_from, run_proxy, wait_until

FAKE_VIBE = REPO / "tests" / "support" / "fakes" / "fake_vibe.py"
ANSWER = "Hello from the mock upstream."
MODEL = "devstral-2-25-12"  # the registry's model behind the alias "devstral"
MESSAGES: list[Any] = [{"role": "system", "content": "Be terse."},
                       {"role": "user", "content": "Say hello in four words."}]
# a different request (an identical one could be answered from OLP's cache)
STREAM_MESSAGES: list[Any] = [*MESSAGES[:1], {"role": "user", "content": "Stream a hello."}]


def config(tmp_path: Path, scenario: str, *, key: bool = True, **env: str) -> dict[str, Any]:
    provider_env = {"FAKE_VIBE_SCENARIO": scenario, "FAKE_VIBE_PIDFILE": str(tmp_path / "pids"),
                    **env}
    if key:
        provider_env["MISTRAL_API_KEY"] = "mock-mistral-key-0000"
    return {"providers": {
        "enabled": {"anthropic": False, "openai": False, "mistral": True},
        "mistral": {"binary": str(FAKE_VIBE), "metered": True, "max_concurrent": 2,
                    "env": provider_env,
                    "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 30}}},
        "server": {"kill_grace_s": 1}}


def proxy_env(real_home: Path | None = None) -> dict[str, str]:
    env: dict[str, str] = {}
    if real_home is not None:
        env["HOME"] = str(real_home)
    return env


async def test_non_streaming_answer_and_headers(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success"),
                             env=proxy_env(tmp_path)) as proxy:
            response = await in_thread(
                lambda: proxy.client().chat.completions.with_raw_response.create(
                    model="devstral", messages=MESSAGES))
            logs = list(proxy.logs)
    completion = response.parse()
    assert completion.choices[0].message.content == ANSWER
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == MODEL
    assert response.headers["x-olp-provider-used"] == "mistral"
    assert response.headers["x-olp-model-used"] == MODEL
    assert response.headers["x-olp-requested-model"] == "devstral"
    assert "Say hello" not in json.dumps(logs)  # prompts are never logged
    assert not any(alive(p) for p in pids_from(tmp_path / "pids"))


async def test_stream_is_one_whole_message(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success"),
                             env=proxy_env(tmp_path)) as proxy:
            def consume() -> tuple[list[str], str | None]:
                texts, finish = [], None
                for chunk in proxy.client().chat.completions.create(
                        model="devstral", messages=MESSAGES, stream=True):
                    if chunk.choices and chunk.choices[0].delta.content:
                        texts.append(chunk.choices[0].delta.content)
                    if chunk.choices and chunk.choices[0].finish_reason:
                        finish = chunk.choices[0].finish_reason
                return texts, finish

            texts, finish = await in_thread(consume)
    assert texts == [ANSWER]  # vibe prints whole messages: one delta
    assert finish == "stop"


async def test_usage_comes_from_export_json(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success"),
                             env=proxy_env(tmp_path)) as proxy:
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


async def test_prompt_on_stdin_model_in_env_and_the_key_file_linked(tmp_path: Path) -> None:
    """No key in any env: the user's ~/.vibe/.env is symlinked into the spawn's VIBE_HOME."""
    real_home = tmp_path / "realhome"
    (real_home / ".vibe").mkdir(parents=True)
    key_file = real_home / ".vibe" / ".env"
    key_file.write_text("MISTRAL_API_KEY=from-the-users-file\n")
    argv_file = tmp_path / "argv.json"
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(
                tmp_path, "success", key=False, FAKE_VIBE_ECHO="1",
                FAKE_VIBE_ARGV_FILE=str(argv_file)), env=proxy_env(real_home)) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="devstral", messages=MESSAGES))
    argv = json.loads(argv_file.read_text())
    assert argv[1:5] == ["-p", "--output", "streaming", "--output-dir"]
    assert argv[5].endswith("/work/out") and argv[6:] == ["--disabled-tools", "*"]
    assert not any("Say hello" in a or "Be terse" in a for a in argv)
    echo = json.loads(completion.choices[0].message.content or "")
    assert echo["argv_prompt"] is None
    assert echo["stdin_head"].startswith("System instructions:\nBe terse.")
    assert echo["stdin_tail"].rstrip().endswith("with no label.")
    assert "Say hello in four words." in echo["stdin_tail"]
    assert echo["active_model"] == MODEL and echo["upstream_model"] == MODEL
    spawn_home = Path(echo["home"])
    assert echo["vibe_home"] == str(spawn_home / ".vibe") and spawn_home != real_home
    assert echo["env_link"] == str(key_file)
    assert "MISTRAL_API_KEY" not in echo["env_keys"]
    assert echo["cwd"] == str(spawn_home.parent / "work")
    assert not await trio.Path(echo["cwd"]).exists()  # the job's directories are removed


async def test_no_key_anywhere_is_auth_missing_without_a_spawn(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success", key=False),
                             env=proxy_env(tmp_path / "emptyhome")) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(model="devstral", messages=MESSAGES)
                return info.value

            err = await in_thread(call)
    assert err.status_code == 502
    body = err.response.json()
    assert body["error"]["code"] == "upstream_auth_failed"
    assert "MISTRAL_API_KEY" in body["error"]["message"]
    assert pids_from(tmp_path / "pids") == []  # checked before spawning


@pytest.mark.parametrize(("scenario", "status", "code"), [
    ("rate_limit", 429, "rate_limited"),
    ("auth", 502, "upstream_auth_failed"),
    ("server_error", 503, "upstream_5xx"),
    ("crash_mid_answer", 502, "cli_failed"),  # the partial answer was discarded: no content
])
async def test_upstream_failures_are_real_statuses(tmp_path: Path, scenario: str, status: int,
                                                   code: str) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, scenario),
                             env=proxy_env(tmp_path)) as proxy:
            for stream in (False, True):
                def call(stream: bool = stream) -> openai.APIStatusError:
                    with pytest.raises(openai.APIStatusError) as info:
                        proxy.client().chat.completions.create(
                            model="devstral", messages=MESSAGES, stream=stream)
                    return info.value

                err = await in_thread(call)
                assert err.status_code == status
                body = err.response.json()
                assert body["error"]["code"] == code
                assert err.response.headers["x-olp-fallback-exhausted"] == "mistral"
                assert "Hello" not in body["error"]["message"]
    pids = pids_from(tmp_path / "pids")
    assert len(pids) == 4  # two runs, each the fake and its grandchild
    assert not any(alive(p) for p in pids)


async def test_a_hung_vibe_is_killed_at_the_total_deadline(tmp_path: Path) -> None:
    cfg = config(tmp_path, "hang")
    cfg["providers"]["mistral"]["timeouts"] = {"first_output_s": 2, "idle_s": 2, "total_s": 2}
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(model="devstral", messages=MESSAGES)
                return info.value

            err = await in_thread(call)
            assert err.status_code == 503
            assert err.response.json()["error"]["code"] == "total_timeout"
            pids = pids_from(tmp_path / "pids")
            assert len(pids) == 2
            assert await wait_until(lambda: not any(alive(p) for p in pids), within=2.0)


async def test_client_gone_before_the_answer_kills_the_process_group(tmp_path: Path) -> None:
    """vibe prints nothing until the answer is whole: the client leaves before any content."""
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "hang"),
                             env=proxy_env(tmp_path)) as proxy:
            client = openai.AsyncOpenAI(base_url=f"{proxy.url}/v1", api_key=proxy.token,
                                        max_retries=0)
            async with client:
                with trio.move_on_after(30) as scope:
                    async with trio.open_nursery() as nursery:
                        async def ask() -> None:
                            await client.chat.completions.create(
                                model="devstral", messages=MESSAGES, stream=True)

                        nursery.start_soon(ask)
                        # the fake is running (it wrote its pids) ...
                        assert await wait_until(
                            lambda: len(pids_from(tmp_path / "pids")) == 2, within=20)
                        nursery.cancel_scope.cancel()  # ... and the client hangs up
                assert not scope.cancelled_caught
            pids = pids_from(tmp_path / "pids")
            assert await wait_until(lambda: not any(alive(p) for p in pids), within=5.0), \
                "vibe outlived the client's disconnect"

            def in_flight() -> int:
                return int(proxy.get("/health").json()["providers"]["mistral"]["in_flight"])

            assert await in_thread(in_flight) == 0
