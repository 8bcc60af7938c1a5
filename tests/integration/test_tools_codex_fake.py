"""Tool calling through ``olp start`` with the fake ``codex`` (real subprocesses; the fake
launches OLP's real MCP bridge from the ``-c mcp_servers.olp.*`` flags and handshakes it as
codex 0.171.0 does) and the official ``openai`` SDK as the client.

The registry says ``tools: true`` for codex's models, so the hop takes the request with its
tools. After the model's call the fake, like the real CLI, does not
exit (codex would go on to a second upstream request): only the proxy's kill at the call ends
it, and ``kill_grace_s`` is far longer than the wait for "nothing left", so a proxy that only
waited for the exit or the grace would fail these tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from olp_harness import (
    FAKE_CLAUDE,
    REPO,
    Proxy,
    alive,
    descendants,
    in_thread,
    pids_from,
    run_proxy,
    wait_until,
)

FAKE_CODEX = REPO / "tests" / "support" / "fakes" / "fake_codex.py"
# not the recorded name (get_weather): the fake calls the first tool the bridge listed
FORECAST: dict[str, Any] = {"type": "function", "function": {
    "name": "city_forecast", "description": "Forecast for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
ASK: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
PREAMBLE = "Let me check the weather."  # tests/fixtures/cli-reference/codex/tools/preamble
MALFORMED_FOLLOW_UP = ("Weather report: Wall time: 0.0003 seconds\n"
                       "Output: | err: EOF while parsing a string at line 1 column 13")
KILL_GRACE_S = 120  # a tool call must not wait for it: the proxy kills codex at the call


def config(tmp_path: Path, scenario: str, *fallback: dict[str, Any], **env: str,
           ) -> dict[str, Any]:
    providers: dict[str, Any] = {
        "enabled": {"openai": True, "anthropic": bool(fallback), "mistral": False},
        "openai": {"binary": str(FAKE_CODEX), "max_concurrent": 2,
                   "env": {"FAKE_CODEX_SCENARIO": scenario, "OPENAI_API_KEY": "sk-fake",
                           "FAKE_CODEX_PIDFILE": str(tmp_path / "pids"),
                           "FAKE_CODEX_MCP_PIDFILE": str(tmp_path / "mcp-pids"),
                           "FAKE_CODEX_MCP_LOG": str(tmp_path / "mcp.jsonl"), **env},
                   "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 60}}}
    if fallback:
        providers["anthropic"] = {
            "binary": str(FAKE_CLAUDE), "max_concurrent": 2,
            "env": {"FAKE_CLAUDE_SCENARIO": "success", "CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"},
            "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 60}}
    return {"providers": providers,
            "routing": {"chains": {"agent": [
                # OPENAI_API_KEY makes the provider metered: the entry consents to spend
                {"provider": "openai", "model": "gpt-5.5", "metered": True},
                *fallback]}},
            "server": {"kill_grace_s": KILL_GRACE_S}}


async def nothing_left(proxy: Proxy, tmp_path: Path) -> bool:
    """No process below the proxy, and every fake codex, its grandchild and every bridge it
    launched gone (a bridge orphaned by a kill of the fake alone would not be a descendant)."""
    pids = pids_from(tmp_path / "pids") + pids_from(tmp_path / "mcp-pids")
    return await wait_until(
        lambda: not descendants(proxy.process.pid) and not any(alive(p) for p in pids),
        within=15)


def mcp_methods(tmp_path: Path) -> list[str]:
    """The methods the fake sent to the bridges, in order (every spawn)."""
    lines = (tmp_path / "mcp.jsonl").read_text().splitlines()
    return [m["msg"]["method"] for m in map(json.loads, lines)
            if m["dir"] == "in" and "method" in m["msg"]]


def ask(proxy: Proxy, **kwargs: Any) -> Any:
    return proxy.client().chat.completions.create(model="agent", messages=ASK,
                                                  tools=[FORECAST], **kwargs)


def stream(proxy: Proxy, **kwargs: Any) -> list[Any]:
    return list(ask(proxy, stream=True, **kwargs))


def assert_one_call(calls: Any) -> None:
    assert calls is not None and len(calls) == 1
    call = calls[0]
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "city_forecast"  # the client's name, no mcp__olp prefix
    assert isinstance(call.function.arguments, str)
    assert json.loads(call.function.arguments) == {"city": "Paris"}


def streamed_calls(chunks: list[Any]) -> tuple[dict[int, Any], dict[int, str]]:
    """The first delta of each call index (it must carry id and name) and each index's
    concatenated arguments."""
    first: dict[int, Any] = {}
    args: dict[int, str] = {}
    for chunk in chunks:
        for d in (chunk.choices[0].delta.tool_calls or ()) if chunk.choices else ():
            if d.index not in first:
                first[d.index] = d
                assert d.id and d.id.startswith("call_") and d.type == "function"
                assert d.function and d.function.name == "city_forecast"
            else:
                assert d.id is None
            args[d.index] = args.get(d.index, "") + ((d.function and d.function.arguments) or "")
    return first, args


def finish_reasons(chunks: list[Any]) -> list[str]:
    return [ch.choices[0].finish_reason for ch in chunks
            if ch.choices and ch.choices[0].finish_reason]


async def test_non_streaming_call(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success")) as proxy:
            reply = await in_thread(lambda: ask(proxy))
            assert await nothing_left(proxy, tmp_path)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert_one_call(choice.message.tool_calls)
    # the bridge was handshaken as codex does, and no tool was ever executed through it
    assert mcp_methods(tmp_path) == ["initialize", "notifications/initialized", "tools/list"]
    assert len(pids_from(tmp_path / "pids")) == 2 and len(pids_from(tmp_path / "mcp-pids")) == 1


async def test_streamed_call_is_keyed_by_index_with_id_and_name_first(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success")) as proxy:
            chunks = await in_thread(lambda: stream(proxy))
            assert await nothing_left(proxy, tmp_path)
    first, args = streamed_calls(chunks)
    assert sorted(first) == [0]
    assert first[0].function.arguments in (None, "")  # id and name come before arguments
    assert json.loads(args[0]) == {"city": "Paris"}
    assert finish_reasons(chunks) == ["tool_calls"]
    assert not any(ch.choices and ch.choices[0].delta.content for ch in chunks)


async def test_parallel_calls_end_at_the_first(tmp_path: Path) -> None:
    """codex prints nothing that ends the model's message, so the first call ends the turn
    (the model makes the next one on the next turn)."""
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "tools_parallel")) as proxy:
            reply = await in_thread(lambda: ask(proxy))
            assert await nothing_left(proxy, tmp_path)
    assert reply.choices[0].finish_reason == "tool_calls"
    assert_one_call(reply.choices[0].message.tool_calls)


async def test_text_preamble_is_kept_as_content(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "tools_preamble")) as proxy:
            reply = await in_thread(lambda: ask(proxy))
            chunks = await in_thread(lambda: stream(proxy))
            assert await nothing_left(proxy, tmp_path)
    assert reply.choices[0].finish_reason == "tool_calls"
    assert reply.choices[0].message.content == PREAMBLE
    assert_one_call(reply.choices[0].message.tool_calls)
    kinds = [("text" if ch.choices[0].delta.content else "call")
             for ch in chunks if ch.choices and (ch.choices[0].delta.content
                                                 or ch.choices[0].delta.tool_calls)]
    assert kinds[0] == "text" and set(kinds[1:]) == {"call"}  # the text first, then the call
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == PREAMBLE
    first, args = streamed_calls(chunks)
    assert sorted(first) == [0] and json.loads(args[0]) == {"city": "Paris"}
    assert finish_reasons(chunks) == ["tool_calls"]


async def test_malformed_arguments_are_prose_under_auto_and_unmet_under_required(
        tmp_path: Path) -> None:
    """codex prints no call whose arguments are not JSON: it reports the parse error to the
    model itself and prints the follow-up's prose (recorded)."""
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "tools_malformed")) as proxy:
            reply = await in_thread(lambda: ask(proxy, tool_choice="auto"))
            with pytest.raises(openai.APIStatusError) as err:
                await in_thread(lambda: ask(proxy, tool_choice="required"))
            assert await nothing_left(proxy, tmp_path)
    assert reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.content == MALFORMED_FOLLOW_UP
    assert not reply.choices[0].message.tool_calls
    assert err.value.status_code == 503 and err.value.code == "tool_choice_unmet"


