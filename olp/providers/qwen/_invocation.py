"""The argv, stdin, settings and environment for one ``qwen`` (qwen-code) run.

``qwen -o stream-json --include-partial-messages --approval-mode default --max-tool-calls 0
--exclude-tools <ALL_TOOLS> --chat-recording false -m MODEL [--allowed-mcp-server-names olp]
[extra_args ...]``, the prompt on stdin (written at spawn, then closed); no client text on
argv. qwen is a model here, never an agent: :data:`SETTINGS` in the private home denies and
disables every built-in tool, MCP server, command, skill and context file, ``--max-tool-calls
0`` aborts a call the model makes anyway, and the CLI's long retries are off. The system text
replaces the agent prompt (:data:`SYSTEM_FILE`); the prompt is guarded against slash commands
and the working directory stays empty. Images → :class:`CapabilityMissing`. A request's tools
reach the model only through OLP's bridge, in a workdir trusted for that spawn alone
(:func:`tools_settings`, :func:`trusted_folders_text`). The request's reasoning effort becomes
qwen's own ``model.generationConfig.reasoning`` (:func:`reasoning_setting`). What each flag and
setting does and how it was measured: ``tests/fixtures/cli-reference/qwen/README.md``,
"Invocation: why each flag and setting".
"""

from __future__ import annotations

import copy
import json
import re
import secrets
from collections.abc import Sequence
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

