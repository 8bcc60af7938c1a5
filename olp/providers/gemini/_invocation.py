"""The argv, stdin, environment and private-home files for one ``gemini -p`` run.

``gemini -p "" -o stream-json -m MODEL --skip-trust [extra_args]``, the conversation on stdin
(written whole at spawn, then closed), no client text on argv. gemini is a model here, never
an agent: :data:`SETTINGS` and the deny-all :data:`POLICY` in the private home turn every
built-in tool, MCP server, skill, hook, agent and context file off and leave retries to OLP;
the system text replaces the CLI's agent prompt (:data:`SYSTEM_FILE`). The prompt is guarded
against slash commands (:func:`guard_prompt`) and the working directory stays empty (``@path``
would inline its files). ``response_format`` → an instruction at the head of the prompt;
images → :class:`CapabilityMissing`. A request's tools reach the model only through OLP's
bridge (:func:`tools_settings`, :data:`TOOLS_POLICY`). The request's reasoning effort becomes
the thinking settings of gemini-cli's own model aliases (:func:`thinking_settings`). What each
setting does and how it was measured: ``tests/fixtures/cli-reference/gemini/README.md``,
"Invocation: why each setting".

A conversation with earlier text turns goes as a session file instead (``_history.py``):
``--session-file`` names it on argv (a path in the private home, as the CLI sees it), the
earlier turns are real upstream ``contents``, and only the last user turn is on stdin.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from olp.actors._adapter import CapabilityMissing, Invocation
from olp.actors._toolbridge import (
    SERVER_NAME,
    TOOLS_FILE,
    bridge_command,
    offered_tools,
    tool_instruction,
    tools_file_text,
)
from olp.ir import ChatRequest, Effort, ImagePart, Reasoning
from olp.providers._prompt import flatten_prompt, json_instruction, system_text

from ._credentials import API_KEY_AUTH, AUTH_TYPE_VAR
from ._history import (
    COMMAND_GUARD,
    SESSION_FILE,
    SESSION_FLAG,
    guard_turn,
    history_settings,
    session_text,
    split_history,
)

SETTINGS_FILE: Final = ".gemini/settings.json"
POLICY_FILE: Final = ".gemini/policies/olp-deny-all.toml"
SYSTEM_FILE: Final = ".gemini/olp-system.md"
#: An MCP server name no config defines: ``mcp.allowed`` naming it blocks every other server.
NO_MCP_SERVER: Final = "olp-no-mcp-server"
SETTINGS: Final[dict[str, Any]] = {
    "security": {"auth": {"selectedType": f"${{{AUTH_TYPE_VAR}:-{API_KEY_AUTH}}}"}},
    "tools": {"core": [], "useRipgrep": False},
    "mcp": {"allowed": [NO_MCP_SERVER]},
    "mcpServers": {},
    "skills": {"enabled": False},
    "hooksConfig": {"enabled": False},
    "experimental": {"enableAgents": False, "extensionManagement": False},
    "useWriteTodos": False,
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False,
                "checkpointing": {"enabled": False}, "plan": {"enabled": False},
                "topicUpdateNarration": False, "maxAttempts": 1},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "ide": {"enabled": False},
    "context": {"includeDirectoryTree": False, "memoryBoundaryMarkers": [],
                "discoveryMaxDirs": 0},
    "advanced": {"ignoreLocalEnv": True},
}
SETTINGS_TEXT: Final = json.dumps(SETTINGS, indent=2, sort_keys=True) + "\n"
POLICY: Final = '[[rule]]\ntoolName = "*"\ndecision = "deny"\npriority = 999\n'
#: The policy of a spawn with the request's tools (same file name, replacing :data:`POLICY`):
#: the bridge's tools allowed (headless gemini drops a tool whose decision is ``ask_user``),
#: everything else denied. The first matching rule by priority wins; 999 is the user tier's
#: highest priority.
TOOLS_POLICY: Final = (f'[[rule]]\nmcpName = "{SERVER_NAME}"\ntoolName = "*"\n'
                       'decision = "allow"\npriority = 999\n\n'
                       '[[rule]]\ntoolName = "*"\ndecision = "deny"\npriority = 998\n')
#: A level of OLP's scale → the ``thinkingBudget`` of gemini-cli's ``chat-base-2.5`` alias (the
#: gemini 2.5 models; 0 turns thinking off where the model allows it, not on 2.5 pro), and the
#: range the API takes on 2.5 pro (a client's Messages budget is clamped into it).
THINKING_BUDGETS: Final[Mapping[Effort, int]] = {
    "none": 0, "minimal": 1024, "low": 4096, "medium": 16384, "high": 32768}
BUDGET_RANGE: Final = (128, 32768)
#: A level → the ``thinkingLevel`` of its ``chat-base-3`` alias (the gemini 3 models: LOW and
#: HIGH on the pro models, also MINIMAL and MEDIUM on flash). ``none`` has none: gemini 3
#: cannot stop thinking.
THINKING_LEVELS: Final[Mapping[Effort, str]] = {
    "minimal": "LOW", "low": "LOW", "medium": "MEDIUM", "high": "HIGH"}
#: Always in the spawn's environment (after the provider's ``env``: not overridable).
FIXED_ENV: Final = {"GEMINI_CLI_NO_RELAUNCH": "true"}
BASE_ARGS: Final = ("-p", "", "-o", "stream-json")
#: A text the CLI runs as a command: ``/`` after any blanks JavaScript's ``trim`` removes
#: (Python's ``\s`` covers them all but the BOM, and a few more: over-guarding is harmless).
_COMMAND: Final = re.compile(r"[\s\ufeff]*/")


def spawn_home(workdir: Path) -> Path:
    """The per-spawn private home the runner makes beside ``workdir``."""
    return workdir.parent / "home"


def guard_prompt(text: str) -> str:
    """``text`` unchanged, unless gemini-cli would run it as a slash command (it begins with
    ``/`` once leading whitespace is trimmed): then with :data:`COMMAND_GUARD` in front."""
    return COMMAND_GUARD + text if _COMMAND.match(text) else text


def build_prompt(request: ChatRequest) -> str:
    """The stdin text: the conversation without its system text (that goes to
    ``GEMINI_SYSTEM_MD``), the JSON and forced-tool instructions first when asked for,
    guarded."""
    prompt = flatten_prompt(request.messages, include_system=False)
    for instruction in (json_instruction(request.response_format),
                        tool_instruction(request) if offered_tools(request) else None):
        if instruction is not None:
            prompt = f"{instruction}\n\n{prompt}" if prompt else instruction
    return guard_prompt(prompt)


def _text(settings: dict[str, Any]) -> str:
    return json.dumps(settings, indent=2, sort_keys=True) + "\n"


def tools_settings(home: Path) -> dict[str, Any]:
    """:data:`SETTINGS` for a spawn with the request's tools: the bridge (its tools file in
    ``home``) as the one MCP server, and the only one allowed. ``tools.core: []`` still keeps
    every built-in tool off."""
    command, args = bridge_command(home)
    settings: dict[str, Any] = json.loads(SETTINGS_TEXT)
    settings["mcpServers"] = {SERVER_NAME: {"command": command, "args": args}}
    settings["mcp"] = {"allowed": [SERVER_NAME]}
    return settings


def thinking_settings(reasoning: Reasoning | None) -> dict[str, Any] | None:
    """The ``modelConfigs`` setting for the request's effort, or ``None`` (no effort asked).

    gemini-cli 0.61.0 takes its thinking config from its model aliases: ``-m gemini-2.5-pro``
    resolves through ``chat-base-2.5`` (``thinkingConfig.thinkingBudget``, default 8192), a
    gemini 3 model through ``chat-base-3`` (``thinkingLevel``, default ``HIGH``). Both are
    redefined here (``customAliases``, extending ``chat-base`` as the built-in ones do, so
    ``includeThoughts`` stays); the one the model does not use changes nothing. An
    ``overrides`` entry matching the model worked for 2.5 but not for gemini 3 (measured:
    ``tests/fixtures/cli-reference/gemini/reasoning/README.md``)."""
    if reasoning is None or reasoning.effort is None:
        return None
    effort = reasoning.effort
    budget = THINKING_BUDGETS[effort]
    if effort != "none" and reasoning.budget_tokens is not None:
        budget = min(max(reasoning.budget_tokens, BUDGET_RANGE[0]), BUDGET_RANGE[1])
    aliases = {"chat-base-2.5": _thinking_alias({"thinkingBudget": budget})}
    if effort in THINKING_LEVELS:
        aliases["chat-base-3"] = _thinking_alias({"thinkingLevel": THINKING_LEVELS[effort]})
    return {"customAliases": aliases}


def _thinking_alias(thinking: dict[str, Any]) -> dict[str, Any]:
    return {"extends": "chat-base",
            "modelConfig": {"generateContentConfig": {"thinkingConfig": thinking}}}


def build_invocation(request: ChatRequest, *, binary: str, model: str, workdir: Path,
                     extra_args: Sequence[str] = ()) -> Invocation:
    """The spawn for one request (details in the module docstring). Raises
    :class:`CapabilityMissing` ``("images")`` when a message carries an image."""
    if any(isinstance(p, ImagePart) for m in request.messages for p in m.content):
        raise CapabilityMissing("images")
    argv = [binary, *BASE_ARGS, "-m", model, "--skip-trust", *extra_args]
    home = spawn_home(workdir)
    system_md = home / SYSTEM_FILE
    home_files = {SETTINGS_FILE: SETTINGS_TEXT, POLICY_FILE: POLICY,
                  SYSTEM_FILE: system_text(request.messages)}
    tools = offered_tools(request)
    if tools:
        home_files[SETTINGS_FILE] = _text(tools_settings(home))
        home_files[POLICY_FILE] = TOOLS_POLICY
        home_files[TOOLS_FILE] = tools_file_text(tools)
    history = split_history(request)
    if history is None:
        prompt = build_prompt(request)
    else:  # the earlier turns in the session file, the last one on stdin
        earlier, last = history
        home_files[SESSION_FILE] = session_text(earlier)
        home_files[SETTINGS_FILE] = _text(history_settings(SETTINGS))
        argv += [SESSION_FLAG, str(home / SESSION_FILE)]
        prompt = guard_turn(last.text())
    thinking = thinking_settings(request.reasoning)
    if thinking is not None:
        home_files[SETTINGS_FILE] = _text(
            {**json.loads(home_files[SETTINGS_FILE]), "modelConfigs": thinking})
    env = {**FIXED_ENV, "GEMINI_SYSTEM_MD": str(system_md)}
    return Invocation(argv=argv, stdin=prompt.encode("utf-8"), env=env, home_files=home_files)
