"""The ``qwen`` provider: qwen-code (``qwen -o stream-json``, npm ``@qwen-code/qwen-code``) as
a pure :class:`~olp.actors.CliAdapter`.

qwen streams token deltas (``--include-partial-messages``) after ~2-4 s of Node start-up;
upstream errors come as ``[API Error: ...]`` text and a ``result`` error, which the parser
never forwards as content. It runs with every built-in tool off through a per-spawn
``~/.qwen/settings.json`` in its private home. A request's tools reach the model through
OLP's MCP bridge (the one MCP server qwen may start, in a workdir trusted for that spawn
only); the parser reports the model's calls and the runner kills qwen at the end of the
model's message. See ``cli-reference/qwen/README.md`` and ``cli-reference/qwen/tools/``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from olp.actors._adapter import Invocation
from olp.ir import ChatRequest, Error

from . import _credentials
from ._invocation import build_invocation
from ._parser import QwenParser
from ._spec import SPEC


class QwenAdapter:
    """qwen in ``-o stream-json --include-partial-messages`` mode, prompt on stdin."""

    name: str = "qwen"

    def invocation(self, request: ChatRequest, *, binary: str, model: str,
                   workdir: Path, extra_args: Sequence[str] = ()) -> Invocation:
        return build_invocation(request, binary=binary, model=model, workdir=workdir,
                                extra_args=extra_args)

    def parser(self, workdir: Path) -> QwenParser:
        return QwenParser()

    def spawn_env(self, proxy_env: Mapping[str, str]) -> dict[str, str]:
        return _credentials.spawn_env(proxy_env)

    def home_links(self, env: Mapping[str, str], real_home: Path) -> dict[str, Path]:
        return _credentials.home_links(env, real_home)

    def preflight(self, env: Mapping[str, str], home: Path) -> Error | None:
        return _credentials.preflight(env, home)


__all__ = ["SPEC", "QwenAdapter", "QwenParser"]