async def test_cli_ignoring_the_tools_is_prose_under_auto_and_unmet_under_required(
        tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "tools_ignore")) as proxy:
            reply = await in_thread(lambda: ask(proxy, tool_choice="auto"))
            with pytest.raises(openai.APIStatusError) as err:
                await in_thread(lambda: stream(proxy, tool_choice="required"))
            assert await nothing_left(proxy, tmp_path)
    assert reply.choices[0].message.content == "Hello from the mock upstream."
    assert reply.choices[0].finish_reason == "stop"
    assert err.value.status_code == 503 and err.value.code == "tool_choice_unmet"


async def test_the_bridge_lists_the_clients_tools_and_none_means_no_bridge(
        tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(
                tmp_path, "tools_ignore", FAKE_CODEX_ECHO="1")) as proxy:
            offered = await in_thread(lambda: ask(proxy))
            withheld = await in_thread(lambda: ask(proxy, tool_choice="none"))
            assert await nothing_left(proxy, tmp_path)
    echo = json.loads(offered.choices[0].message.content)
    function = FORECAST["function"]
    assert echo["mcp_servers"] == {"olp": {"status": "connected", "required": True, "tools": [
        {"name": function["name"], "description": function["description"],
         "inputSchema": function["parameters"]}]}}
    assert [c.split("=")[0] for c in echo["config"] if c.startswith("mcp_servers.")] == [
        "mcp_servers.olp.command", "mcp_servers.olp.args", "mcp_servers.olp.required"]
    assert not any("Paris" in c for c in echo["config"])  # no client text on argv
    assert json.loads(withheld.choices[0].message.content)["mcp_servers"] == {}
    assert len(pids_from(tmp_path / "mcp-pids")) == 1  # one bridge: only for the first


