"""The argv, stdin and files for one ``claude -p`` spawn. No client text ever goes on argv."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from olp.actors._adapter import CapabilityMissing, Invocation
from olp.actors._prompt import flatten_prompt, json_instruction, system_text
from olp.ir import ChatRequest, ImagePart

SYSTEM_PROMPT_FILE: Final = "system-prompt.txt"
DEFAULT_SYSTEM_PROMPT: Final = "You are a helpful assistant."


def build_invocation(request: ChatRequest, *, binary: str, model: str, workdir: Path,
                     extra_args: Sequence[str] = ()) -> Invocation:
    """``claude -p`` in stream-json mode, the prompt on stdin, the system text in a file.

    The system text is every system/developer message joined by blank lines, or
    :data:`DEFAULT_SYSTEM_PROMPT` when there is none (so claude's long agent prompt is not
    sent). ``response_format`` json_object/json_schema becomes an instruction at the head of
    the prompt (``--json-schema`` would put client text on argv). Raises
    :class:`CapabilityMissing` ``("images")`` when any message carries an image. Tools in the
    request are not looked at: the actor/engine decide on that capability.
    """
    if any(isinstance(p, ImagePart) for m in request.messages for p in m.content):
        raise CapabilityMissing("images")
    system = system_text(request.messages).strip() or DEFAULT_SYSTEM_PROMPT
    prompt = flatten_prompt(request.messages, include_system=False)
    instruction = json_instruction(request.response_format)
    if instruction is not None:
        prompt = f"{instruction}\n\n{prompt}" if prompt else instruction
    argv = [
        binary, "-p", "--output-format", "stream-json", "--verbose",
        "--include-partial-messages", "--tools", "", "--no-session-persistence",
        "--model", model, "--system-prompt-file", str(workdir / SYSTEM_PROMPT_FILE),
        *extra_args,
    ]
    return Invocation(argv=argv, stdin=prompt.encode("utf-8"),
                      files={SYSTEM_PROMPT_FILE: system})
