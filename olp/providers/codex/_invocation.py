"""The argv, stdin and files for one ``codex exec`` spawn. No client text ever goes on argv.

``codex exec --json --skip-git-repo-check --ephemeral --sandbox read-only --ignore-rules
<TOOLS_OFF> -c model_catalog_json=<catalog> [<BRIDGE>] -m MODEL [<REASONING>]
[--image=<path> ...] [--output-schema <file>] [extra_args ...] -``, the prompt on stdin
(closed after it).

codex is a model here, never an agent: every built-in tool that has a switch is off
(:data:`TOOLS_OFF`) and a model catalog holding only a placeholder (:data:`CATALOG_FILE`)
keeps off the ones that have none. A request's tools reach the model only through OLP's
bridge, a ``required`` MCP server (:func:`bridge_args`). System text and ``response_format``
go at the head of the prompt (a strict ``json_schema`` also as ``--output-schema``); ``data:``
images become ``--image`` files, any other image is :class:`CapabilityMissing`. The request's
reasoning becomes ``-c model_reasoning_effort`` / ``-c model_reasoning_summary``
(:func:`reasoning_args`). What each flag does and how it was measured:
``tests/fixtures/cli-reference/codex/README.md``, "Invocation: why each flag".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

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
from olp.providers._images import IMAGE_TYPES, decode_image_url
from olp.providers._prompt import flatten_prompt, json_instruction

SCHEMA_FILE: Final = "output-schema.json"
CATALOG_FILE: Final = "model-catalog.json"
#: Built-in tools (and tool-adjacent start-up work) switched off; each one: the fixture README.
TOOLS_OFF: Final = (
    "-c", "features.shell_tool=false", "-c", "features.unified_exec=false",
    "-c", "features.view_image=false", "-c", "features.goals=false",
    "-c", "features.multi_agent=false", "-c", "features.multi_agent_v2=false",
    "-c", "features.apps=false", "-c", "features.plugins=false",
    "-c", "features.hooks=false", "-c", "features.shell_snapshot=false",
    "-c", "features.image_generation=false",
    "-c", "tools.experimental_request_user_input={enabled=false}",
    "-c", 'web_search="disabled"', "-c", "project_doc_max_bytes=0",
    "-c", "analytics.enabled=false",
)
BASE_ARGS: Final = ("exec", "--json", "--skip-git-repo-check", "--ephemeral",
                    "--sandbox", "read-only", "--ignore-rules", *TOOLS_OFF)
#: The model catalog codex gets instead of its bundled one: a hidden placeholder only (the
#: fields codex 0.171.0 requires), so that every requested model runs on fallback metadata —
#: no ``apply_patch``, no ``tool_search``, no code mode.
CATALOG: Final = json.dumps({"models": [{
    "slug": "olp-placeholder", "display_name": "olp-placeholder", "visibility": "hide",
    "supported_in_api": False, "priority": 0, "supported_reasoning_levels": [],
    "shell_type": "disabled", "support_verbosity": False,
    "truncation_policy": {"mode": "tokens", "limit": 10000}, "base_instructions": "-",
    "experimental_supported_tools": [], "apply_patch_tool_type": None,
    "supports_search_tool": False,
}]}, sort_keys=True)

#: A level of OLP's scale → codex's ``model_reasoning_effort``, which codex 0.171.0 sends as
#: ``reasoning.effort`` without checking it. Every model of its bundled catalog starts at
#: ``low`` (gpt-5.5: low, medium, high, xhigh), so ``minimal`` → ``low``; ``none`` goes as it is
#: (the models that take it turn reasoning off; the registry says which do).
EFFORT_LEVELS: Final[Mapping[Effort, str]] = {
    "none": "none", "minimal": "low", "low": "low", "medium": "medium", "high": "high"}
#: The ``model_reasoning_summary`` values codex takes (``none``: no summary asked for).
SUMMARIES: Final = ("auto", "concise", "detailed", "none")


def build_invocation(request: ChatRequest, *, binary: str, model: str, workdir: Path,
                     extra_args: Sequence[str] = ()) -> Invocation:
    """The spawn for one request (details in the module docstring)."""
    images = _images(request)
    prompt = flatten_prompt(request.messages, include_system=True)
    tools = offered_tools(request)
    for instruction in (json_instruction(request.response_format),
                        tool_instruction(request) if tools else None):
        if instruction is not None:
            prompt = f"{instruction}\n\n{prompt}" if prompt else instruction
    # a TOML string (json.dumps of a path is one); the path is the proxy's, never client text
    catalog = f"model_catalog_json={json.dumps(str(workdir / CATALOG_FILE))}"
    argv = [binary, *BASE_ARGS, "-c", catalog]
    files: dict[str, str] = {CATALOG_FILE: CATALOG}
    if tools:
        files[TOOLS_FILE] = tools_file_text(tools)
        argv += bridge_args(workdir)
    argv += ["-m", model, *reasoning_args(request.reasoning)]
    binary_files: dict[str, bytes] = {}
    for name, data in images:
        binary_files[name] = data
        argv.append(f"--image={workdir / name}")
    schema = strict_schema(request.response_format)
    if schema is not None:
        files[SCHEMA_FILE] = json.dumps(schema, ensure_ascii=False, sort_keys=True)
        argv += ["--output-schema", str(workdir / SCHEMA_FILE)]
    argv += [*extra_args, "-"]
    return Invocation(argv=argv, stdin=prompt.encode("utf-8"), files=files,
                      binary_files=binary_files)


def reasoning_args(reasoning: Reasoning | None) -> list[str]:
    """codex's ``-c`` overrides for the request's reasoning (none when it asked nothing): the
    effort (:data:`EFFORT_LEVELS`) as ``model_reasoning_effort``; the summary asked for as
    ``model_reasoning_summary``, or ``auto`` when the client wants the thinking back without
    naming one (codex's own default, made explicit so a config cannot turn it off). Measured
    with codex 0.171.0: ``tests/fixtures/cli-reference/codex/reasoning/README.md``."""
    if reasoning is None:
        return []
    args: list[str] = []
    if reasoning.effort is not None:
        args += ["-c", f"model_reasoning_effort={json.dumps(EFFORT_LEVELS[reasoning.effort])}"]
    summary = reasoning.summary if reasoning.summary in SUMMARIES else (
        "auto" if reasoning.show else None)
    if summary is not None:
        args += ["-c", f"model_reasoning_summary={json.dumps(summary)}"]
    return args


def bridge_args(workdir: Path) -> list[str]:
    """The ``-c`` overrides that make codex launch OLP's bridge as the required MCP server
    :data:`SERVER_NAME` (TOML values: ``json.dumps`` of strings and string lists is valid
    TOML; every path is the proxy's own)."""
    command, args = bridge_command(workdir)
    key = f"mcp_servers.{SERVER_NAME}"
    return ["-c", f"{key}.command={json.dumps(command)}",
            "-c", f"{key}.args={json.dumps(args)}",
            "-c", f"{key}.required=true"]


def strict_schema(response_format: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The schema of a ``json_schema`` response format whose ``strict`` is true, else None."""
    if not isinstance(response_format, Mapping) or response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    if not isinstance(spec, Mapping) or spec.get("strict") is not True:
        return None
    schema = spec.get("schema")
    return schema if isinstance(schema, Mapping) else None


def _images(request: ChatRequest) -> list[tuple[str, bytes]]:
    """``(file name, bytes)`` for every image part, in message order."""
    out: list[tuple[str, bytes]] = []
    for message in request.messages:
        for part in message.content:
            if isinstance(part, ImagePart):
                mime, data = decode_image_url(part.url)
                out.append((f"image-{len(out) + 1}.{IMAGE_TYPES[mime]}", data))
    return out
