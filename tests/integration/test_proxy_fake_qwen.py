"""``olp start`` over a real socket with the ``qwen`` provider and a fake ``qwen`` that replays
the real CLI's transcripts (tests/support/fakes/fake_qwen.py). The official ``openai`` SDK is the
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

FAKE_QWEN = REPO / "tests" / "support" / "fakes" / "fake_qwen.py"
ANSWER = "Hello from the mock upstream."
MODEL = "qwen3-coder-plus"  # the registry's model behind the alias "qwen-coder"
KEY = "sk-fake-qwen-0000"
MESSAGES: list[Any] = [{"role": "system", "content": "Be terse."},
                       {"role": "user", "content": "Say hello in four words."}]
STREAM_MESSAGES: list[Any] = [*MESSAGES[:1], {"role": "user", "content": "Stream a hello."}]


def config(tmp_path: Path, scenario: str, *, key: bool = True, **env: str) -> dict[str, Any]:
    provider_env = {"FAKE_QWEN_SCENARIO": scenario, "FAKE_QWEN_PIDFILE": str(tmp_path / "pids"),
                    # an owner's env cannot turn qwen's hours-long retries back on
                    "QWEN_CODE_UNATTENDED_RETRY": "1", **env}
    if key:
        provider_env["OPENAI_API_KEY"] = KEY
    return {"providers": {
        "enabled": {"anthropic": False, "openai": False, "mistral": False, "qwen": True},
        "qwen": {"binary": str(FAKE_QWEN), "consent": True, "metered": True,
                 "max_concurrent": 2, "env": provider_env,
                 "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 30}}},
        "server": {"kill_grace_s": 1}}


def proxy_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "user-home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home)}


async def test_non_streaming_answer_usage_and_headers(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success"),
                             env=proxy_env(tmp_path)) as proxy:
            response = await in_thread(
                lambda: proxy.client().chat.completions.with_raw_response.create(
                    model="qwen-coder", messages=MESSAGES))
            logs = list(proxy.logs)
    completion = response.parse()
    assert completion.choices[0].message.content == ANSWER
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (21, 4)
    assert response.headers["x-olp-provider-used"] == "qwen"
    assert response.headers["x-olp-model-used"] == MODEL
    assert "Say hello" not in json.dumps(logs)  # prompts are never logged
    pids = pids_from(tmp_path / "pids")
    assert len(pids) == 2 and not any(alive(p) for p in pids)


async def test_stream_is_token_deltas_sent_as_they_come(tmp_path: Path) -> None:
    """The fake holds everything after its first delta until the client has received it: a
    proxy that buffered would hang here."""
    hold = tmp_path / "hold"
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success",
                                                       FAKE_QWEN_HOLD_FILE=str(hold)),
                             env=proxy_env(tmp_path)) as proxy:
            def consume() -> tuple[list[str], str | None, Any]:
                texts, finish, usage = [], None, None
                for chunk in proxy.client().chat.completions.create(
                        model="qwen-coder", messages=STREAM_MESSAGES, stream=True,
                        stream_options={"include_usage": True}):
                    if chunk.choices and chunk.choices[0].delta.content:
                        texts.append(chunk.choices[0].delta.content)
                        hold.touch()
                    if chunk.choices and chunk.choices[0].finish_reason:
                        finish = chunk.choices[0].finish_reason
                    usage = chunk.usage or usage
                return texts, finish, usage

            texts, finish, usage = await in_thread(consume)
    assert texts == ["Hello", " from", " the mock", " upstream."]
    assert finish == "stop"
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (21, 4)


async def test_prompt_on_stdin_system_in_a_home_file_and_every_tool_denied(
        tmp_path: Path) -> None:
    argv_file = tmp_path / "argv.json"
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(
                tmp_path, "success", FAKE_QWEN_ECHO="1", FAKE_QWEN_ARGV_FILE=str(argv_file)),
                env=proxy_env(tmp_path)) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="qwen-coder", messages=MESSAGES))
    argv = json.loads(argv_file.read_text())
    assert argv[1:4] == ["-o", "stream-json", "--include-partial-messages"]
    assert argv[-2:] == ["-m", MODEL]
    assert not any("Say hello" in a or "Be terse" in a for a in argv)
    echo = json.loads(completion.choices[0].message.content or "")
    assert echo["prompt"] == "Say hello in four words."
    assert echo["system"] == "Be terse."
    spawn_home = Path(echo["home"])
    assert echo["system_md"] == str(spawn_home / "olp" / "system.md")
    assert echo["cwd"] == str(spawn_home.parent / "work") and echo["cwd_files"] == []
    assert echo["tools_offered"] == [] and echo["deny"] == 67 and echo["max_retries"] == 0
    assert "OPENAI_API_KEY" in echo["env_keys"]
    assert not {"QWEN_OAUTH", "QWEN_HOME"} & set(echo["env_keys"])
    assert echo["unattended_retry"] == "false"
    assert not await trio.Path(echo["cwd"]).exists()  # the job's directories are removed


async def test_a_slash_prompt_reaches_the_model_as_text(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success", FAKE_QWEN_ECHO="1"),
                             env=proxy_env(tmp_path)) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="qwen-coder", messages=[{"role": "user", "content": "/init"}]))
    echo = json.loads(completion.choices[0].message.content or "")
    assert echo["prompt"] == "\u200b/init"


async def test_no_key_is_auth_missing_without_a_spawn(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success", key=False),
                             env={**proxy_env(tmp_path), "OPENAI_API_KEY": "sk-other"}) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(model="qwen-coder",
                                                           messages=MESSAGES)
                return info.value

            err = await in_thread(call)
    assert err.status_code == 502
    assert "BAILIAN_CODING_PLAN_API_KEY" in err.response.json()["error"]["message"]
    assert pids_from(tmp_path / "pids") == []  # checked before spawning


@pytest.mark.parametrize(("scenario", "status", "code"), [
    ("rate_limit", 429, "rate_limited"),
    ("auth", 502, "upstream_auth_failed"),
    ("tool_call", 503, "tool_call_invalid"),
])
async def test_upstream_failures_are_real_statuses_never_content(
        tmp_path: Path, scenario: str, status: int, code: str) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, scenario),
                             env=proxy_env(tmp_path)) as proxy:
            for stream in (False, True):
                def call(stream: bool = stream) -> openai.APIStatusError:
                    with pytest.raises(openai.APIStatusError) as info:
                        answer = proxy.client().chat.completions.create(
                            model="qwen-coder", messages=MESSAGES, stream=stream)
                        if stream:
                            for _ in answer:
                                pass
                    return info.value

                err = await in_thread(call)
                assert err.status_code == status
                body = err.response.json()
                assert body["error"]["code"] == code
                assert "Possible quota limitations" not in body["error"]["message"]
    pids = pids_from(tmp_path / "pids")
    assert len(pids) == 4 and not any(alive(p) for p in pids)


async def test_a_hung_qwen_is_killed_at_the_idle_deadline(tmp_path: Path) -> None:
    cfg = config(tmp_path, "hang")
    cfg["providers"]["qwen"]["timeouts"] = {"first_output_s": 3, "idle_s": 2, "total_s": 10}
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(model="qwen-coder",
                                                           messages=MESSAGES)
                return info.value

            err = await in_thread(call)
            assert err.status_code == 503
            assert err.response.json()["error"]["code"] in ("first_output_timeout",
                                                            "idle_timeout")
            pids = pids_from(tmp_path / "pids")
            assert len(pids) == 2
            assert await wait_until(lambda: not any(alive(p) for p in pids), within=3.0)


async def test_client_gone_mid_answer_kills_the_process_group(tmp_path: Path) -> None:
    hold = tmp_path / "never"  # the fake waits after its first delta
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success",
                                                       FAKE_QWEN_HOLD_FILE=str(hold)),
                             env=proxy_env(tmp_path)) as proxy:
            def first_delta() -> None:
                stream = proxy.client().chat.completions.create(
                    model="qwen-coder", messages=MESSAGES, stream=True)
                with stream:
                    for chunk in stream:
                        if chunk.choices and chunk.choices[0].delta.content:
                            break  # ... and the client hangs up (the with closes it)

            await in_thread(first_delta)
            pids = pids_from(tmp_path / "pids")
            assert len(pids) == 2
            assert await wait_until(lambda: not any(alive(p) for p in pids), within=5.0), \
                "qwen outlived the client's disconnect"

            def in_flight() -> int:
                return int(proxy.get("/health").json()["providers"]["qwen"]["in_flight"])

            assert await in_thread(in_flight) == 0


async def test_a_tool_call_through_the_bridge_is_answered_and_the_group_killed(
        tmp_path: Path) -> None:
    """A request with tools: OLP's bridge is configured (the fake lists its tools in
    ``system/init`` and replays the real ``tools/single`` transcript); the call comes back as
    OpenAI ``tool_calls`` and the spawn's whole group is gone."""
    argv_file = tmp_path / "argv.json"
    tools: list[Any] = [{"type": "function", "function": {
        "name": "get_weather", "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}}}}}]
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(
                tmp_path, "bridge_call", FAKE_QWEN_ARGV_FILE=str(argv_file)),
                env=proxy_env(tmp_path)) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="qwen-coder", tools=tools,
                messages=[{"role": "user", "content": "Weather in Paris?"}]))
            pids = pids_from(tmp_path / "pids")
            assert await wait_until(lambda: not any(alive(p) for p in pids), within=5.0)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls or []
    assert call.id == "call_mock000001_0" and call.type == "function"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    argv = json.loads(argv_file.read_text())
    assert argv[-4:] == ["-m", MODEL, "--allowed-mcp-server-names", "olp"]
    assert not any("Paris" in a for a in argv)
