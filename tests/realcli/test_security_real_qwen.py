"""qwen is used as a model, never as an agent: the real ``qwen`` CLI through ``olp start``
(bubblewrap-confined) against the loopback OpenAI-compatible mock.

Every upstream request offers ``"tools": []`` (with a client's tools: exactly OLP's bridge's
``mcp__olp__<name>``) and there is exactly one request per answer (no managed-memory side
request); a tool call the model makes anyway is a failure and runs nothing; a client's
``/init`` reaches the model as text instead of running qwen's command;
``@notes.txt`` is not expanded from any directory; an owner's careless ``home_files``
settings cannot switch the tools back on (the adapter's settings win). Each test runs one or
two qwen processes (~2-4 s each).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from olp_harness import in_thread, real_cli, run_proxy
from test_proxy_real_qwen import ANSWER, chats, config, proxy_env, start, user_text

BAIT_MARKER = "OLP-QWEN-NOTES-BAIT-8f21"
#: What a careless owner's own qwen settings could say: every tool allowed, YOLO, memory on.
CARELESS_SETTINGS = json.dumps({
    "$version": 4, "security": {"auth": {"selectedType": "openai"},
                                "folderTrust": {"enabled": False}},
    "tools": {"approvalMode": "yolo", "core": ["run_shell_command", "read_file"]},
    "permissions": {"allow": ["run_shell_command", "read_file", "write_file"]},
    "memory": {"enableManagedAutoMemory": True},
})


async def test_one_request_per_answer_and_no_tool_offered(tmp_path: Path,
                                                          nursery: trio.Nursery) -> None:
    qwen = real_cli("OLP_REAL_QWEN")
    with trio.fail_after(60):
        mock = await start(nursery)
        cfg = config(qwen, mock, home_files={".qwen/settings.json": CARELESS_SETTINGS})
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            for n in range(2):
                completion = await in_thread(lambda n=n: proxy.client().chat.completions.create(
                    model="qwen-coder",
                    messages=[{"role": "user", "content": f"Question {n}: list my files."}]))
                assert completion.choices[0].message.content == ANSWER
    requests = chats(mock)
    assert len(requests) == 2  # one per answer: no memory-agent request after it
    for request in requests:
        assert request["body"]["tools"] == []


async def test_a_tool_call_runs_nothing_and_is_not_an_answer(tmp_path: Path,
                                                             nursery: trio.Nursery) -> None:
    qwen = real_cli("OLP_REAL_QWEN")
    bait = tmp_path / f"qwen-bait-{os.getpid()}"
    with trio.fail_after(60):
        mock = await start(nursery, "success", tool_call=(
            "run_shell_command", json.dumps({"command": f"touch {bait}"})))
        async with run_proxy(tmp_path / "home", config(qwen, mock),
                             env=proxy_env(tmp_path)) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(
                        model="qwen-coder", messages=[{"role": "user", "content": "touch it"}])
                return info.value

            err = await in_thread(call)
    assert err.status_code == 503
    assert err.response.json()["error"]["code"] == "tool_call_invalid"
    assert not bait.exists()
    [request] = chats(mock)  # the denied call never went back upstream
    assert request["body"]["tools"] == []


async def test_init_and_at_file_reach_the_model_as_text(tmp_path: Path,
                                                        nursery: trio.Nursery) -> None:
    qwen = real_cli("OLP_REAL_QWEN")
    env = proxy_env(tmp_path)
    for where in (Path(env["HOME"]), tmp_path / "home", tmp_path):
        where.mkdir(parents=True, exist_ok=True)
        (where / "notes.txt").write_text(f"{BAIT_MARKER}\n")
    with trio.fail_after(60):
        mock = await start(nursery)
        async with run_proxy(tmp_path / "home", config(qwen, mock), env=env) as proxy:
            answers = []
            for text in ("/init", "Summarize @notes.txt"):
                completion = await in_thread(lambda text=text: proxy.client().chat.completions
                                             .create(model="qwen-coder",
                                                     messages=[{"role": "user",
                                                                "content": text}]))
                answers.append(completion.choices[0].message.content)
    assert answers == [ANSWER, ANSWER]  # answered by the model, not by qwen's /init
    init, at_file = (r["body"] for r in chats(mock))
    assert user_text(init).strip().endswith("/init")
    assert "QWEN.md" not in json.dumps(init)  # not /init's "analyze the project" prompt
    assert "Summarize @notes.txt" in user_text(at_file)
    for body in (init, at_file):
        assert BAIT_MARKER not in json.dumps(body)
        assert body["tools"] == []
    assert not _found(tmp_path, "QWEN.md")


async def test_the_proxy_environment_key_is_not_used(tmp_path: Path,
                                                     nursery: trio.Nursery) -> None:
    """An OPENAI_API_KEY in the proxy's own environment (another vendor's) never reaches qwen:
    with no key configured, qwen is not spawned (AUTH_MISSING)."""
    qwen = real_cli("OLP_REAL_QWEN")
    with trio.fail_after(60):
        mock = await start(nursery)
        cfg = config(qwen, mock)
        cfg["providers"]["qwen"]["env"] = {"OPENAI_BASE_URL": mock.base_url}
        env = {**proxy_env(tmp_path), "OPENAI_API_KEY": "sk-someone-elses"}
        async with run_proxy(tmp_path / "home", cfg, env=env) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(
                        model="qwen-coder", messages=[{"role": "user", "content": "hi"}])
                return info.value

            err = await in_thread(call)
    assert "BAILIAN_CODING_PLAN_API_KEY" in err.response.text
    assert chats(mock) == []




def _found(root: Path, name: str) -> list[Path]:
    return list(root.rglob(name))


async def test_with_tools_only_the_bridge_is_offered_and_a_built_in_call_runs_nothing(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """A request with tools reaches qwen through OLP's bridge: the upstream request offers
    exactly ``mcp__olp__<name>``; a model that calls qwen's shell anyway (a tool it was not
    offered) gets ``tool_call_invalid``, and nothing ran."""
    qwen = real_cli("OLP_REAL_QWEN")
    bait = tmp_path / f"qwen-bait-{os.getpid()}"
    tools: list[Any] = [{"type": "function", "function": {
        "name": "get_weather", "parameters": {"type": "object", "properties": {}}}}]
    with trio.fail_after(60):
        mock = await start(nursery, "success", tool_call=(
            "run_shell_command", json.dumps({"command": f"touch {bait}"})))
        async with run_proxy(tmp_path / "home", config(qwen, mock),
                             env=proxy_env(tmp_path)) as proxy:
            def call() -> openai.APIStatusError:
                with pytest.raises(openai.APIStatusError) as info:
                    proxy.client().chat.completions.create(
                        model="qwen-coder", tools=tools,
                        messages=[{"role": "user", "content": "Use Bash to touch it."}])
                return info.value

            err = await in_thread(call)
    assert err.status_code == 503
    assert err.response.json()["error"]["code"] == "tool_call_invalid"
    assert not bait.exists()
    [request] = chats(mock)
    assert [t["function"]["name"] for t in request["body"]["tools"]] == [
        "mcp__olp__get_weather"]
