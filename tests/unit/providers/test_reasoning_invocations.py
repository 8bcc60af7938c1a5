"""The request's reasoning on each CLI's spawn (issue #27): each level → the CLI's nearest setting.

What each setting makes the real CLI send upstream was measured against the loopback mocks:
``tests/fixtures/cli-reference/{claude,codex,gemini,qwen,vibe}/reasoning/`` (README and
captures); the real-CLI tier checks it end to end (``tests/realcli/test_reasoning_real.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from olp.ir import ChatRequest, Effort, Message, Reasoning, TextPart, ToolSpec
from olp.providers.anthropic import ADAPTER as CLAUDE
from olp.providers.anthropic._invocation import LOCKDOWN_ARGS
from olp.providers.codex import ADAPTER as CODEX
from olp.providers.codex._invocation import TOOLS_OFF
from olp.providers.gemini import ADAPTER as GEMINI
from olp.providers.gemini._invocation import SETTINGS, SETTINGS_FILE
from olp.providers.qwen import ADAPTER as QWEN
from olp.providers.qwen._invocation import SETTINGS as QWEN_SETTINGS
from olp.providers.qwen._invocation import SETTINGS_FILE as QWEN_SETTINGS_FILE
from olp.providers.vibe import ADAPTER as VIBE
from olp.providers.vibe._acp_protocol import server_env
from olp.providers.vibe._invocation import TOOLS_OFF_ENV as VIBE_TOOLS_OFF

WORKDIR = Path("/tmp/olp-job-x/work")
MESSAGES = (Message(role="system", content=(TextPart(text="You are terse."),)),
            Message(role="user", content=(TextPart(text="Say hello."),)))


def request(reasoning: Reasoning | None = None, **kw: Any) -> ChatRequest:
    return ChatRequest(model="m", messages=MESSAGES, reasoning=reasoning, **kw)


def argv(adapter: Any, reasoning: Reasoning | None, model: str = "m") -> list[str]:
    inv = adapter.invocation(request(reasoning), binary="/bin/cli", model=model,
                             workdir=WORKDIR, extra_args=("--owner-flag",))
    return list(inv.argv)


def added(adapter: Any, reasoning: Reasoning | None) -> list[str]:
    """What the reasoning adds to the argv of the same request without it (in order)."""
    base, with_it = argv(adapter, None), argv(adapter, reasoning)
    assert len(with_it) >= len(base)
    start = next((i for i, (a, b) in enumerate(zip(base, with_it, strict=False)) if a != b),
                 len(base))
    extra = with_it[start:start + len(with_it) - len(base)]
    assert with_it[:start] + with_it[start + len(extra):] == base  # only inserted
    return extra


# -- claude -------------------------------------------------------------------------------

@pytest.mark.parametrize(("effort", "level", "budget"), [
    ("minimal", "low", "1024"), ("low", "low", "4096"), ("medium", "medium", "16384"),
    ("high", "high", "31999"),
])
def test_claude_effort_and_budget(effort: Effort, level: str, budget: str) -> None:
    # --effort for the adaptive models (opus, sonnet), --max-thinking-tokens for haiku: each
    # family reads its own and ignores the other (measured: claude/reasoning, raw_haiku_effort)
    assert added(CLAUDE, Reasoning(effort=effort)) == [
        "--effort", level, "--max-thinking-tokens", budget]


def test_claude_none_turns_thinking_off() -> None:
    assert added(CLAUDE, Reasoning(effort="none")) == ["--thinking", "disabled"]
    assert added(CLAUDE, Reasoning(effort="none", show=True)) == ["--thinking", "disabled"]


def test_claude_show_asks_for_summarized_thinking() -> None:
    # stream-json claude asks for display "updates" on its own: reasoning blocks come empty
    assert added(CLAUDE, Reasoning(show=True)) == ["--thinking-display", "summarized"]
    assert added(CLAUDE, Reasoning(effort="low", show=True)) == [
        "--effort", "low", "--max-thinking-tokens", "4096", "--thinking-display", "summarized"]


def test_claude_a_messages_budget_is_passed_as_it_is() -> None:
    # claude clamps it to 1024..max_tokens-1 itself (measured)
    assert added(CLAUDE, Reasoning(effort="medium", budget_tokens=10000, show=True)) == [
        "--effort", "medium", "--max-thinking-tokens", "10000",
        "--thinking-display", "summarized"]


def test_claude_nothing_asked_adds_nothing_and_owner_args_stay_last() -> None:
    assert added(CLAUDE, None) == [] == added(CLAUDE, Reasoning())
    full = argv(CLAUDE, Reasoning(effort="high", show=True))
    assert full[-1] == "--owner-flag"  # the owner's extra_args can still override
    i = full.index(LOCKDOWN_ARGS[0])
    assert full[i:i + len(LOCKDOWN_ARGS)] == list(LOCKDOWN_ARGS)  # lockdown intact


# -- codex --------------------------------------------------------------------------------

@pytest.mark.parametrize(("effort", "level"), [
    ("none", "none"), ("minimal", "low"), ("low", "low"), ("medium", "medium"),
    ("high", "high"),
])
def test_codex_effort(effort: Effort, level: str) -> None:
    assert added(CODEX, Reasoning(effort=effort)) == [
        "-c", f'model_reasoning_effort="{level}"']


@pytest.mark.parametrize(("reasoning", "summary"), [
    (Reasoning(show=True), "auto"),  # codex's own default, made explicit
    (Reasoning(summary="detailed"), "detailed"),
    (Reasoning(summary="concise", show=True), "concise"),
    (Reasoning(summary="none"), "none"),
    (Reasoning(summary="verbose", show=True), "auto"),  # not a codex value
])
def test_codex_summary(reasoning: Reasoning, summary: str) -> None:
    assert added(CODEX, reasoning) == ["-c", f'model_reasoning_summary="{summary}"']


def test_codex_effort_and_summary_follow_the_model_and_lockdown_stays() -> None:
    full = argv(CODEX, Reasoning(effort="high", summary="detailed", show=True))
    m = full.index("-m")
    assert full[m:m + 6] == ["-m", "m", "-c", 'model_reasoning_effort="high"',
                             "-c", 'model_reasoning_summary="detailed"']
    assert full[-2:] == ["--owner-flag", "-"]
    i = full.index(TOOLS_OFF[0])
    assert full[i:i + len(TOOLS_OFF)] == list(TOOLS_OFF)
    assert added(CODEX, None) == [] == added(CODEX, Reasoning())


# -- gemini -------------------------------------------------------------------------------

def gemini_settings(reasoning: Reasoning | None, **kw: Any) -> dict[str, Any]:
    inv = GEMINI.invocation(request(reasoning, **kw), binary="/bin/gemini", model="m",
                            workdir=WORKDIR)
    settings: dict[str, Any] = json.loads(inv.home_files[SETTINGS_FILE])
    return settings


def thinking(settings: dict[str, Any], alias: str) -> Any:
    entry = settings["modelConfigs"]["customAliases"][alias]
    assert entry["extends"] == "chat-base"  # includeThoughts stays, as in the built-in alias
    return entry["modelConfig"]["generateContentConfig"]["thinkingConfig"]


@pytest.mark.parametrize(("effort", "budget", "level"), [
    ("none", 0, None), ("minimal", 1024, "LOW"), ("low", 4096, "LOW"),
    ("medium", 16384, "MEDIUM"), ("high", 32768, "HIGH"),
])
def test_gemini_thinking_aliases(effort: Effort, budget: int, level: str | None) -> None:
    settings = gemini_settings(Reasoning(effort=effort))
    assert thinking(settings, "chat-base-2.5") == {"thinkingBudget": budget}
    aliases = settings["modelConfigs"]["customAliases"]
    if level is None:
        assert "chat-base-3" not in aliases  # gemini 3 cannot stop thinking
    else:
        assert thinking(settings, "chat-base-3") == {"thinkingLevel": level}
    assert {k: v for k, v in settings.items() if k != "modelConfigs"} == SETTINGS


@pytest.mark.parametrize(("budget", "sent"), [(2000, 2000), (5, 128), (100000, 32768)])
def test_gemini_messages_budget_is_clamped_into_the_api_range(budget: int, sent: int) -> None:
    settings = gemini_settings(Reasoning(effort="low", budget_tokens=budget))
    assert thinking(settings, "chat-base-2.5") == {"thinkingBudget": sent}


def test_gemini_without_an_effort_keeps_its_settings() -> None:
    for reasoning in (None, Reasoning(show=True), Reasoning(summary="auto")):
        assert gemini_settings(reasoning) == SETTINGS


def test_gemini_thinking_goes_with_a_conversation_and_tools() -> None:
    history = (*MESSAGES, Message(role="assistant", content=(TextPart(text="Hi."),)),
               Message(role="user", content=(TextPart(text="Again."),)))
    inv = GEMINI.invocation(ChatRequest(model="m", messages=history,
                                        reasoning=Reasoning(effort="high")),
                            binary="/bin/gemini", model="m", workdir=WORKDIR)
    settings = json.loads(inv.home_files[SETTINGS_FILE])
    assert thinking(settings, "chat-base-3") == {"thinkingLevel": "HIGH"}
    assert settings["model"]["compressionThreshold"]  # the history settings are kept


# -- qwen ---------------------------------------------------------------------------------

def qwen_settings(reasoning: Reasoning | None, **kw: Any) -> dict[str, Any]:
    inv = QWEN.invocation(request(reasoning, **kw), binary="/bin/qwen", model="m",
                          workdir=WORKDIR)
    settings: dict[str, Any] = json.loads(inv.home_files[QWEN_SETTINGS_FILE])
    return settings


@pytest.mark.parametrize(("effort", "sent"), [
    ("none", False), ("minimal", {"effort": "low"}), ("low", {"effort": "low"}),
    ("medium", {"effort": "medium"}), ("high", {"effort": "high"}),
])
def test_qwen_effort_is_its_generation_config_reasoning(effort: Effort, sent: Any) -> None:
    # measured (cli-reference/qwen/reasoning): an OpenAI-compatible host gets
    # reasoning.effort (false: chat_template_kwargs.enable_thinking false), the Coding Plan's
    # DashScope host enable_thinking true/false
    settings = qwen_settings(Reasoning(effort=effort, show=True))
    assert settings["model"]["generationConfig"] == {"maxRetries": 0, "reasoning": sent}
    settings["model"]["generationConfig"].pop("reasoning")
    assert settings == QWEN_SETTINGS  # nothing else changes: every tool stays off


def test_qwen_without_an_effort_keeps_its_settings_and_argv() -> None:
    for reasoning in (None, Reasoning(show=True), Reasoning(summary="auto")):
        assert qwen_settings(reasoning) == QWEN_SETTINGS
        assert added(QWEN, reasoning) == []
    assert added(QWEN, Reasoning(effort="high")) == []  # the settings file only


def test_qwen_effort_goes_with_the_tools_settings() -> None:
    tool = ToolSpec(name="get_weather", description="d")
    settings = qwen_settings(Reasoning(effort="high"), tools=(tool,))
    assert settings["model"]["generationConfig"]["reasoning"] == {"effort": "high"}
    assert settings["permissions"]["deny"] == QWEN_SETTINGS["permissions"]["deny"]
    assert settings["mcp"] == {"allowed": ["olp"]}


# -- vibe ---------------------------------------------------------------------------------

def vibe_entry(reasoning: Reasoning | None) -> dict[str, Any]:
    inv = VIBE.invocation(request(reasoning), binary="/bin/vibe", model="m", workdir=WORKDIR)
    [entry] = json.loads(inv.env["VIBE_MODELS"])
    return dict(entry)


@pytest.mark.parametrize(("effort", "thinking"), [
    ("none", "low"), ("minimal", "high"), ("low", "high"), ("medium", "high"),
    ("high", "high"),
])
def test_vibe_effort_is_the_model_entrys_thinking(effort: Effort, thinking: str) -> None:
    # measured (cli-reference/vibe/reasoning): vibe 3.0.2 sends thinking "low" as
    # reasoning_effort "none", "high" as "high", its default "off" as nothing
    assert vibe_entry(Reasoning(effort=effort)) == {
        "alias": "m", "name": "m", "provider": "mistral", "thinking": thinking}


def test_vibe_without_an_effort_keeps_its_spawn() -> None:
    def spawn(reasoning: Reasoning | None) -> Any:
        inv = VIBE.invocation(request(reasoning), binary="/bin/vibe", model="m",
                              workdir=WORKDIR, extra_args=("--owner-flag",))
        return list(inv.argv), dict(inv.env), dict(inv.home_files), dict(inv.files)

    for reasoning in (Reasoning(show=True), Reasoning(summary="auto")):
        assert spawn(reasoning) == spawn(None)
    argv_, env, _, _ = spawn(Reasoning(effort="high"))
    assert argv_ == spawn(None)[0]  # the environment only
    assert {k: env[k] for k in VIBE_TOOLS_OFF} == VIBE_TOOLS_OFF  # every tool still off


def test_vibe_acp_server_env_and_warm_identity_follow_the_level() -> None:
    # a warm vibe-acp server is keyed by its spawn's identity (environment included): one
    # started for a level never serves another
    home = Path("/h/.vibe")
    high, none = (server_env("m", home, Reasoning(effort=e)) for e in ("high", "none"))
    assert json.loads(high["VIBE_MODELS"])[0]["thinking"] == "high"
    assert json.loads(none["VIBE_MODELS"])[0]["thinking"] == "low"
    assert "thinking" not in json.loads(server_env("m", home)["VIBE_MODELS"])[0]
    spawns = {effort: VIBE.invocation(request(None if effort is None else
                                              Reasoning(effort=effort)),
                                      binary="/bin/vibe", model="m", workdir=WORKDIR).env
              for effort in (None, "none", "high")}
    assert len({json.dumps(env, sort_keys=True) for env in spawns.values()}) == 3
