"""The argv, stdin and files for one ``claude -p`` spawn. No client text ever goes on argv.

claude is used as a *model*, never as an agent on the host: ``--tools ""`` offers no built-in
tool upstream and :data:`LOCKDOWN_ARGS` keeps every other source of tools, commands and
instructions (MCP servers, settings, hooks, ``CLAUDE.md``, skills, slash commands) away from
the spawn; what no flag stops (the managed settings under ``/etc/claude-code``, a remote
token) is masked by the OS sandbox. A request's tools reach the model only through OLP's
bridge (:data:`MCP_CONFIG_FILE`, :data:`TOOLS_LOCKDOWN_ARGS`): claude prints the model's call
and the runner ends the spawn. What each flag does and how it was verified:
``tests/fixtures/cli-reference/claude/README.md``, "Invocation: why each flag"; tool calls:
``docs/adr/0012-tool-calling-on-cli-hops.md``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
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
from olp.ir import ChatRequest, Effort, ImagePart, Reasoning
from olp.providers._images import decode_image_url
from olp.providers._prompt import flatten_prompt, json_instruction, system_text

SYSTEM_PROMPT_FILE: Final = "system-prompt.txt"
MCP_CONFIG_FILE: Final = "olp-mcp.json"
#: How claude names a tool of OLP's bridge: ``mcp__<server>__<tool>``.
TOOL_PREFIX: Final = f"mcp__{SERVER_NAME}__"
DEFAULT_SYSTEM_PROMPT: Final = "You are a helpful assistant."
# every built-in tool, MCP server, hook, settings file, skill, command and instruction file
# other than the system prompt file kept away (what each one does: the fixture README)
LOCKDOWN_ARGS: Final = ("--tools", "", "--strict-mcp-config", "--setting-sources", "",
                        "--disable-slash-commands", "--safe-mode")
# With offered tools: ``--safe-mode`` also turns off the servers of ``--mcp-config`` (claude
# 2.1.332 then starts no MCP server at all), so it is left out; what only it kept away (the
# managed /etc/claude-code CLAUDE.md and agents) is outside the sandbox's view of /etc.
TOOLS_LOCKDOWN_ARGS: Final = tuple(a for a in LOCKDOWN_ARGS if a != "--safe-mode")
#: A level of OLP's scale → claude's ``--effort`` (2.1.332 has low, medium, high, xhigh, max,
#: and silently sends the model's default for any other word, so ``minimal`` must be mapped).
#: Sent as ``output_config.effort`` by the models with adaptive thinking (opus, sonnet).
EFFORT_LEVELS: Final[Mapping[Effort, str]] = {
    "minimal": "low", "low": "low", "medium": "medium", "high": "high"}
#: A level → the thinking budget for the models that take one instead (claude-haiku-4-5 sends
#: ``thinking.budget_tokens`` from ``--max-thinking-tokens`` and ignores ``--effort``; the
#: adaptive models ignore the budget). The inverse of ``effort_for_budget``; claude clamps a
#: budget to 1024..max_tokens-1 itself (its default for haiku: 31999).
THINKING_BUDGETS: Final[Mapping[Effort, int]] = {
    "minimal": 1024, "low": 4096, "medium": 16384, "high": 31999}


def build_invocation(request: ChatRequest, *, binary: str, model: str, workdir: Path,
                     extra_args: Sequence[str] = ()) -> Invocation:
    """``claude -p`` in stream-json mode both ways: the user turn is one JSON line on stdin
    (:func:`user_line`), the system text in a file.

    Everything but stdin depends only on the system text, the model, the offered tools, the
    reasoning asked for (:func:`reasoning_args`) and ``extra_args``, never on the
    conversation: a claude started ahead of time waits on stdin for its turn
    (``--input-format stream-json`` waits indefinitely), so a warm process bound to those can
    take any request that shares them (``olp/actors/_warm.py``).

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
        *reasoning_args(request.reasoning), *extra_args,
    ]
    return Invocation(argv=argv, stdin=user_line(prompt, images), files=files)


def reasoning_args(reasoning: Reasoning | None) -> list[str]:
    """claude's flags for the request's reasoning (none when it asked nothing).

    ``none`` → ``--thinking disabled`` (``thinking: {"type": "disabled"}`` upstream). Another
    effort → ``--effort`` (:data:`EFFORT_LEVELS`) and ``--max-thinking-tokens`` (the request's
    budget, else :data:`THINKING_BUDGETS`): each model family reads the one it has. ``show``
    → ``--thinking-display summarized``: in stream-json mode claude asks for ``display:
    "updates"``, under which the API sends reasoning blocks without their text. Measured with
    claude 2.1.332: ``tests/fixtures/cli-reference/claude/reasoning/README.md``."""
    if reasoning is None:
        return []
    if reasoning.effort == "none":
        return ["--thinking", "disabled"]
    args: list[str] = []
    if reasoning.effort is not None:
        args += ["--effort", EFFORT_LEVELS[reasoning.effort]]
    budget = reasoning.budget_tokens or (
        THINKING_BUDGETS[reasoning.effort] if reasoning.effort is not None else None)
    if budget is not None:
        args += ["--max-thinking-tokens", str(budget)]
    if reasoning.show:
        args += ["--thinking-display", "summarized"]
    return args


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
