"""The argv, stdin and per-spawn environment for one ``vibe -p`` run. No client text on argv.

``vibe -p --output streaming --output-dir <workdir>/out --disabled-tools '*'`` reads the
prompt (system text at its head: vibe has no system-prompt flag) from stdin. The model is
selected and defined for the spawn through the environment (:func:`model_env`: an unknown
alias would silently fall back to vibe's default), ``VIBE_HOME`` is the spawn's private one,
and ``export.json`` in the output directory gives the parser usage and the error code. The
request's reasoning effort becomes the model entry's ``thinking`` (:func:`thinking_fields`),
which vibe sends as Mistral's ``reasoning_effort``, ``none`` or ``high``. vibe is
a model here, never an agent: every tool is off on argv and in the environment
(:data:`TOOLS_OFF_ENV`), which no config file can undo; what vibe still reads outside its home
is confined by the OS sandbox. What each flag and variable does and how it was verified:
``tests/fixtures/cli-reference/vibe/README.md``, "Invocation: why each flag and variable".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from olp.actors._adapter import CapabilityMissing, Invocation
from olp.ir import ChatRequest, ImagePart, Reasoning
from olp.providers._prompt import flatten_prompt, json_instruction

OUTPUT_DIR: Final = "out"
EXPORT_FILE: Final = "export.json"
VIBE_PROVIDER: Final = "mistral"
#: Every tool off (why each: the fixture README). Values are what vibe's env layer parses:
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


#: OLP's level → the model entry's ``thinking``. vibe 3.0.2's runtime (its local harness,
#: ``adapters/mistral.py``) sends Mistral's ``reasoning_effort`` from it: ``low`` → ``"none"``,
#: ``medium``/``high``/``max`` → ``"high"``, ``off`` (the default) → no field. So ``none`` is
#: ``low`` (the only level that sends ``"none"``) and every other level ``high``. Measured:
#: ``tests/fixtures/cli-reference/vibe/reasoning/``.
THINKING: Final = {"none": "low", "level": "high"}


def thinking_fields(reasoning: Reasoning | None) -> dict[str, Any]:
    """The model entry's ``thinking`` for the request's effort (:data:`THINKING`; the engine
    has already mapped a level to the nearest the registry lists); nothing when no level was
    asked (vibe's own default, ``off``: no ``reasoning_effort``)."""
    if reasoning is None or reasoning.effort is None:
        return {}
    return {"thinking": THINKING["none" if reasoning.effort == "none" else "level"]}


def model_env(model: str, reasoning: Reasoning | None = None) -> dict[str, str]:
    """``VIBE_ACTIVE_MODEL`` plus a ``VIBE_MODELS`` entry that makes ``model`` the upstream
    model name (why: the fixture README), with the request's :func:`thinking_fields`."""
    entry = {"alias": model, "name": model, "provider": VIBE_PROVIDER,
             **thinking_fields(reasoning)}
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
    env = {"VIBE_HOME": str(spawn_home(workdir) / ".vibe"), **model_env(model, request.reasoning),
           **TOOLS_OFF_ENV}
    return Invocation(argv=argv, stdin=prompt.encode("utf-8"), env=env)
