"""What a CLI provider must tell the actor: how to invoke it and how to read what it prints.

An adapter is pure (no I/O, no trio): the actor owns processes, deadlines and cancellation;
the adapter turns a request into an :class:`Invocation` and the CLI's stdout lines into IR
events. That split lets the same parser run against recorded transcripts, a scripted fake
spawner under ``MockClock``, and the real binary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from olp.ir import ChatRequest, Error, Event


@dataclass(frozen=True, slots=True)
class Invocation:
    """One spawn: argv (never client text), the bytes for stdin, and files for the temp dir.

    ``files`` maps a name relative to the spawn's temporary working directory to its text
    (claude's ``--system-prompt-file`` points at one); ``binary_files`` the same for bytes
    (images). ``home_files`` maps a path relative to the spawn's private home to its text: a
    CLI's own settings (gemini's ``.gemini/settings.json``), for a CLI that reads the files in
    its working directory as the user's (keep that directory empty). They are written after the
    owner's ``home_files``, so the adapter's settings always win. ``env`` is added to the CLI's
    environment for this spawn only (e.g. vibe's ``VIBE_ACTIVE_MODEL``). ``argv[0]`` is the
    binary.
    """

    argv: Sequence[str]
    stdin: bytes
    files: Mapping[str, str] = field(default_factory=dict)
    binary_files: Mapping[str, bytes] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    home_files: Mapping[str, str] = field(default_factory=dict)


class LineParser(Protocol):
    """Per-job parser state. ``feed`` may be called many times, then ``finish`` once."""

    def feed(self, line: bytes) -> Sequence[Event]:
        """IR events for one stdout line (often none). Never raises on odd input."""
        ...

    def trailer(self, returncode: int, stderr_tail: bytes) -> Sequence[Event]:
        """Events known only once the CLI has exited, before the terminal one (vibe's usage,
        read from its ``export.json``); usually none."""
        ...

    def finish(self, returncode: int, stderr_tail: bytes) -> Event:
        """The terminal event (:class:`olp.ir.Stop` or :class:`olp.ir.Error`) after exit."""
        ...


class Credentials(Protocol):
    """Where a CLI's login lives and how a spawn gets it. Each CLI subpackage's
    ``_credentials`` module implements it (its :class:`CliAdapter` delegates to that module)."""

    def spawn_env(self, proxy_env: Mapping[str, str]) -> dict[str, str]:
        """Variables this CLI always gets (e.g. ``DISABLE_AUTOUPDATER=1``) plus the credential
        variables passed through from the proxy's own environment (e.g.
        ``CLAUDE_CODE_OAUTH_TOKEN``). The actor adds ``PATH``, ``HOME``, ``LANG``, ``TMPDIR``
        and the provider's configured ``env`` on top; nothing else leaks in."""
        ...

    def home_links(self, env: Mapping[str, str], real_home: Path) -> dict[str, Path]:
        """Credential files to symlink into the per-spawn temporary home: a path relative to
        that home mapped to the existing real file (a key file, or a login OLP does not keep;
        a login OLP keeps is never linked: the spawn gets its pass, :mod:`._login`)."""
        ...

    def preflight(self, env: Mapping[str, str], home: Path) -> Error | None:
        """``AUTH_MISSING`` when no credential is found; ``None`` when one is.

        ``env`` is the environment the CLI will get (the provider's configured ``env``
        merged in), ``home`` the real user's home where credential files live.
        """
        ...


class CliAdapter(Credentials, Protocol):
    """A vendor CLI as the actor sees it: how to invoke it, how to read it, and (as
    :class:`Credentials`) how it finds its login."""

    name: str

    def invocation(self, request: ChatRequest, *, binary: str, model: str,
                   workdir: Path, extra_args: Sequence[str] = ()) -> Invocation: ...

    def parser(self, workdir: Path) -> LineParser:
        """A fresh parser for one job; ``workdir`` is the spawn's temporary working directory
        (vibe's ``export.json`` is read from there when it exits)."""
        ...


class CapabilityMissing(Exception):
    """Raised by :meth:`CliAdapter.invocation` when the request needs something this CLI
    cannot do (images, say). The actor answers ``CAPABILITY`` instead of degrading silently."""

    def __init__(self, capability: str) -> None:
        super().__init__(f"this provider cannot handle {capability}")
        self.capability = capability
