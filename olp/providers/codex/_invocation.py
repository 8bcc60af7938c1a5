"""The argv, stdin and files for one ``codex exec`` spawn. No client text ever goes on argv.

``codex exec --json --skip-git-repo-check --ephemeral --sandbox read-only --ignore-rules
<TOOLS_OFF> -c model_catalog_json="<workdir>/model-catalog.json" [<BRIDGE>] -m MODEL
[--image=<workdir>/image-N.EXT ...] [--output-schema <workdir>/output-schema.json]
[extra_args ...] -`` with the prompt on stdin (``-``: the whole prompt is read from stdin; the
runner closes stdin after it — an open stdin blocks codex).

* **codex is a model here, never an agent.** codex 0.171.0 offers the upstream model its own
  tools and runs them on the host (``exec_command`` read any file the proxy user can read). So
  every built-in tool that can be switched off is (verified against the real binary with a
  loopback mock logging each request's ``tools`` and ``additional_tools`` input items;
  ``tests/fixtures/security/codex-tools-{before,after}.json``):

  - :data:`TOOLS_OFF` ``-c features.X=false`` for ``shell_tool``/``unified_exec``
    (``exec_command``, ``write_stdin``, ``shell*``), ``view_image``, ``goals`` (goal tools),
    ``multi_agent``/``multi_agent_v2`` (``spawn_agent`` & co.), ``apps``/``plugins`` (connector
    MCP tools), ``hooks`` (configured hook commands), ``shell_snapshot`` (a ``bash -l`` run at
    start-up); ``web_search="disabled"``; ``project_doc_max_bytes=0`` (no ``AGENTS.md`` from
    the workdir). ``-c``, not ``--disable``: an owner can deliberately switch one back on with
    ``--enable X`` in ``extra_args`` (``--disable`` could not be undone).
  - ``apply_patch``, ``tool_search`` and *code mode* (a JavaScript ``exec`` tool reaching every
    nested tool, with ``spawn_agent``...) have no switch: the model's catalog entry turns them
    on (``apply_patch_tool_type``, ``supports_search_tool``, ``tool_mode``). So codex gets a
    catalog (:data:`CATALOG_FILE`, ``model_catalog_json`` replaces the bundled one) holding
    only a hidden placeholder: every real model then runs on codex's *fallback metadata*,
    which enables none of them (codex prints a non-fatal "Model metadata for `M` not found"
    warning item; its generic base instructions are sent and no model-specific reasoning
    defaults).
  - ``-c features.image_generation=false``: with a ChatGPT login codex also offers
    ``image_gen`` (a tool codex runs itself, taking local image paths), not with an API key;
    ``-c tools.experimental_request_user_input={enabled=false}`` removes
    ``request_user_input`` (a plain boolean there is refused, exit 1). Measured in
    ``tests/fixtures/cli-reference/codex/app_server/`` (the same flags give ``"tools": []``).
    Anything an owner turns back on is contained only by the OS sandbox.

* **The request's tools** (when :func:`offered_tools` is not empty) reach the model through
  OLP's MCP bridge: ``olp-tools.json`` in the workdir and ``-c mcp_servers.olp.command=...
  -c mcp_servers.olp.args=[...] -c mcp_servers.olp.required=true`` (:func:`bridge_args`; only
  the proxy's own paths on argv). On fallback metadata codex offers them directly, as the
  Responses ``namespace`` tool ``mcp__olp`` holding each tool under its own name, plus
  ``list_mcp_resources``/``list_mcp_resource_templates``/``read_mcp_resource`` (they only
  read from the bridge, which has no resources). ``exec`` never approves an MCP call
  ("requires approval, but approval policy is never"), so codex sends no ``tools/call``;
  ``required=true`` makes a bridge that fails to start fatal (exit 1 before any upstream
  request) instead of a silent run without the tools. A forced ``tool_choice`` adds
  :func:`tool_instruction` at the head of the prompt. Measured in
  ``tests/fixtures/cli-reference/codex/tools/``.
* **System/developer text** goes at the head of the prompt (:func:`flatten_prompt` with
  ``include_system=True``). codex has no system-prompt flag; ``-c developer_instructions=...``
  would put client text on argv, and ``-c model_instructions_file=<file>`` (which works, and
  would replace codex's own coding-agent instructions) is refused by the ChatGPT-login backend
  ("Instructions are not valid", openai/codex#3376) — the subscription path must keep working.
* **response_format** ``json_object``/``json_schema`` → an instruction at the head of the
  prompt (:func:`json_instruction`). A ``json_schema`` with ``"strict": true`` is also written
  to ``output-schema.json`` in the workdir and passed as ``--output-schema`` (codex then sends
  it as the request's strict ``text.format``; verified with the real CLI) — only when strict,
  because codex always marks it strict and OpenAI then rejects schemas that are not.
* **Images**: each ``data:`` URL is decoded into ``image-N.<ext>`` in the workdir and passed
  as ``--image=<path>`` (the ``=`` form: ``-i`` takes several values and would swallow the
  ``-``). Remote URLs → :class:`CapabilityMissing` (OLP fetches no URL); any other scheme
  (``file:``...) or an undecodable/unsupported data URL → ``CapabilityMissing`` too.
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
from olp.ir import ChatRequest, ImagePart
from olp.providers._images import IMAGE_TYPES, decode_image_url
from olp.providers._prompt import flatten_prompt, json_instruction

SCHEMA_FILE: Final = "output-schema.json"
CATALOG_FILE: Final = "model-catalog.json"
#: Built-in tools (and tool-adjacent start-up work) switched off; see the module docstring.
TOOLS_OFF: Final = (
    "-c", "features.shell_tool=false", "-c", "features.unified_exec=false",
    "-c", "features.view_image=false", "-c", "features.goals=false",
    "-c", "features.multi_agent=false", "-c", "features.multi_agent_v2=false",
    "-c", "features.apps=false", "-c", "features.plugins=false",
    "-c", "features.hooks=false", "-c", "features.shell_snapshot=false",
    "-c", "features.image_generation=false",
    "-c", "tools.experimental_request_user_input={enabled=false}",
    "-c", 'web_search="disabled"', "-c", "project_doc_max_bytes=0",
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
    argv += ["-m", model]
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
