"""The one client for the running proxy: its owner endpoints, found with ``--url`` and
``--token`` (else ``OLP_BIND``/``OLP_PORT`` and ``OLP_OWNER_TOKEN``). It blocks (a command,
not the server)."""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from olp.config import Settings


class ProxyRefused(Exception):
    """The proxy answered with an error status (the command fails with exit code 1)."""


def add_flags(command: argparse.ArgumentParser) -> None:
    """``--url`` and ``--token``, for a command that asks the running proxy."""
    command.add_argument("--url", help="the running proxy (default: OLP_BIND/OLP_PORT)")
    command.add_argument("--token", help="the owner key (default: OLP_OWNER_TOKEN)")


@dataclass(frozen=True, slots=True)
class Proxy:
    """The running proxy at ``address``, asked as the owner (``token``)."""

    address: str
    token: str | None

    @classmethod
    def of(cls, settings: Settings, args: argparse.Namespace) -> Proxy:
        """The proxy the command's ``--url`` and ``--token`` (or the settings) name."""
        return cls(args.url or f"http://{settings.bind}:{settings.port}",
                   args.token or settings.owner_token)

    def call(self, method: str, path: str) -> dict[str, Any] | None:
        """The JSON answer; ``None`` when no proxy answers (or no owner token is known).
        Raises :class:`ProxyRefused` when it answers with an error status."""
        url = self.address.rstrip("/")
        if not self.token:
            return None
        req = urllib.request.Request(f"{url}{path}", method=method,
                                     headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                body: dict[str, Any] = json.load(resp)
                return body
        except urllib.error.HTTPError as exc:
            raise ProxyRefused(f"the proxy at {url} refused: HTTP {exc.code}") from None
        except OSError:
            return None