#: Every built-in tool name of qwen-code 0.24.4 (``ToolNames``); re-derive on a version bump.
ALL_TOOLS: Final[tuple[str, ...]] = (
    "exec", "edit", "write_file", "read_file", "zoom_image", "grep_search", "glob",
    "run_shell_command", "todo_write", "save_memory", "agent", "skill", "exit_plan_mode",
    "enter_plan_mode", "web_fetch", "web_search", "image_gen", "list_directory", "lsp",
    "ask_user_question", "cron_create", "cron_list", "cron_delete", "loop_wakeup",
    "create_sub_session", "list_agents", "task_stop", "task_create", "task_update", "task_list",
    "team_create", "team_delete", "team_plan_approval", "request_shutdown", "send_message",
    "structured_output", "monitor", "notebook_edit", "tool_call", "tool_search",
    "read_mcp_resource", "enter_worktree", "exit_worktree", "workflow", "artifact",
    "record_artifact", "record_source", "report_findings", "get_goal", "update_goal",
    "omni_downsample_image", "omni_downscale_video", "omni_downsample_audio",
    "omni_extract_keyframes", "omni_extract_audio", "omni_clip_video", "omni_convert_image",
    "omni_transcribe_audio", "omni_clip_image", "omni_clip_audio", "omni_caption_image",
    "omni_caption_audio", "omni_ocr_image", "omni_understand_video_segments",
    "omni_recall_media_memory", "propose_goal", "display_image",
)
#: The slash commands a stock 0.24.4 install lists (``system/init`` ``slash_commands``).
SLASH_COMMANDS: Final[tuple[str, ...]] = (
    "auth", "batch", "browser-use", "bug", "clear", "compress", "compress-fast", "computer-use",
    "config", "context", "coordinate", "curator", "dataviz", "diff", "docs", "doctor", "effort",
    "export", "extension-creator", "extensions", "goal", "goal-draft", "hooks", "import-config",
    "init", "insight", "language", "loop", "model", "new-app", "output-style", "qc-helper",
    "review", "simplify", "stats", "status", "stuck", "summary", "tasks", "update",
    "workflow-authoring", "workflow-creator", "zvec-grep-install",
)
SETTINGS_FILE: Final = ".qwen/settings.json"
TRUSTED_FOLDERS_FILE: Final = ".qwen/trustedFolders.json"
#: The home directory that holds the bridge's tools file (``<home>/olp/olp-tools.json``).
BRIDGE_DIR: Final = "olp"
#: How qwen names a tool of OLP's bridge: ``mcp__<server>__<tool>``.
TOOL_PREFIX: Final = f"mcp__{SERVER_NAME}__"
SYSTEM_FILE: Final = "olp/system.md"
DEFAULT_SYSTEM: Final = "You are a helpful assistant."
#: A zero-width space: not whitespace to ``str.split``, and not a ``/`` either.
COMMAND_GUARD: Final = "\u200b"
#: The per-spawn ``~/.qwen/settings.json`` (each setting and why: the fixture README).
SETTINGS: Final[dict[str, Any]] = {
    "$version": 4,
    "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": True}},
    "permissions": {"deny": list(ALL_TOOLS)},
    "tools": {"approvalMode": "default", "disabled": list(ALL_TOOLS),
              "toolSearch": {"enabled": False}, "webSearch": {"enabled": False},
              "useRipgrep": False},
    "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False,
               "enableAutoSkill": False, "enableTeamMemory": False},
    "skills": {"disabledLevels": ["project", "user", "extension", "bundled"]},
    "mcp": {"excluded": ["*"]},
    "mcpServers": {},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "chatRecording": False, "preventSystemSleep": False},
    "model": {"skipStartupContext": True, "generationConfig": {"maxRetries": 0}},
    "experimental": {"cron": False, "artifact": False},
    "disableAllHooks": True,
    "slashCommands": {"disabled": list(SLASH_COMMANDS)},
}
SETTINGS_TEXT: Final = json.dumps(SETTINGS, indent=2, sort_keys=True) + "\n"
#: Always in the spawn's env (over the provider's configured ``env``): no usage statistics
#: (Alibaba RUM), no telemetry, no cron tools, no memory-limit self-relaunch (one Node
#: process fewer, ~1.5 s faster start), and never the "unattended" 429/529 retries that last
#: up to 6 h (qwen reads only ``"true"``/``"1"`` there as on).
TOOLS_OFF_ENV: Final[dict[str, str]] = {
    "QWEN_USAGE_STATISTICS_ENABLED": "false",
    "QWEN_TELEMETRY_ENABLED": "false",
    "QWEN_CODE_DISABLE_CRON": "1",
    "QWEN_CODE_NO_RELAUNCH": "true",
    "QWEN_CODE_UNATTENDED_RETRY": "false",
}
#: A level of OLP's scale → qwen's ``generationConfig.reasoning.effort`` (qwen's ladder is
#: ``low`` … ``max``: no ``minimal``). ``none`` → ``reasoning: false``. What goes upstream
#: (measured, ``tests/fixtures/cli-reference/qwen/reasoning/``): on an OpenAI-compatible host
#: ``reasoning: {"effort": …}`` (``false``: ``chat_template_kwargs.enable_thinking: false``);
#: on DashScope (the Coding Plan) a qwen model's effort collapses to ``enable_thinking``.
QWEN_EFFORTS: Final[dict[Effort, str]] = {
    "minimal": "low", "low": "low", "medium": "medium", "high": "high"}
BASE_ARGS: Final = ("-o", "stream-json", "--include-partial-messages",
                    "--approval-mode", "default", "--max-tool-calls", "0",
                    "--exclude-tools", ",".join(ALL_TOOLS), "--chat-recording", "false")


def tools_settings(command: str, args: Sequence[str], context_file: str) -> dict[str, Any]:
    """:data:`SETTINGS` for a spawn with OLP's bridge: the one MCP server ``olp`` allowed and
    configured, ``context.fileName`` set to ``context_file`` (the fixture README says why);
    every built-in tool still denied and disabled."""
    settings = copy.deepcopy(SETTINGS)
    settings["mcp"] = {"allowed": [SERVER_NAME]}
    settings["mcpServers"] = {SERVER_NAME: {"command": command, "args": list(args)}}
    settings["context"] = {"fileName": [context_file]}
    return settings


