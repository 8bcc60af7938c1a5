"""Reasoning through ``olp start`` with the real ``claude``, ``codex``, ``gemini`` and ``qwen``
(issue #27): the effort a client asks for reaches the upstream request, and the thinking the
upstream sends comes back; ``vibe-acp`` driven directly with OLP's environment for a level.

claude answers from the mock Anthropic API's ``thinking`` scenario (a thinking block before the
text, its text only when the request's ``thinking.display`` lets the API send it), codex from
the mock Responses API's ``reasoning`` scenario (a reasoning item whose summary comes when the
request asks for one). gemini takes the effort through its settings and prints no thoughts;
qwen through its settings (against the OpenAI-compatible mock), vibe through its model entry's
``thinking`` (the mock Mistral API's ``thinking`` option streams thinking chunks).
What each CLI does with OLP's flags was measured in
``tests/fixtures/cli-reference/{claude,codex,gemini}/reasoning/``.

The client side uses the official SDKs: the openai SDK's chat ``reasoning_effort`` (the answer's
``reasoning_content`` and ``completion_tokens_details.reasoning_tokens``), its Responses
``reasoning`` (a ``reasoning`` output item with ``summary_text``), and the anthropic SDK's
Messages ``thinking`` (a ``thinking`` content block).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import trio
from mock_anthropic import MockAnthropic
from mock_anthropic import serve_mock as serve_anthropic
from mock_anthropic._thinking import DEFAULT_THINKING
from mock_gemini import MockGemini
from mock_gemini import serve_mock as serve_gemini
from mock_mistral import MockMistral
from mock_mistral import serve_mock as serve_mistral
from mock_openai_responses import MockResponses
from mock_openai_responses import serve_mock as serve_responses
from mock_openai_responses._reasoning import DEFAULT_SUMMARY
from olp_harness import in_thread, real_cli, run_proxy
from test_proxy_real_claude import config as claude_config
from test_proxy_real_codex import config as codex_config
from test_proxy_real_codex import proxy_env
from test_proxy_real_gemini import config as gemini_config
from test_proxy_real_gemini import proxy_env as gemini_env
from test_proxy_real_qwen import chats as qwen_chats
from test_proxy_real_qwen import config as qwen_config
from test_proxy_real_qwen import proxy_env as qwen_env
from test_proxy_real_qwen import start as start_qwen_mock
from test_vibe_acp_real import answer as vibe_answer
from test_vibe_acp_real import main_calls as vibe_main_calls
from test_vibe_acp_real import vibe_config as vibe_acp_config

from olp.actors._cli_runner import CliConfig, CliRunner
from olp.actors._process import ProcessSpawner, SpawnSpec
from olp.ir import Effort, Reasoning, ReasoningDelta, Stop, TextDelta
from olp.providers.vibe import ADAPTER as VIBE
from olp.providers.vibe._acp import AcpServer, acp_binary, server_env

ANSWER = "Hello from the mock upstream."
THOUGHT = "".join(DEFAULT_THINKING)
[SUMMARY] = DEFAULT_SUMMARY
THOUGHT_PARTS = tuple(DEFAULT_THINKING)


def messages(text: str) -> list[Any]:
    # each request its own text: an identical one could be answered from OLP's cache
    return [{"role": "system", "content": "You are terse."}, {"role": "user", "content": text}]


async def start_anthropic(nursery: trio.Nursery) -> MockAnthropic:
    mock: MockAnthropic = await nursery.start(
        lambda task_status: serve_anthropic(scenario="thinking", task_status=task_status))
    return mock


async def start_responses(nursery: trio.Nursery) -> MockResponses:
    mock: MockResponses = await nursery.start(
        lambda task_status: serve_responses(scenario="reasoning", task_status=task_status))
    return mock


def chat_stream(client: Any, model: str, text: str, effort: str) -> tuple[str, str, Any]:
    """(content, reasoning_content, usage) of a streamed chat completion."""
    content, reasoning, usage = [], [], None
    for chunk in client.chat.completions.create(
            model=model, messages=messages(text), reasoning_effort=effort, stream=True,
            stream_options={"include_usage": True}):
        if chunk.choices:
            delta = chunk.choices[0].delta
            content.append(delta.content or "")
            reasoning.append((delta.model_extra or {}).get("reasoning_content") or "")
        if chunk.usage:
            usage = chunk.usage
    return "".join(content), "".join(reasoning), usage


def reasoning_tokens(usage: Any) -> int | None:
    details = getattr(usage, "completion_tokens_details", None)
    return None if details is None else details.reasoning_tokens


# -- claude -------------------------------------------------------------------------------

async def test_claude_chat_effort_goes_upstream_and_thinking_comes_back(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    with trio.fail_after(90):
        mock = await start_anthropic(nursery)
        async with run_proxy(tmp_path / "home", claude_config(claude, mock)) as proxy:
            streamed = await in_thread(lambda: chat_stream(
                proxy.client(), "sonnet", "Say hello in four words.", "minimal"))
            whole = await in_thread(lambda: proxy.client().chat.completions.create(
                model="sonnet", messages=messages("Say hello again."), reasoning_effort="high"))
            off = await in_thread(lambda: proxy.client().chat.completions.create(
                model="sonnet", messages=messages("Say hello once more."),
                reasoning_effort="none"))
    first, second, third = (r["body"] for r in mock.requests)
    # in: minimal → claude's nearest level, low; a chat effort asks for the thinking back
    assert first["output_config"] == {"effort": "low"}
    assert first["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert second["output_config"] == {"effort": "high"}
    assert third["thinking"] == {"type": "disabled"}
    # out (the HTTP encoders of issue #27)
    content, reasoning, usage = streamed
    assert content == ANSWER and reasoning == THOUGHT
    assert reasoning_tokens(usage) == 5
    message = whole.choices[0].message
    assert message.content == ANSWER
    assert (message.model_extra or {}).get("reasoning_content") == THOUGHT
    assert off.choices[0].message.content == ANSWER
    assert not (off.choices[0].message.model_extra or {}).get("reasoning_content")


async def test_claude_messages_thinking_blocks(tmp_path: Path, nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    with trio.fail_after(90):
        mock = await start_anthropic(nursery)
        async with run_proxy(tmp_path / "home", claude_config(claude, mock)) as proxy:
            sonnet = await in_thread(lambda: proxy.anthropic_client().messages.create(
                model="sonnet", max_tokens=8000, messages=messages("Say hello.")[1:],
                thinking={"type": "enabled", "budget_tokens": 2048}))
            haiku = await in_thread(lambda: proxy.anthropic_client().messages.create(
                model="haiku", max_tokens=8000, messages=messages("Say hi.")[1:],
                thinking={"type": "enabled", "budget_tokens": 2048}))
    first, second = (r["body"] for r in mock.requests)
    # in: a 2048-token budget is "low"; sonnet takes the effort, haiku the budget itself
    assert first["output_config"] == {"effort": "low"}
    assert first["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 2048,
                                  "display": "summarized"}
    # out: a thinking block before the text (OLP cannot sign it: no vendor signature)
    for answer in (sonnet, haiku):
        kinds = [block.type for block in answer.content]
        assert kinds == ["thinking", "text"], kinds
        assert answer.content[0].thinking == THOUGHT
        assert answer.content[1].text == ANSWER


# -- codex --------------------------------------------------------------------------------

async def test_codex_chat_effort_goes_upstream_and_summary_comes_back(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(90):
        mock = await start_responses(nursery)
        async with run_proxy(tmp_path / "home", codex_config(codex, mock),
                             env=proxy_env(tmp_path)) as proxy:
            streamed = await in_thread(lambda: chat_stream(
                proxy.client(), "gpt-5.5", "Say hello in four words.", "high"))
            minimal = await in_thread(lambda: proxy.client().chat.completions.create(
                model="gpt-5.5", messages=messages("Say hello again."),
                reasoning_effort="minimal"))
    first, second = (r["body"] for r in mock.requests)
    assert first["reasoning"] == {"effort": "high", "summary": "auto"}
    assert second["reasoning"] == {"effort": "low", "summary": "auto"}  # minimal → low
    content, reasoning, usage = streamed
    assert content == ANSWER and reasoning == SUMMARY
    assert reasoning_tokens(usage) == 5
    message = minimal.choices[0].message
    assert message.content == ANSWER
    assert (message.model_extra or {}).get("reasoning_content") == SUMMARY


async def test_codex_responses_reasoning_item(tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(90):
        mock = await start_responses(nursery)
        async with run_proxy(tmp_path / "home", codex_config(codex, mock),
                             env=proxy_env(tmp_path)) as proxy:
            response = await in_thread(lambda: proxy.client().responses.create(
                model="gpt-5.5", input="Say hello in four words.",
                reasoning={"effort": "low", "summary": "detailed"}))
    [request] = mock.requests
    assert request["body"]["reasoning"] == {"effort": "low", "summary": "detailed"}
    kinds = [item.type for item in response.output]
    assert kinds == ["reasoning", "message"], kinds
    assert [part.text for part in response.output[0].summary] == [SUMMARY]
    assert response.output_text == ANSWER
    assert response.usage is not None
    assert response.usage.output_tokens_details.reasoning_tokens == 5


# -- gemini -------------------------------------------------------------------------------

async def test_gemini_effort_goes_upstream(tmp_path: Path, nursery: trio.Nursery) -> None:
    gemini = real_cli("OLP_REAL_GEMINI")
    with trio.fail_after(90):
        mock: MockGemini = await nursery.start(
            lambda task_status: serve_gemini(scenario="success", task_status=task_status))
        async with run_proxy(tmp_path / "home", gemini_config(gemini, mock),
                             env=gemini_env(tmp_path)) as proxy:
            answer = await in_thread(lambda: proxy.client().chat.completions.create(
                model="gemini", messages=messages("Say hello in four words."),
                reasoning_effort="low"))
    [request] = mock.requests
    assert request["body"]["generationConfig"]["thinkingConfig"] == {
        "includeThoughts": True, "thinkingBudget": 4096}  # gemini-2.5-pro: a budget
    assert answer.choices[0].message.content == ANSWER
    assert not (answer.choices[0].message.model_extra or {}).get("reasoning_content")


# -- the other dialects, streamed and not ------------------------------------------------

def responses_stream(client: Any, model: str, text: str, reasoning: dict[str, str]
                     ) -> tuple[list[str], str]:
    """(the reasoning summary texts, the output text) of a streamed Responses answer, read
    through the SDK's own stream (it checks the events' order and indexes)."""
    with client.responses.stream(model=model, input=text, reasoning=reasoning) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    summaries = [part.text for item in final.output if item.type == "reasoning"
                 for part in item.summary]
    return summaries, final.output_text


def messages_stream(client: Any, model: str, text: str, thinking: dict[str, Any]
                    ) -> tuple[str, str]:
    """(thinking, text) of a streamed Messages answer, through the SDK's own stream."""
    with client.messages.stream(model=model, max_tokens=8000, thinking=thinking,
                                messages=[{"role": "user", "content": text}]) as stream:
        thought = "".join(e.thinking for e in stream if e.type == "thinking")
        final = stream.get_final_message()
    return thought, "".join(b.text for b in final.content if b.type == "text")


