"""The argv, stdin and per-spawn environment for one ``vibe -p`` run. No client text on argv.

Verified against the real vibe 3.0.2 (``tests/realcli/test_proxy_real_vibe.py``):

* ``vibe -p`` with no prompt argument reads the prompt from **stdin** (to EOF; a trailing
  newline is dropped, everything else - newlines, indentation - is sent verbatim as the user
  message). Empty stdin exits 1 with ``Error: No prompt provided for programmatic mode``.
* vibe has no system-prompt flag, so the system/developer text goes at the head of the prompt
  (:func:`olp.providers._prompt.flatten_prompt` with ``include_system=True``).
* ``VIBE_ACTIVE_MODEL`` selects a model by its *alias* in vibe's ``models`` config. An alias vibe
  does not know is **not** an error: vibe silently falls back to its default model
  (``mistral-vibe-cli-latest``). So the model is also defined for the spawn through
  ``VIBE_MODELS`` (vibe's env layer deep-merges it, by alias, over the user's and the
  ``home_files`` config): ``{"alias": M, "name": M, "provider": "mistral"}`` - the upstream
  request's ``model`` is then exactly ``M``, on vibe's ``mistral`` provider (whose ``api_base``
  a ``.vibe/config.toml`` in ``home_files`` may point elsewhere). Other settings of an alias
  ``M`` defined in that config (temperature, thinking, ...) are kept.
* ``VIBE_HOME`` is the per-spawn ``<base>/home/.vibe`` (the runner's temporary home is
  ``workdir.parent / "home"``): vibe writes logs, history and a trust store there.
* ``--output-dir <workdir>/out``: vibe writes ``export.json`` (usage, error code) there on every
  exit; the parser reads it when the process has ended.

vibe is used as a model, never as an agent (:data:`TOOLS_OFF_ENV`, in the spawn env). Read in
vibe 3.0.2's source and checked against the real binary and the loopback mock
(``tests/realcli/test_security_real_vibe.py``, ``tests/fixtures/security/vibe-tools-*.json``):

* vibe's config is layered (defaults < model catalog < experiments < ``$VIBE_HOME/config.toml``
  < trusted project ``.vibe/config.toml`` < ``VIBE_*`` env < CLI overrides < agent profile <
  org admin). ``disabled_tools`` merges by *concatenation* in every layer, so no config file,
  agent profile or ``home_files`` entry can take ``"*"`` back out; the invocation's env also
  wins over the provider's ``env``. It is on argv too (``--disabled-tools *``, the CLI
  overrides layer): vibe loads ``$VIBE_HOME/.env`` into its environment, and a lowercase
  ``vibe_disabled_tools=[]`` there would shadow the env value (pydantic-settings matches names
  case-insensitively; tested). Every vibe tool, MCP and connector tool leaves the catalogue:
  ``todo``, ``unified_harness_scratchpad`` are no longer offered.
* The Unified Harness runtime offers ``read_file``, ``write_file``, ``edit``, ``bash``,
  ``skill``, ``run_typescript`` and ``search_tool_functions`` whatever the config says (no
  setting turns its file-system, shell, programmatic or skill features off). With their vibe
  tools disabled the runtime gives each builtin the mode ``deny``, which also holds under
  ``--yolo``/auto-approve: a call comes back ``tool_denied`` ("denied by approval policy")
  before it runs. ``run_typescript`` is a bare V8 isolate (no ``process``/``require``,
  ``fetch`` throws) whose ``tools.*`` calls meet the same gate.
* Subagents and background processes off remove ``wait`` and those namespaces; MCP off starts
  no MCP server; connectors off skips the connector bootstrap request; the permission bypass
  off; project context off (no ``git`` run in the working directory and its parents); registry
  and user/project skills off (the bundled plugin's skills stay listed; ``skill`` is denied).
  ``enable_auto_approve`` stays on: off, vibe refuses to start (exit 2) for an owner whose
  config picks the ``auto-approve`` agent, and ``deny`` holds under auto-approve anyway.
* vibe still looks outside ``VIBE_HOME`` (``strace -f -e trace=%file`` of a real run):
  ``.vibe/config.toml`` and ``.git`` in the working directory and every parent up to ``/``
  (a project config applies only when trusted, and the trust store is the per-spawn
  ``VIBE_HOME``'s), the working directory's ``AGENTS.md``, ``.vibe/``, ``.agents/``,
  ``$HOME/.agents/skills`` (``HOME`` is the per-spawn home), ``/usr/bin/node``, runs
  ``/usr/bin/file`` on its Python (``/etc/magic``); per its source, with no key in the env,
  the system keyring. No setting switches these off; the OS sandbox confines them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from olp.actors._adapter import CapabilityMissing, Invocation
from olp.ir import ChatRequest, ImagePart
from olp.providers._prompt import flatten_prompt, json_instruction

OUTPUT_DIR: Final = "out"
EXPORT_FILE: Final = "export.json"
VIBE_PROVIDER: Final = "mistral"
#: Every tool off (see the module docstring). Values are what vibe's env layer parses:
#: JSON lists, ``true``/``false``.
TOOLS_OFF_ENV: Final[dict[str, str]] = {
    "VIBE_DISABLED_TOOLS": '["*"]',
    "VIBE_DISABLED_SKILLS": '["*"]',
    "VIBE_ENABLE_SUBAGENTS": "false",
    "VIBE_ENABLE_BACKGROUND_PROCESSES": "false",
    "VIBE_ENABLE_MCP": "false",
    "VIBE_ENABLE_CONNECTORS": "false",
    "VIBE_BYPASS_TOOL_PERMISSIONS": "false",
    "VIBE_EXPERIMENTAL_ENABLE_REGISTRY_SKILLS": "false",
    "VIBE_INCLUDE_PROJECT_CONTEXT": "false",
}
#: ``disabled_tools`` again in the CLI overrides layer, which no ``.env`` entry reaches.
DISABLED_TOOLS_ARGS: Final = ("--disabled-tools", "*")


def spawn_home(workdir: Path) -> Path:
    """The per-spawn temporary home the runner makes beside ``workdir``."""
    return workdir.parent / "home"


def export_path(workdir: Path) -> Path:
    """Where vibe writes ``export.json`` for a spawn whose working directory is ``workdir``."""
    return workdir / OUTPUT_DIR / EXPORT_FILE


def model_env(model: str) -> dict[str, str]:
    """``VIBE_ACTIVE_MODEL`` plus a ``VIBE_MODELS`` entry that makes ``model`` the upstream
    model name (see the module docstring)."""
    entry = {"alias": model, "name": model, "provider": VIBE_PROVIDER}
    return {"VIBE_ACTIVE_MODEL": model,
            "VIBE_MODELS": json.dumps([entry], ensure_ascii=False, separators=(",", ":"))}


def build_invocation(request: ChatRequest, *, binary: str, model: str, workdir: Path,
                     extra_args: Sequence[str] = ()) -> Invocation:
    """``vibe -p --output streaming --output-dir <workdir>/out --disabled-tools * [extra_args]``,
    the whole conversation (system text first) on stdin, the model, ``VIBE_HOME`` and
    :data:`TOOLS_OFF_ENV` in the env.

    ``response_format`` json_object/json_schema becomes an instruction at the head of the
    prompt. Raises :class:`CapabilityMissing` ``("images")`` when a message carries an image
    (the prompt is text on stdin). Tools in the request are not looked at here.
    """
    if any(isinstance(p, ImagePart) for m in request.messages for p in m.content):
        raise CapabilityMissing("images")
    prompt = flatten_prompt(request.messages, include_system=True)
    instruction = json_instruction(request.response_format)
    if instruction is not None:
        prompt = f"{instruction}\n\n{prompt}" if prompt else instruction
    argv = [binary, "-p", "--output", "streaming", "--output-dir", str(workdir / OUTPUT_DIR),
            *DISABLED_TOOLS_ARGS, *extra_args]
    env = {"VIBE_HOME": str(spawn_home(workdir) / ".vibe"), **model_env(model), **TOOLS_OFF_ENV}
    return Invocation(argv=argv, stdin=prompt.encode("utf-8"), env=env)
