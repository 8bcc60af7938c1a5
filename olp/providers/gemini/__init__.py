"""The ``gemini`` provider: Google's gemini-cli (``gemini -p``, npm ``@google/gemini-cli``) as
a pure :class:`~olp.actors.CliAdapter`.

gemini streams token deltas (``-o stream-json``) after ~2 s of start-up; usage and the
outcome are in its last line, ``result``. Every built-in tool, skill and agent is off, and
every MCP server but OLP's tool bridge when the request offers tools (the model's call is a
``tool_use`` line, and the job ends there); the prompt is guarded against the CLI's slash
commands and the working directory stays empty (``@path`` would inline its files). See
``cli-reference/gemini/README.md`` and ``cli-reference/gemini/tools/README.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from olp.actors._adapter import Invocation
from olp.actors._toolbridge import TOOLS_FILE
from olp.ir import ChatRequest, Error

from . import _credentials
from ._invocation import build_invocation, spawn_home
from ._parser import GeminiParser
from ._spec import SPEC


class GeminiAdapter:
    """gemini in ``-p "" -o stream-json`` mode, prompt on stdin, settings in its private home."""

    name: str = "gemini"

    def invocation(self, request: ChatRequest, *, binary: str, model: str,
                   workdir: Path, extra_args: Sequence[str] = ()) -> Invocation:
        return build_invocation(request, binary=binary, model=model, workdir=workdir,
                                extra_args=extra_args)

    def parser(self, workdir: Path) -> GeminiParser:
        # The runner wrote the spawn's files first: a tools file means a run with the bridge
        # (one stat of the private home; the parser then holds text back, see _parser.py).
        return GeminiParser(hold_text=(spawn_home(workdir) / TOOLS_FILE).exists())

    def spawn_env(self, proxy_env: Mapping[str, str]) -> dict[str, str]:
        return _credentials.spawn_env(proxy_env)

    def home_links(self, env: Mapping[str, str], real_home: Path) -> dict[str, Path]:
        return _credentials.home_links(env, real_home)

    def preflight(self, env: Mapping[str, str], home: Path) -> Error | None:
        return _credentials.preflight(env, home)


__all__ = ["SPEC", "GeminiAdapter", "GeminiParser"]
