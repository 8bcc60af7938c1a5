"""The argv, stdin, settings and environment for one ``qwen`` (qwen-code 0.24.4) run.

No client text on argv. Measured against the real CLI and the loopback OpenAI-compatible mock
(``tests/fixtures/cli-reference/qwen/README.md``, "The no-tools recipe"):

``qwen -o stream-json --include-partial-messages --approval-mode default --max-tool-calls 0
--exclude-tools <ALL_TOOLS> --chat-recording false -m MODEL [extra_args ...]``, the prompt on
stdin (the runner writes it at spawn and closes stdin: qwen reads stdin ~3.5 s after start with
a 500 ms window for the first byte, then to EOF; an open stdin hangs it).

* **qwen is a model here, never an agent.** ``~/.qwen/settings.json`` in the spawn's private
  home (:data:`SETTINGS`, written as a home file, never symlinked: qwen rewrites a settings
  file that lacks ``"$version": 4``) denies and disables every built-in tool of 0.24.4
  (:data:`ALL_TOOLS`, ``ToolNames``; there is no wildcard for built-in tools), turns the
  managed-memory agent off (it otherwise sends the whole conversation again with
  shell/write/edit tools), excludes every MCP server, disables the slash commands, skills,
  hooks, cron, chat recording, start-up context, usage statistics, telemetry and the ripgrep
  probe, and turns folder trust on (the workdir's ``.qwen/settings.json``, ``.env``,
  ``QWEN.md`` and ``AGENTS.md`` are then ignored). ``--exclude-tools`` repeats the list on
  argv (the CLI overrides layer), and ``--max-tool-calls 0`` makes a tool call the model emits
  anyway abort the run (exit 55) before anything runs. Under this recipe every captured
  upstream request offered ``"tools": []``, one request per answer.
* ``model.generationConfig.maxRetries: 0``: the openai-node retries and the CLI's outer
  rate-limit rounds (10 rounds from 60 s to 300 s, ~50 min for a 429) are off. The CLI's own
  7 attempts (``retryWithBackoff``, not configurable, silent on stdout) remain;
  ``QWEN_CODE_UNATTENDED_RETRY=false`` in the env keeps its hours-long "unattended" retries off
  whatever the provider's ``env`` says.
* **System text** goes to a file in the private home, named by ``QWEN_SYSTEM_MD``
  (:data:`SYSTEM_FILE`); it replaces qwen's built-in ~16 KB agent prompt. With no system text
  in the request the file holds :data:`DEFAULT_SYSTEM`, so the agent prompt (which describes
  tools to the model) is never sent.
* **The prompt** is the conversation (:func:`flatten_prompt` without the system text), with
  ``response_format`` json as an instruction at its head (:func:`json_instruction`). qwen runs a
  prompt that starts with ``/`` as a slash command: besides ``slashCommands.disabled``,
  :func:`guard_prompt` puts a zero-width space in front of such a prompt, so it always reaches
  the model as text. ``@path`` is expanded from the working directory, which stays empty (no
  ``files``: everything OLP writes is in the home).
* **Images** → :class:`CapabilityMissing` (the prompt is text on stdin).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from olp.actors._adapter import CapabilityMissing, Invocation
from olp.actors._prompt import flatten_prompt, json_instruction, system_text
from olp.ir import ChatRequest, ImagePart

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
SYSTEM_FILE: Final = "olp/system.md"
DEFAULT_SYSTEM: Final = "You are a helpful assistant."
#: A zero-width space: not whitespace to ``str.split``, and not a ``/`` either.
COMMAND_GUARD: Final = "\u200b"
#: The per-spawn ``~/.qwen/settings.json`` (see the module docstring).
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
BASE_ARGS: Final = ("-o", "stream-json", "--include-partial-messages",
                    "--approval-mode", "default", "--max-tool-calls", "0",
                    "--exclude-tools", ",".join(ALL_TOOLS), "--chat-recording", "false")


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
    :class:`CapabilityMissing` ``("images")`` when a message carries an image. Tools in the
    request are not looked at here (the registry marks qwen's models ``tools: false``, so the
    engine skips this hop for a request with tools)."""
    if any(isinstance(p, ImagePart) for m in request.messages for p in m.content):
        raise CapabilityMissing("images")
    prompt = flatten_prompt(request.messages, include_system=False)
    instruction = json_instruction(request.response_format)
    if instruction is not None:
        prompt = f"{instruction}\n\n{prompt}" if prompt else instruction
    system = system_text(request.messages) or DEFAULT_SYSTEM
    argv = [binary, *BASE_ARGS, "-m", model, *extra_args]
    env = {**TOOLS_OFF_ENV, "QWEN_SYSTEM_MD": str(spawn_home(workdir) / SYSTEM_FILE)}
    return Invocation(argv=argv, stdin=guard_prompt(prompt).encode("utf-8"), env=env,
                      home_files={SETTINGS_FILE: SETTINGS_TEXT, SYSTEM_FILE: system})
