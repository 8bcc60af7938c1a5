"""The ``vibe-acp`` protocol as OLP speaks it: the constants, the errors, the server's
environment and the guard on command prompts.

A prompt whose first word starts with ``/`` is a vibe *command* in ACP and never reaches the
model (``/proxy-setup`` even writes ``$VIBE_HOME/.env``): :func:`guard_prompt` puts a
zero-width space in front of it, so it reaches the model as text, as with ``vibe -p``. The
tools are off through the environment only (:func:`server_env`): ``vibe-acp`` takes no
options. Facts: ``tests/fixtures/cli-reference/vibe/acp/README.md``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import trio

from olp.ir import Reasoning

from ._invocation import TOOLS_OFF_ENV, model_env

__all__ = ["ACP_BINARY", "ACP_ENV", "CLIENT_CAPABILITIES", "COMMAND_GUARD", "DENY_PERMISSION",
           "ERROR_KEY", "KILLED", "PROTOCOL_VERSION", "RESULT_KEY", "AcpError", "AcpServerGone",
           "acp_binary", "guard_prompt", "server_env"]

ACP_BINARY: Final = "vibe-acp"
PROTOCOL_VERSION: Final = 1
#: What OLP offers in ``initialize``: nothing the agent could ask the client to do.
CLIENT_CAPABILITIES: Final[Mapping[str, Any]] = {
    "fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
#: The ``session/request_permission`` result that denies (vibe: not ``AllowedOutcome`` →
#: ``ApprovalDecisionType.DENY``, with no "try something else" feedback to the model).
DENY_PERMISSION: Final[Mapping[str, Any]] = {"outcome": {"outcome": "cancelled"}}
#: Added for a long-lived process: no background title-generation request (a second billed
#: upstream call carrying the whole exchange) after every prompt. Session logging stays on:
#: with it off vibe keeps transcripts in a throwaway store ``_session/delete`` cannot clean,
#: and ``session/new`` began failing after six sessions (measured).
ACP_ENV: Final[Mapping[str, str]] = {"VIBE_SESSION_LOGGING__GENERATE_TITLES": "false"}
#: What the :class:`~olp.providers.vibe._acp_session.AcpSession` protocol line carries after
#: the updates.
RESULT_KEY: Final = "olp_prompt_result"
ERROR_KEY: Final = "olp_prompt_error"
COMMAND_GUARD: Final = "\u200b"  # ZERO WIDTH SPACE: not whitespace to str.split()
#: The return code of a session whose server died or that was killed.
KILLED: Final = -9


def acp_binary(vibe_binary: str) -> str:
    """``vibe-acp`` beside ``vibe_binary`` (the same installation) when that is a path,
    else the bare name (looked up on ``PATH``)."""
    if os.sep in vibe_binary:
        return str(Path(vibe_binary).with_name(ACP_BINARY))
    return ACP_BINARY


def server_env(model: str, vibe_home: Path, reasoning: Reasoning | None = None
               ) -> dict[str, str]:
    """The variables a ``vibe-acp`` process for ``model`` adds to the runner's base
    environment: ``VIBE_HOME``, :func:`model_env` (with the request's thinking level: a server
    is keyed by it, like any spawn's environment), :data:`TOOLS_OFF_ENV` (as for ``vibe -p``)
    and :data:`ACP_ENV`."""
    return {"VIBE_HOME": str(vibe_home), **model_env(model, reasoning), **TOOLS_OFF_ENV,
            **ACP_ENV}


def guard_prompt(text: str) -> str:
    """``text`` unchanged, unless vibe-acp would run it as a command (its first
    whitespace-separated word starts with ``/``): then with :data:`COMMAND_GUARD` in front."""
    words = text.split(None, 1)
    if words and words[0].startswith("/"):
        return COMMAND_GUARD + text
    return text


class AcpError(Exception):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, method: str, error: Mapping[str, Any]) -> None:
        self.method = method
        self.code = error.get("code")
        self.error_message = str(error.get("message", ""))
        super().__init__(f"{method}: JSON-RPC error {self.code}: {self.error_message}")


class AcpServerGone(trio.BrokenResourceError):
    """The server process ended (or stopped reading) before it answered."""