async def test_claude_through_responses_and_streamed_messages(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    with trio.fail_after(90):
        mock = await start_anthropic(nursery)
        async with run_proxy(tmp_path / "home", claude_config(claude, mock)) as proxy:
            response = await in_thread(lambda: proxy.client().responses.create(
                model="sonnet", input="Say hello in four words.",
                reasoning={"effort": "high", "summary": "detailed"}))
            streamed = await in_thread(lambda: responses_stream(
                proxy.client(), "sonnet", "Say hello again.", {"effort": "medium",
                                                              "summary": "auto"}))
            thought, text = await in_thread(lambda: messages_stream(
                proxy.anthropic_client(), "sonnet", "Say hi.",
                {"type": "enabled", "budget_tokens": 20000}))
    first, second, third = (r["body"] for r in mock.requests)
    assert first["output_config"] == {"effort": "high"}
    assert second["output_config"] == {"effort": "medium"}
    assert third["output_config"] == {"effort": "high"}  # a 20,000-token budget is "high"
    assert [item.type for item in response.output] == ["reasoning", "message"]
    assert [part.text for part in response.output[0].summary] == [THOUGHT]
    assert response.output_text == ANSWER
    assert streamed == ([THOUGHT], ANSWER)
    assert (thought, text) == (THOUGHT, ANSWER)


async def test_codex_through_messages_and_streamed_responses(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    codex = real_cli("OLP_REAL_CODEX")
    with trio.fail_after(90):
        mock = await start_responses(nursery)
        async with run_proxy(tmp_path / "home", codex_config(codex, mock),
                             env=proxy_env(tmp_path)) as proxy:
            answer = await in_thread(lambda: proxy.anthropic_client().messages.create(
                model="gpt-5.5", max_tokens=8000, messages=messages("Say hello.")[1:],
                thinking={"type": "enabled", "budget_tokens": 2048}))
            thought, text = await in_thread(lambda: messages_stream(
                proxy.anthropic_client(), "gpt-5.5", "Say hi.", {"type": "adaptive"}))
            streamed = await in_thread(lambda: responses_stream(
                proxy.client(), "gpt-5.5", "Say hello again.", {"effort": "high",
                                                               "summary": "concise"}))
    first, second, third = (r["body"] for r in mock.requests)
    assert first["reasoning"]["effort"] == "low"  # a 2,048-token budget is "low"
    assert "effort" not in second["reasoning"] or second["reasoning"]["effort"] != "none"
    assert third["reasoning"] == {"effort": "high", "summary": "concise"}
    assert [block.type for block in answer.content] == ["thinking", "text"]
    assert answer.content[0].thinking == SUMMARY and answer.content[1].text == ANSWER
    assert (thought, text) == (SUMMARY, ANSWER)
    assert streamed == ([SUMMARY], ANSWER)


# -- qwen ---------------------------------------------------------------------------------

async def test_qwen_effort_goes_upstream(tmp_path: Path, nursery: trio.Nursery) -> None:
    """qwen-plus (qwen3.7-plus) takes none and high (the Coding Plan's thinking switch): low
    becomes high. An OpenAI-compatible host gets qwen's ``reasoning.effort``; a DashScope one
    (the mock declared as DashScope's proxy, ``DASHSCOPE_PROXY_BASE_URL``) ``enable_thinking``.
    What qwen sends for each: ``tests/fixtures/cli-reference/qwen/reasoning/``."""
    qwen = real_cli("OLP_REAL_QWEN")
    with trio.fail_after(120):
        mock = await start_qwen_mock(nursery)
        async with run_proxy(tmp_path / "home", qwen_config(qwen, mock),
                             env=qwen_env(tmp_path)) as proxy:
            for text, effort in (("Say hello.", "high"), ("Say hi.", "low"),
                                 ("Say hey.", "none")):
                answer = await in_thread(lambda t=text, e=effort: proxy.client().chat.completions
                                         .create(model="qwen-plus", messages=messages(t),
                                                 reasoning_effort=e))
                assert answer.choices[0].message.content == ANSWER
        high, low, none = (r["body"] for r in qwen_chats(mock))
        assert high["reasoning"] == {"effort": "high"} and "enable_thinking" not in high
        assert low["reasoning"] == {"effort": "high"}  # low → the model's nearest level
        assert "reasoning" not in none
        assert none["chat_template_kwargs"] == {"enable_thinking": False}

        dashscope = await start_qwen_mock(nursery)
        config = qwen_config(qwen, dashscope)
        config["providers"]["qwen"]["env"]["DASHSCOPE_PROXY_BASE_URL"] = dashscope.base_url
        async with run_proxy(tmp_path / "home2", config, env=qwen_env(tmp_path)) as proxy:
            for text, effort in (("Say hello.", "medium"), ("Say hi.", "none")):
                await in_thread(lambda t=text, e=effort: proxy.client().chat.completions
                                .create(model="qwen-plus", messages=messages(t),
                                        reasoning_effort=e))
        on, off = (r["body"] for r in qwen_chats(dashscope))
        assert on["enable_thinking"] is True and "reasoning" not in on
        assert off["enable_thinking"] is False


# -- vibe ---------------------------------------------------------------------------------

async def test_vibe_acp_thinking_level_goes_upstream_and_thinking_comes_back(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """A ``vibe-acp`` server started with OLP's environment for a level (the warm path; the
    registry's devstral models take no level, so no request through ``olp start`` reaches
    vibe with one): ``reasoning_effort`` upstream, and the mock's thinking chunks come back as
    ``agent_thought_chunk`` → :class:`ReasoningDelta`."""
    binary = acp_binary(real_cli("OLP_REAL_VIBE"))
    mock: MockMistral = await nursery.start(lambda task_status: serve_mistral(
        scenario="success", thinking=list(THOUGHT_PARTS), task_status=task_status))
    runner = CliRunner(VIBE, ProcessSpawner(kill_grace=1.0),
                       CliConfig(binary=binary, env={"MISTRAL_API_KEY": "mock-key-0000"},
                                 proxy_env=dict(os.environ)))
    results = {}
    efforts: tuple[Effort, ...] = ("high", "none")
    with trio.fail_after(120):
        for effort in efforts:
            home, work = tmp_path / effort / "home", tmp_path / effort / "work"
            (home / "tmp").mkdir(parents=True)
            (home / ".vibe").mkdir()
            work.mkdir()
            (home / ".vibe" / "config.toml").write_text(vibe_acp_config(mock))
            env = {**runner.environment(home),
                   **server_env("mistral-vibe-cli-latest", home / ".vibe",
                                Reasoning(effort=effort))}
            spec = SpawnSpec(argv=[binary], stdin=None, env=env, cwd=work)
            async with ProcessSpawner(kill_grace=1.0).open(spec) as process, \
                    trio.open_nursery() as inner:
                server = AcpServer(process, client_version="test")
                await inner.start(server.serve)
                results[effort] = await vibe_answer(await server.new_session(work),
                                                    "Say hello in four words.")
                inner.cancel_scope.cancel()
    high, none = (r["body"] for r in vibe_main_calls(mock))
    assert high["reasoning_effort"] == "high" and none["reasoning_effort"] == "none"
    for events, terminal, returncode in results.values():
        assert returncode == 0 and terminal == Stop(finish_reason="stop")
        assert [e.text for e in events if isinstance(e, ReasoningDelta)] == list(THOUGHT_PARTS)
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == ANSWER
