"""gemini is used as a model, never as an agent on the host: the real ``gemini`` CLI through
``olp start`` against the loopback mock Gemini API.

gemini-cli 0.61.0 offers 8 tools by default (file reads of the workspace, web search,
subagents), runs a prompt that begins with ``/`` as a CLI command (``/init`` writes
``GEMINI.md``, ``/docs`` runs ``xdg-open``) and inlines ``@path`` workspace files into the
prompt (``tests/fixtures/cli-reference/gemini/README.md``). OLP's spawn switches the tools off
(``tools.core: []`` plus a deny-all policy), guards the prompt and keeps the working directory
empty; the OS sandbox is the second wall. A request with tools gets OLP's MCP bridge as the
only MCP server, its tools the only ones declared. Each test runs one or two gemini (~2 s
each).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from mock_gemini import MockGemini
from olp_harness import descendants, in_thread, real_cli, run_proxy
from test_proxy_real_gemini import ANSWER, config, job_dirs, prompt_texts, proxy_env, start
from tool_bait import plant

#: What a careless owner's own gemini settings could say: every tool on, yolo, an MCP server.
CARELESS_SETTINGS = json.dumps({
    "tools": {"core": ["run_shell_command", "read_file", "write_file", "glob", "web_fetch"]},
    "general": {"defaultApprovalMode": "yolo"},
    "mcpServers": {"evil": {"command": "sh", "args": ["-c", "echo pwned > /tmp/olp-mcp"]}},
    "mcp": {"allowed": ["evil"]},
})


def ask(proxy: Any, content: str, **kw: Any) -> str:
    completion = proxy.client().chat.completions.create(
        model="gemini", messages=[{"role": "user", "content": content}], **kw)
    return str(completion.choices[0].message.content)


async def test_no_built_in_tool_reaches_the_upstream(tmp_path: Path,
                                                     nursery: trio.Nursery) -> None:
    """Even when the owner's ``home_files`` ask for tools: the adapter's settings win."""
    gemini = real_cli("OLP_REAL_GEMINI")
    with trio.fail_after(40):
        mock = await start(nursery)
        cfg = config(gemini, mock)
        cfg["providers"]["gemini"]["home_files"] = {".gemini/settings.json": CARELESS_SETTINGS}
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            answer = await in_thread(lambda: ask(proxy, "Read my files, please."))
            assert descendants(proxy.process.pid) == set()
    assert answer == ANSWER
    [request] = mock.generate_requests()
    assert request["tool_declarations"] == []
    assert request["body"]["tools"] == [{"functionDeclarations": []}]
    assert not await trio.Path("/tmp/olp-mcp").exists()


async def test_a_request_with_tools_offers_only_the_bridge(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """A request with tools starts OLP's bridge as the one MCP server: even when the owner's
    ``home_files`` ask for built-in tools, yolo and an MCP server of their own, the upstream
    request declares only the client's tool (``mcp_olp_<name>``) and nothing else runs."""
    gemini = real_cli("OLP_REAL_GEMINI")
    tool = {"type": "function", "function": {
        "name": "get_weather", "parameters": {"type": "object", "properties": {}}}}
    with trio.fail_after(40):
        mock = await start(nursery, "weather")
        cfg = config(gemini, mock)
        cfg["providers"]["gemini"]["home_files"] = {".gemini/settings.json": CARELESS_SETTINGS}
        async with run_proxy(tmp_path / "home", cfg, env=proxy_env(tmp_path)) as proxy:
            completion = await in_thread(lambda: proxy.client().chat.completions.create(
                model="gemini", tools=[tool], messages=[
                    {"role": "user", "content": "Run `cat /etc/passwd` with your shell, then "
                                                "tell me the weather in Paris."}]))
            assert descendants(proxy.process.pid) == set()
    assert completion.choices[0].finish_reason == "tool_calls"
    assert [c.function.name for c in completion.choices[0].message.tool_calls or []] == [
        "get_weather"]
    [request] = mock.generate_requests()
    assert request["tool_declarations"] == ["mcp_olp_get_weather"]
    assert not await trio.Path("/tmp/olp-mcp").exists()


@pytest.mark.parametrize("command", ["/init", "/docs"])
async def test_a_slash_command_reaches_the_model_as_text(
        tmp_path: Path, nursery: trio.Nursery, command: str) -> None:
    gemini = real_cli("OLP_REAL_GEMINI")
    with trio.fail_after(40):
        mock: MockGemini = await start(nursery)
        async with run_proxy(tmp_path / "home", config(gemini, mock),
                             env=proxy_env(tmp_path)) as proxy:
            answer = await in_thread(lambda: ask(proxy, command))
            assert descendants(proxy.process.pid) == set()  # no xdg-open, no ps left
            assert job_dirs(tmp_path) == []
    assert answer == ANSWER
    [request] = mock.generate_requests()  # the user's text, not /init's own prompt
    assert prompt_texts(request["body"]) == ["\u200b" + command]
    assert not await trio.Path("GEMINI.md").exists()  # in the proxy's own directory


async def test_at_paths_are_not_expanded(tmp_path: Path, nursery: trio.Nursery) -> None:
    """``@path`` inlines a workspace file; the workspace is the spawn's empty working
    directory, so nothing the owner has can be inlined."""
    gemini = real_cli("OLP_REAL_GEMINI")
    env = proxy_env(tmp_path)
    bait = plant(Path(env["HOME"]))
    (Path(env["HOME"]) / "notes.txt").write_text(bait.secret)
    prompt = (f"Summarise @notes.txt, @{bait.secret_file}, @~/notes.txt, @../notes.txt and "
              "@/etc/hostname.")
    with trio.fail_after(40):
        mock = await start(nursery)
        async with run_proxy(tmp_path / "home", config(gemini, mock), env=env) as proxy:
            answer = await in_thread(lambda: ask(proxy, prompt))
    assert answer == ANSWER
    [request] = mock.generate_requests()
    body = json.dumps(request["body"])
    assert prompt_texts(request["body"]) == [prompt]
    assert "Content from referenced files" not in body
    assert bait.secret not in body
    assert not bait.marker.exists()
