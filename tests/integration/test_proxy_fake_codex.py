"""``olp start`` over a real socket with a fake ``codex`` that replays real transcripts.

The official ``openai`` SDK is the client. Real clock; every test has a hang guard.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from olp_harness import FAKE_CLAUDE, REPO, alive, in_thread, pids_from, run_proxy, wait_until

from olp.providers.codex._invocation import BASE_ARGS

FAKE_CODEX = REPO / "tests" / "support" / "fakes" / "fake_codex.py"
MESSAGES: list[Any] = [{"role": "system", "content": "Be terse."},
                       {"role": "user", "content": "Say hello in four words."}]
ANSWER = "Hello from the mock upstream."
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQ"
                       "CgAf7gP9i18U1AAAAABJRU5ErkJggg==")


def codex_block(tmp_path: Path, scenario: str, **env: str) -> dict[str, Any]:
    return {"binary": str(FAKE_CODEX), "metered": True, "max_concurrent": 2,
            "env": {"FAKE_CODEX_SCENARIO": scenario,
                    "FAKE_CODEX_PIDFILE": str(tmp_path / "pids"),
                    "OPENAI_API_KEY": "sk-fake", **env},
            "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 30}}


def config(tmp_path: Path, scenario: str, **env: str) -> dict[str, Any]:
    return {"providers": {"enabled": {"openai": True, "anthropic": False, "mistral": False},
                          "openai": codex_block(tmp_path, scenario, **env)},
            "server": {"kill_grace_s": 1}}


def no_codex_left(tmp_path: Path) -> bool:
    return not any(alive(p) for p in pids_from(tmp_path / "pids"))


async def test_answer_streams_before_the_turn_completes(tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(
                tmp_path, "success", FAKE_CODEX_HOLD_FILE=str(hold))) as proxy:
            def consume() -> tuple[list[str], Any, dict[str, str], str]:
                with proxy.client().chat.completions.with_streaming_response.create(
                        model="gpt-5.5", messages=MESSAGES, stream=True,
                        stream_options={"include_usage": True}) as response:
                    texts, usage, model = [], None, ""
                    for chunk in response.parse():
                        model = chunk.model
                        if chunk.choices and chunk.choices[0].delta.content:
                            texts.append(chunk.choices[0].delta.content)
                            # The fake holds turn.completed until we have the message: a
                            # proxy that buffered would hang here until its own deadline.
                            hold.touch()
                        if chunk.usage:
                            usage = chunk.usage
                    return texts, usage, dict(response.headers), model

            texts, usage, headers, model = await in_thread(consume)
    assert texts == [ANSWER]  # codex gives whole messages, not token deltas
    assert usage.prompt_tokens == 25 and usage.completion_tokens == 7
    assert model == "gpt-5.5"  # codex never names the served model: the hop's model
    assert headers["x-olp-provider-used"] == "openai"
    assert headers["x-olp-model-used"] == "gpt-5.5"
    assert headers["x-olp-fallback-hops"] == "0"
    assert no_codex_left(tmp_path)


async def test_non_streaming_with_usage(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success")) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="gpt5", messages=MESSAGES))
            logs = list(proxy.logs)
    assert completion.choices[0].message.content == ANSWER
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "gpt-5.5"  # the alias resolved
    assert completion.usage is not None and completion.usage.total_tokens == 32
    assert "Say hello" not in json.dumps(logs)  # prompts are never logged


async def test_prompt_and_system_text_on_stdin_nothing_on_argv(tmp_path: Path) -> None:
    argv_file = tmp_path / "argv.json"
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(
                tmp_path, "success", FAKE_CODEX_ECHO="1",
                FAKE_CODEX_ARGV_FILE=str(argv_file))) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="gpt-5.5", messages=MESSAGES))
    argv = json.loads(argv_file.read_text())
    assert not any("Say hello" in a or "Be terse" in a for a in argv)
    echo = json.loads(completion.choices[0].message.content or "{}")
    catalog = Path(echo["cwd"]) / "model-catalog.json"  # in the spawn's own workdir
    # sessions are on by default for codex: it keeps its thread (no --ephemeral, ADR 0023)
    kept = [a for a in BASE_ARGS if a != "--ephemeral"]
    assert argv[1:] == [*kept, "-c", f'model_catalog_json="{catalog}"', "-m", "gpt-5.5", "-"]
    assert BASE_ARGS[:6] == ("exec", "--json", "--skip-git-repo-check", "--ephemeral",
                             "--sandbox", "read-only")
    assert echo["argv_prompt"] is None
    assert echo["stdin_head"].startswith("System instructions:\nBe terse.")
    assert echo["stdin_tail"].endswith("Write only the reply itself, with no label.")
    assert echo["codex_home"] is None  # codex uses the spawn's own $HOME/.codex
    assert echo["home"] != str(Path.home()) and echo["cwd"] != echo["home"]
    for spawn_dir in (echo["home"], echo["cwd"]):  # fresh per spawn, removed after it
        assert not await trio.Path(spawn_dir).exists()
    assert "OPENAI_API_KEY" in echo["env_keys"] and "OLP_HOME" not in echo["env_keys"]


async def test_images_reach_codex_as_files(tmp_path: Path) -> None:
    image_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success",
                                                       FAKE_CODEX_ECHO="1")) as proxy:
            def ask(url: str) -> Any:
                return proxy.client().chat.completions.create(model="gpt-5.5", messages=[
                    {"role": "user", "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": url}}]}])

            completion = await in_thread(lambda: ask(image_url))

            def remote() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    ask("https://example.com/cat.png")
                return info.value

            err = await in_thread(remote)
    [image] = json.loads(completion.choices[0].message.content or "{}")["images"]
    assert image["path"].endswith("/work/image-1.png")
    assert image["sha256"] == hashlib.sha256(PNG).hexdigest()
    assert err.status_code == 400 and "remote images" in err.response.json()["error"]["message"]


@pytest.mark.parametrize(("scenario", "status", "code"), [
    ("rate_limit", 429, "rate_limited"),
    ("quota", 429, "billing"),
    ("usage_limit", 429, "usage_window"),
    ("auth", 502, "upstream_auth_failed"),
    ("no_key", 502, "upstream_auth_failed"),
    ("server_error", 503, "upstream_5xx"),
    ("overloaded", 503, "overloaded"),
])
async def test_upstream_failures_are_real_statuses(tmp_path: Path, scenario: str, status: int,
                                                   code: str) -> None:
    with trio.fail_after(60):
        cfg = config(tmp_path, scenario, FAKE_CODEX_DELAY_S="0")
        async with run_proxy(tmp_path / "home", cfg) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(model="gpt-5.5", messages=MESSAGES)
                return info.value

            err = await in_thread(call)
    assert err.status_code == status
    assert err.response.json()["error"]["code"] == code
    assert err.response.headers["x-olp-fallback-exhausted"] == "openai"
    assert no_codex_left(tmp_path)


async def test_a_retry_storm_is_abandoned_for_the_next_hop(tmp_path: Path) -> None:
    cfg = config(tmp_path, "rate_limit", FAKE_CODEX_DELAY_S="0.3")
    cfg["providers"]["enabled"]["anthropic"] = True
    cfg["providers"]["anthropic"] = {
        "binary": str(FAKE_CLAUDE), "env": {"FAKE_CLAUDE_SCENARIO": "success",
                                            "ANTHROPIC_API_KEY": "sk-ant-fake"}}
    cfg["routing"] = {"chains": {"gpt-then-claude": [
        # both CLIs spend API keys here (metered): the entries consent
        {"provider": "openai", "model": "gpt-5.5", "metered": True},
        {"provider": "anthropic", "model": "claude-sonnet-4-6", "metered": True}]}}
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg) as proxy:
            def call() -> Any:
                return proxy.client().chat.completions.with_raw_response.create(
                    model="gpt-then-claude", messages=MESSAGES)

            raw = await in_thread(call)
            # codex printed "Reconnecting... 1/5 (... 429 ...)": killed at once, not waited out
            assert await wait_until(lambda: no_codex_left(tmp_path), within=2.0)
    assert raw.parse().choices[0].message.content == ANSWER
    assert raw.headers["x-olp-provider-used"] == "anthropic"
    [detail] = json.loads(raw.headers["x-olp-fallback-detail"])
    assert (detail["provider"], detail["category"], detail["code"]) == (
        "openai", "rate_limited", "RETRY_ABANDONED")


async def test_crash_mid_answer_ends_with_an_error_event_the_sdk_raises(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "crash_mid_answer")) as proxy:
            def consume() -> tuple[list[str], Exception | None]:
                texts: list[str] = []
                try:
                    for chunk in proxy.client().chat.completions.create(
                            model="gpt-5.5", messages=MESSAGES, stream=True):
                        if chunk.choices and chunk.choices[0].delta.content:
                            texts.append(chunk.choices[0].delta.content)
                except openai.APIError as exc:
                    return texts, exc
                return texts, None

            texts, exc = await in_thread(consume)
    assert texts == ["Hello from"]  # content reached the client before the crash ...
    assert exc is not None  # ... so the failure is in-band, and the SDK raises
    assert no_codex_left(tmp_path)


async def test_disconnect_mid_answer_kills_the_process_group(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(
                tmp_path, "slow", FAKE_CODEX_DELAY_S="0.2")) as proxy:
            got_first = threading.Event()

            def read_then_hang_up() -> None:
                stream = proxy.client().chat.completions.create(
                    model="gpt-5.5", messages=MESSAGES, stream=True)
                for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        got_first.set()
                        break
                stream.close()  # the client goes away mid-answer

            await in_thread(read_then_hang_up)
            assert got_first.is_set()
            pids = pids_from(tmp_path / "pids")
            assert len(pids) == 2  # the fake and the grandchild it started
            assert await wait_until(lambda: not any(alive(p) for p in pids), within=1.0)

            def in_flight() -> int:
                return int(proxy.get("/health").json()["providers"]["openai"]["in_flight"])

            assert await in_thread(in_flight) == 0


async def test_garbage_lines_are_skipped(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "garbage")) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="gpt-5.5", messages=MESSAGES))
    assert completion.choices[0].message.content == ANSWER


async def test_no_credentials_means_no_spawn(tmp_path: Path) -> None:
    cfg = config(tmp_path, "success")
    del cfg["providers"]["openai"]["env"]["OPENAI_API_KEY"]
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg,
                             env={"HOME": str(tmp_path / "nobody")}) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(model="gpt-5.5", messages=MESSAGES)
                return info.value

            err = await in_thread(call)
    assert err.status_code == 502
    assert "codex login" in err.response.json()["error"]["message"]
    assert pids_from(tmp_path / "pids") == []  # never spawned
