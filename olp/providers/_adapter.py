"""One :class:`~olp.actors.CliAdapter` for every CLI provider, built from the provider's parts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from olp.actors._adapter import Credentials, Invocation, LineParser
from olp.actors._sessions import SessionKit
from olp.ir import ChatRequest, Error

__all__ = ["BuildInvocation", "ProviderAdapter"]


class BuildInvocation(Protocol):
    """A provider's ``_invocation.build_invocation``: a request → the spawn that answers it."""

    def __call__(self, request: ChatRequest, *, binary: str, model: str, workdir: Path,
                 extra_args: Sequence[str] = ()) -> Invocation: ...


@dataclass(slots=True, kw_only=True)
class ProviderAdapter:
    """A CLI provider as the actor sees it: ``name`` (the provider's), how a request is
    spawned (``build_invocation``), a fresh parser for a spawn's working directory
    (``parser_for``), where its login is (``credentials``, its ``_credentials`` module) and,
    for a CLI that can continue its own sessions, how (``sessions``).

    Not frozen: :class:`~olp.actors.CliAdapter` declares ``name`` a plain attribute. Holds no
    state; one instance serves every job.
    """

    name: str
    build_invocation: BuildInvocation
    parser_for: Callable[[Path], LineParser]
    credentials: Credentials
    sessions: SessionKit | None = None  # how it keeps its own sessions, if it can (#25)

    def invocation(self, request: ChatRequest, *, binary: str, model: str,
                   workdir: Path, extra_args: Sequence[str] = ()) -> Invocation:
        return self.build_invocation(request, binary=binary, model=model, workdir=workdir,
                                     extra_args=extra_args)

    def parser(self, workdir: Path) -> LineParser:
        return self.parser_for(workdir)

    def spawn_env(self, proxy_env: Mapping[str, str]) -> dict[str, str]:
        return self.credentials.spawn_env(proxy_env)

    def home_links(self, env: Mapping[str, str], real_home: Path) -> dict[str, Path]:
        return self.credentials.home_links(env, real_home)

    def preflight(self, env: Mapping[str, str], home: Path) -> Error | None:
        return self.credentials.preflight(env, home)