async def test_second_turn_is_answered_from_the_rendered_result(tmp_path: Path) -> None:
    history = [*ASK, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "city_forecast", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 22 C"}]
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success")) as proxy:
            reply = await in_thread(lambda: proxy.client().chat.completions.create(
                model="agent", messages=history, tools=[FORECAST]))
            assert await nothing_left(proxy, tmp_path)
    assert reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.content == "Weather report: Sunny, 22 C"  # recorded
    assert not reply.choices[0].message.tool_calls


async def test_bridge_failure_is_an_error_not_a_silent_answer(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "tools_bridge_crash")) as proxy:
            with pytest.raises(openai.APIStatusError) as err:
                await in_thread(lambda: ask(proxy))
            assert await nothing_left(proxy, tmp_path)
    assert err.value.status_code == 503 and err.value.code == "tool_bridge_failed"
    assert len(pids_from(tmp_path / "mcp-pids")) == 1  # it was launched, then died


async def test_bridge_failure_falls_back_to_the_next_hop(tmp_path: Path) -> None:
    claude = {"provider": "anthropic", "model": "claude-sonnet-4-6"}
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home",
                             config(tmp_path, "tools_bridge_crash", claude)) as proxy:
            raw = await in_thread(
                lambda: proxy.client().chat.completions.with_raw_response.create(
                    model="agent", messages=ASK, tools=[FORECAST]))
            assert await nothing_left(proxy, tmp_path)
    assert raw.headers["x-olp-provider-used"] == "anthropic"
    assert raw.headers["x-olp-fallback-hops"] == "1"
    reply = raw.parse()
    assert reply.choices[0].finish_reason == "tool_calls"
    calls = reply.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == ["city_forecast"]
