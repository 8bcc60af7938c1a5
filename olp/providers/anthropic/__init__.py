"""The ``anthropic`` provider: Claude Code (``claude -p``) as a pure :class:`CliAdapter`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from olp.actors._adapter import Invocation
from olp.ir import ChatRequest, Error

from . import _credentials
from ._invocation import build_invocation
from ._parser import AnthropicParser
from ._spec import SPEC


class AnthropicAdapter:
    """claude in ``--output-format stream-json --include-partial-messages`` mode."""

    name: str = "anthropic"

    def invocation(self, request: ChatRequest, *, binary: str, model: str,
                   workdir: Path, extra_args: Sequence[str] = ()) -> Invocation:
        return build_invocation(request, binary=binary, model=model, workdir=workdir,
                                extra_args=extra_args)

    def parser(self, workdir: Path) -> AnthropicParser:
        return AnthropicParser()

    def spawn_env(self, proxy_env: Mapping[str, str]) -> dict[str, str]:
        return _credentials.spawn_env(proxy_env)

    def home_links(self, env: Mapping[str, str], real_home: Path) -> dict[str, Path]:
        return _credentials.home_links(env, real_home)

    def preflight(self, env: Mapping[str, str], home: Path) -> Error | None:
        return _credentials.preflight(env, home)


__all__ = ["SPEC", "AnthropicAdapter", "AnthropicParser"]
