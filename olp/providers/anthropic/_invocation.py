"""The argv, stdin and files for one ``claude -p`` spawn. No client text ever goes on argv.

claude is used as a *model*, never as an agent on the host. Besides ``--tools ""`` (no
built-in tool offered upstream), :data:`LOCKDOWN_ARGS` keeps every other source of tools,
commands and instructions away from the spawn. Verified with claude 2.1.332 against the loopback
mock (``tests/support/mock_anthropic``), files
planted in the per-spawn home and in a parent directory
of the workdir (OLP's workdir is ``/tmp/olp-job-*/work``, so ``/tmp`` — writable by every local
user — is a parent), ``strace -f -e trace=%file`` of the run, and a managed-settings directory
put in place in a private mount namespace:

``--strict-mcp-config`` (with no ``--mcp-config``)
    no MCP server at all. Without it claude *started* the stdio servers of a ``.mcp.json`` in a
    parent directory and of ``mcpServers`` in ``~/.claude.json`` (their commands ran). With a
    managed ``/etc/claude-code/managed-mcp.json`` present claude refuses to start ("You cannot
    use --strict-mcp-config when an enterprise MCP config is present", exit 1): it fails
    closed instead of starting the managed server.
``--setting-sources ""``
    no user, project or local settings: no hooks or permission rules from
    ``~/.claude/settings.json`` or ``.claude/settings*.json``, no ``CLAUDE.md``/``CLAUDE.local.md``
    from the home or the workdir's parents in the upstream request, no skills, commands or
    agents from ``.claude/`` directories, no project ``.mcp.json``.
``--disable-slash-commands``
    no skills and no slash commands (``system/init`` lists none).
``--safe-mode``
    every customisation off, and the one thing the three above leave: the *managed*
    ``/etc/claude-code/CLAUDE.md`` (sent upstream without it) and managed agents.

Nothing on argv stops what claude reads from ``/etc/claude-code/managed-settings.json`` and
``managed-settings.d/*.json``: their hooks (``SessionStart``, ``UserPromptSubmit``, ``Stop``,
``SessionEnd``) and ``apiKeyHelper`` ran with every flag above. Nor
``/home/claude/.claude/remote/.oauth_token``, which claude reads and prefers to the home's
``.credentials.json``. Those paths are masked by the OS sandbox, not here. Managed
``permissions.allow`` rules do not bring a tool back: ``--tools ""`` still offers none. A login
from ``~/.claude/.credentials.json`` works with these flags (checked: the OAuth token reached
the mock as the bearer credential).

A request's tools reach the model through OLP's bridge (``olp/actors/_toolbridge.py``): the
MCP config file :data:`MCP_CONFIG_FILE` in the workdir names one stdio server, ``olp``, that
claude launches and that lists exactly the request's tools. ``--strict-mcp-config`` stays (no
other server is loaded), ``--tools ""`` stays (no built-in tool), ``--safe-mode`` goes (it
would switch the bridge off too; see :data:`TOOLS_LOCKDOWN_ARGS`), and ``--allowedTools``
pre-approves each ``mcp__olp__<name>`` so claude prints the model's call instead of refusing
it; claude then waits for the ``tools/call`` answer the bridge never gives, and the runner ends
the spawn (measured with claude 2.1.332: the upstream request offered exactly the
``mcp__olp__*`` tools, see ``docs/adr/0012-tool-calling-on-cli-hops.md``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from olp.actors._adapter import Invocation
from olp.actors._toolbridge import (
    SERVER_NAME,
    TOOLS_FILE,
    bridge_command,
    offered_tools,
    tool_instruction,
    tools_file_text,
)
from olp.ir import ChatRequest, ImagePart
from olp.providers._images import decode_image_url
from olp.providers._prompt import flatten_prompt, json_instruction, system_text

SYSTEM_PROMPT_FILE: Final = "system-prompt.txt"
MCP_CONFIG_FILE: Final = "olp-mcp.json"
#: How claude names a tool of OLP's bridge: ``mcp__<server>__<tool>``.
TOOL_PREFIX: Final = f"mcp__{SERVER_NAME}__"
DEFAULT_SYSTEM_PROMPT: Final = "You are a helpful assistant."
# every built-in tool, MCP server, hook, settings file, skill, command and instruction file
# other than the system prompt file kept away (see the module docstring for what each one does)
LOCKDOWN_ARGS: Final = ("--tools", "", "--strict-mcp-config", "--setting-sources", "",
                        "--disable-slash-commands", "--safe-mode")
# With offered tools: ``--safe-mode`` also turns off the servers of ``--mcp-config`` (claude
# 2.1.332 then starts no MCP server at all), so it is left out; what only it kept away (the
# managed /etc/claude-code CLAUDE.md and agents) is outside the sandbox's view of /etc.
TOOLS_LOCKDOWN_ARGS: Final = tuple(a for a in LOCKDOWN_ARGS if a != "--safe-mode")


def build_invocation(request: ChatRequest, *, binary: str, model: str, workdir: Path,
                     extra_args: Sequence[str] = ()) -> Invocation:
    """``claude -p`` in stream-json mode both ways: the user turn is one JSON line on stdin
    (:func:`user_line`), the system text in a file.

    Everything but stdin depends only on the system text, the model, the offered tools and
    ``extra_args``, never on the conversation: a claude started ahead of time waits on stdin
    for its turn (``--input-format stream-json`` waits indefinitely), so a warm process
    bound to those can take any request that shares them (``olp/actors/_warm.py``).

    The system text is every system/developer message joined by blank lines, or
    :data:`DEFAULT_SYSTEM_PROMPT` when there is none (so claude's long agent prompt is not
    sent). ``response_format`` json_object/json_schema becomes an instruction at the head of
    the prompt (``--json-schema`` would put client text on argv). Raises
    :class:`CapabilityMissing` ``("images")`` when any message carries an image. Offered
    tools (all of them unless ``tool_choice`` is ``"none"``) are served by OLP's bridge: its
    tools file and :data:`MCP_CONFIG_FILE` go into the workdir, ``--mcp-config`` and
    ``--allowedTools mcp__olp__<name>,...`` onto argv; a forced ``tool_choice`` becomes an
    instruction at the head of the prompt. :data:`LOCKDOWN_ARGS` come before ``extra_args``,
    so an owner's ``extra_args`` can still deliberately widen a spawn (claude takes the last
    value of a repeated option).
    """
    images = [decode_image_url(p.url) for m in request.messages for p in m.content
              if isinstance(p, ImagePart)]
    system = system_text(request.messages).strip() or DEFAULT_SYSTEM_PROMPT
    prompt = flatten_prompt(request.messages, include_system=False)
    tools = offered_tools(request)
    for instruction in (json_instruction(request.response_format),
                        tool_instruction(request) if tools else None):
        if instruction is not None:
            prompt = f"{instruction}\n\n{prompt}" if prompt else instruction
    files = {SYSTEM_PROMPT_FILE: system}
    lockdown: tuple[str, ...] = LOCKDOWN_ARGS
    tool_args: list[str] = []
    if tools:
        lockdown = TOOLS_LOCKDOWN_ARGS
        command, args = bridge_command(workdir)
        files[TOOLS_FILE] = tools_file_text(tools)
        files[MCP_CONFIG_FILE] = json.dumps({"mcpServers": {SERVER_NAME: {
            "type": "stdio", "command": command, "args": args}}})
        tool_args = ["--mcp-config", str(workdir / MCP_CONFIG_FILE), "--allowedTools",
                     ",".join(TOOL_PREFIX + t.name for t in tools)]
    argv = [
        binary, "-p", "--input-format", "stream-json", "--output-format", "stream-json",
        "--verbose",
        "--include-partial-messages", *lockdown, *tool_args, "--no-session-persistence",
        "--model", model, "--system-prompt-file", str(workdir / SYSTEM_PROMPT_FILE),
        *extra_args,
    ]
    return Invocation(argv=argv, stdin=user_line(prompt, images), files=files)


def user_line(prompt: str, images: Sequence[tuple[str, bytes]] = ()) -> bytes:
    """The stream-json user turn: a text block with ``prompt`` (none when it is empty, so
    claude reports the missing input as it does for ``-p``), then one base64 image block per
    ``(mime type, bytes)``; one JSON line, newline-terminated."""
    content: list[dict[str, object]] = [{"type": "text", "text": prompt}] if prompt else []
    content += [{"type": "image", "source": {"type": "base64", "media_type": mime,
                                             "data": base64.b64encode(data).decode("ascii")}}
                for mime, data in images]
    line = {"type": "user", "message": {"role": "user", "content": content}}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
