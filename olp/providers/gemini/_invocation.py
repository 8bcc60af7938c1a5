"""The argv, stdin, environment and private-home files for one ``gemini -p`` run.

``gemini -p "" -o stream-json -m MODEL --skip-trust [extra_args]``, the conversation on stdin
(written whole at spawn, then closed: the CLI reads stdin ~2 s after start with a 500 ms
window), no client text on argv. This is the "no-tools recipe" measured against the real
gemini-cli 0.61.0 (``tests/fixtures/cli-reference/gemini/README.md``):

* ``-p ""`` makes the prompt exactly stdin; ``-o stream-json`` prints JSONL with token deltas;
  ``-m`` is always given (without it the ``auto`` router sends the prompt to a classifier
  model first); ``--skip-trust`` trusts the (empty) working directory *after* the settings
  were loaded untrusted, so a ``.gemini/settings.json`` there would not be merged (the
  ``GEMINI_CLI_TRUST_WORKSPACE`` variable would merge it).
* :data:`SETTINGS` (``<home>/.gemini/settings.json``, in :attr:`Invocation.home_files`, so
  written after the owner's ``home_files`` and winning over them): ``tools.core: []`` (the
  effective switch: 0 function declarations reach the upstream), ``mcp.allowed`` naming a
  server that does not exist (every MCP server blocked; an empty list would mean no
  restriction), skills/hooks/agents/extensions/plan mode off, usage statistics and telemetry
  off (no Clearcut calls, no ``lspci``/``xrandr`` probes), no directory tree or parent
  ``GEMINI.md`` in the context, ``advanced.ignoreLocalEnv`` (no ``.env`` from the working
  directory or its parents), and ``general.maxAttempts: 1``: the CLI's own retries of a 429
  or 5xx (~4 min, with nothing on stdout) are handed to OLP's fallback.
  ``security.auth.selectedType`` is ``${OLP_GEMINI_AUTH_TYPE:-gemini-api-key}``, resolved by
  the CLI from its environment (see :mod:`._credentials`).
* :data:`POLICY` (``<home>/.gemini/policies/olp-deny-all.toml``): a user-tier policy denying
  every tool, an independent second layer (it alone also leaves 0 declarations).
* The system/developer text replaces the CLI's ~18 KB agent system prompt: it is written to
  :data:`SYSTEM_FILE` in the private home and named by ``GEMINI_SYSTEM_MD`` (the file's text;
  an empty file gives an empty system instruction). The CLI replaces only its own
  placeholders in it (``${AvailableTools}`` → "No tools are currently available.",
  ``${AgentSkills}``, ``${SubAgents}``, ``${<tool>_ToolName}``: ``applySubstitutions`` in the
  bundle), never environment variables.
* ``GEMINI_CLI_NO_RELAUNCH=true``: one node process instead of a relaunching parent that
  ignores SIGTERM (and ~1.1 s less start-up); SIGTERM then exits 0 without a ``result`` line,
  which the parser never reads as success.

The prompt text is interpreted by the CLI even under the recipe: a prompt whose text, once
whitespace is trimmed, begins with ``/`` runs a CLI command (``/init`` writes ``GEMINI.md``,
``/docs`` runs ``xdg-open``, a custom command from ``.gemini/commands`` runs) instead of
reaching the model; :func:`guard_prompt` puts a zero-width space in front of such a text
(JavaScript's ``trim`` keeps U+200B), so it reaches the model as text. ``@path`` inlines a
workspace file: the working directory stays empty (nothing goes in :attr:`Invocation.files`).

``response_format`` json_object/json_schema → an instruction at the head of the prompt.
Images → :class:`CapabilityMissing` (the prompt is text on stdin).

**The request's tools** (when :func:`offered_tools` is not empty) reach the model through
OLP's MCP bridge, the one MCP server gemini may start (:func:`tools_settings`):
``mcpServers.olp`` = :func:`bridge_command` with the tools file (:data:`TOOLS_FILE`) in the
private home — never in the working directory, where ``@path`` could name it — and
``mcp.allowed: ["olp"]``; ``tools.core: []`` still keeps every built-in off. The policy
becomes :data:`TOOLS_POLICY`: ``mcpName = "olp"`` allowed at the user tier's top priority
(headless gemini drops a tool that would need approval), everything else denied just below.
Measured with gemini-cli 0.61.0 (``tests/fixtures/cli-reference/gemini/tools/``): the
upstream request declares exactly ``mcp_olp_<name>`` for each tool and no built-in, even
when the prompt asks for a shell. gemini has no "required" server setting: a bridge that
fails to start is reported on stderr only and the model is asked without the tools (the
parser turns that into ``TOOL_BRIDGE_FAILED``). A forced ``tool_choice`` adds
:func:`tool_instruction` at the head of the prompt.
"""

from __future__ import annotations

import json
import re
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
from olp.ir import ChatRequest, ImagePart
from olp.providers._prompt import flatten_prompt, json_instruction, system_text

from ._credentials import API_KEY_AUTH, AUTH_TYPE_VAR

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
#: Always in the spawn's environment (after the provider's ``env``: not overridable).
FIXED_ENV: Final = {"GEMINI_CLI_NO_RELAUNCH": "true"}
BASE_ARGS: Final = ("-p", "", "-o", "stream-json")
#: What :func:`guard_prompt` puts in front of a text the CLI would run as a command.
COMMAND_GUARD: Final = "\u200b"
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


def tools_settings(home: Path) -> dict[str, Any]:
    """:data:`SETTINGS` for a spawn with the request's tools: the bridge (its tools file in
    ``home``) as the one MCP server, and the only one allowed. ``tools.core: []`` still keeps
    every built-in tool off."""
    command, args = bridge_command(home)
    settings: dict[str, Any] = json.loads(SETTINGS_TEXT)
    settings["mcpServers"] = {SERVER_NAME: {"command": command, "args": args}}
    settings["mcp"] = {"allowed": [SERVER_NAME]}
    return settings


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
        home_files[SETTINGS_FILE] = json.dumps(tools_settings(home), indent=2,
                                               sort_keys=True) + "\n"
        home_files[POLICY_FILE] = TOOLS_POLICY
        home_files[TOOLS_FILE] = tools_file_text(tools)
    env = {**FIXED_ENV, "GEMINI_SYSTEM_MD": str(system_md)}
    return Invocation(argv=argv, stdin=build_prompt(request).encode("utf-8"), env=env,
                      home_files=home_files)
