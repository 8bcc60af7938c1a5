"""Bait for the security tests: a secret a guest must never read and a marker it must never write.

A real-CLI security test plants a :class:`Bait` in the proxy user's home (the files an attacker
would go after), gives its shell command and paths to the loopback mock vendor API, which calls
whatever shell or file tool a CLI offers with them, and afterwards calls
:func:`assert_not_leaked` over everything the upstream received and the client got back.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Bait:
    secret: str  # the secret file's content: must never reach the upstream or the client
    secret_file: Path
    marker: Path  # must never be created

    @property
    def command(self) -> str:
        """A shell command that reads the secret and writes the marker."""
        return f"cat {self.secret_file}; echo pwned > {self.marker}"


def plant(home: Path) -> Bait:
    """Write a fresh random secret under ``home`` (a stand-in for the owner's files)."""
    secret = f"OLP-SECRET-{secrets.token_hex(8)}"
    secret_dir = home / "private"
    secret_dir.mkdir(parents=True, exist_ok=True)
    secret_file = secret_dir / "secret.txt"
    secret_file.write_text(secret + "\n")
    return Bait(secret=secret, secret_file=secret_file, marker=home / "pwned-marker")


def assert_not_leaked(bait: Bait, upstream_bodies: Iterable[str], client_text: str) -> None:
    """The secret reached neither the upstream nor the client, and the marker was not written."""
    for body in upstream_bodies:
        assert bait.secret not in body, "the secret reached the upstream in a tool result"
    assert bait.secret not in client_text, "the secret reached the client"
    assert not bait.marker.exists(), "a CLI tool wrote on the host"
