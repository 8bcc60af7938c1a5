"""The ``mistral`` provider: Mistral Vibe (``vibe -p``, PyPI ``mistral-vibe``) as a pure
:class:`~olp.actors.CliAdapter`.

vibe prints whole messages (no token deltas), so a hop's content arrives when the answer is
done (~5 s of start-up first); usage and the error code are in the ``export.json`` it writes
into ``--output-dir`` on exit, errors on stderr. See ``cli-reference/vibe/README.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from olp.actors._adapter import Invocation
from olp.ir import ChatRequest, Error

from . import _credentials
from ._invocation import build_invocation
from ._parser import VibeParser
from ._spec import SPEC


class VibeAdapter:
    """vibe in ``-p --output streaming --output-dir <workdir>/out`` mode, prompt on stdin."""

    name: str = "mistral"

    def invocation(self, request: ChatRequest, *, binary: str, model: str,
                   workdir: Path, extra_args: Sequence[str] = ()) -> Invocation:
        return build_invocation(request, binary=binary, model=model, workdir=workdir,
                                extra_args=extra_args)

    def parser(self, workdir: Path) -> VibeParser:
        return VibeParser(workdir)

    def spawn_env(self, proxy_env: Mapping[str, str]) -> dict[str, str]:
        return _credentials.spawn_env(proxy_env)

    def home_links(self, env: Mapping[str, str], real_home: Path) -> dict[str, Path]:
        return _credentials.home_links(env, real_home)

    def preflight(self, env: Mapping[str, str], home: Path) -> Error | None:
        return _credentials.preflight(env, home)


__all__ = ["SPEC", "VibeAdapter", "VibeParser"]
