"""The argv, stdin and per-spawn environment for one ``vibe -p`` run. No client text on argv.

Verified against the real vibe 3.0.2 (``tests/realcli/test_proxy_real_vibe.py``):

* ``vibe -p`` with no prompt argument reads the prompt from **stdin** (to EOF; a trailing
  newline is dropped, everything else - newlines, indentation - is sent verbatim as the user
  message). Empty stdin exits 1 with ``Error: No prompt provided for programmatic mode``.
* vibe has no system-prompt flag, so the system/developer text goes at the head of the prompt
  (:func:`olp.actors._prompt.flatten_prompt` with ``include_system=True``).
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
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from olp.actors._adapter import CapabilityMissing, Invocation
from olp.actors._prompt import flatten_prompt, json_instruction
from olp.ir import ChatRequest, ImagePart

OUTPUT_DIR: Final = "out"
EXPORT_FILE: Final = "export.json"
VIBE_PROVIDER: Final = "mistral"


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
    """``vibe -p --output streaming --output-dir <workdir>/out [extra_args]``, the whole
    conversation (system text first) on stdin, the model and ``VIBE_HOME`` in the env.

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
            *extra_args]
    env = {"VIBE_HOME": str(spawn_home(workdir) / ".vibe"), **model_env(model)}
    return Invocation(argv=argv, stdin=prompt.encode("utf-8"), env=env)