def trusted_folders_text(workdir: Path) -> str:
    """``~/.qwen/trustedFolders.json`` that trusts ``workdir`` only: ``/`` is distrusted, and
    qwen's deepest matching rule wins."""
    return json.dumps({"/": "DO_NOT_TRUST", str(workdir): "TRUST_FOLDER"}, indent=2) + "\n"


def reasoning_setting(reasoning: Reasoning | None) -> dict[str, str] | bool | None:
    """qwen's ``model.generationConfig.reasoning`` for the request's effort: ``False`` for
    ``none``, ``{"effort": …}`` (:data:`QWEN_EFFORTS`) for a level, ``None`` (qwen's own
    default, no key) when no level was asked."""
    if reasoning is None or reasoning.effort is None:
        return None
    if reasoning.effort == "none":
        return False
    return {"effort": QWEN_EFFORTS[reasoning.effort]}


def settings_text(settings: dict[str, Any], reasoning: Reasoning | None) -> str:
    """``settings`` as the file's text, with :func:`reasoning_setting` added when set."""
    setting = reasoning_setting(reasoning)
    if setting is not None:
        settings = copy.deepcopy(settings)
        settings["model"]["generationConfig"]["reasoning"] = setting
    return json.dumps(settings, indent=2, sort_keys=True) + "\n"


def context_file_name() -> str:
    """A context file name no one can have planted in a parent directory (fresh per spawn)."""
    return f"olp-no-context-{secrets.token_hex(8)}.md"


def spawn_home(workdir: Path) -> Path:
    """The per-spawn temporary home the runner makes beside ``workdir``."""
    return workdir.parent / "home"


#: ``/`` after any blanks (JavaScript's ``trim`` also removes a BOM, Python's ``\s`` does not).
_COMMAND: Final = re.compile(r"[\s\ufeff]*/")


def guard_prompt(text: str) -> str:
    """``text`` unchanged, unless its first non-blank character is ``/`` (qwen would run it
    as a slash command): then with :data:`COMMAND_GUARD` in front."""
    return COMMAND_GUARD + text if _COMMAND.match(text) else text


def build_invocation(request: ChatRequest, *, binary: str, model: str, workdir: Path,
                     extra_args: Sequence[str] = ()) -> Invocation:
    """The spawn for one request (details in the module docstring). Raises
    :class:`CapabilityMissing` ``("images")`` when a message carries an image. Offered tools
    (all of them unless ``tool_choice`` is ``"none"``) are served by OLP's bridge; without
    them the spawn has no MCP server at all."""
    if any(isinstance(p, ImagePart) for m in request.messages for p in m.content):
        raise CapabilityMissing("images")
    prompt = flatten_prompt(request.messages, include_system=False)
    tools = offered_tools(request)
    for instruction in (json_instruction(request.response_format),
                        tool_instruction(request) if tools else None):
        if instruction is not None:
            prompt = f"{instruction}\n\n{prompt}" if prompt else instruction
    system = system_text(request.messages) or DEFAULT_SYSTEM
    home = spawn_home(workdir)
    argv = [binary, *BASE_ARGS, "-m", model]
    home_files = {SETTINGS_FILE: settings_text(SETTINGS, request.reasoning), SYSTEM_FILE: system}
    if tools:
        command, args = bridge_command(home / BRIDGE_DIR)
        settings = tools_settings(command, args, context_file_name())
        home_files[SETTINGS_FILE] = settings_text(settings, request.reasoning)
        home_files[f"{BRIDGE_DIR}/{TOOLS_FILE}"] = tools_file_text(tools)
        home_files[TRUSTED_FOLDERS_FILE] = trusted_folders_text(workdir)
        argv += ["--allowed-mcp-server-names", SERVER_NAME]
    argv += extra_args
    env = {**TOOLS_OFF_ENV, "QWEN_SYSTEM_MD": str(home / SYSTEM_FILE)}
    return Invocation(argv=argv, stdin=guard_prompt(prompt).encode("utf-8"), env=env,
                      home_files=home_files)
