"""What ``olp connect`` tells a tool: where OLP is (:class:`Target`), the configuration it
renders (:class:`Rendered`), the refusal it raises, and how it quotes text in each format."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

#: Printed where the key goes when none was given.
PLACEHOLDER: Final = "<your OLP key>"
#: The environment variable codex and Zed read the key from (Zed: provider id ``OLP``).
KEY_ENV: Final = "OLP_API_KEY"
#: The provider's name in Zed (its key variable is ``<NAME>_API_KEY``) and in codex.
PROVIDER_NAME: Final = "OLP"


@dataclass(frozen=True)
class Target:
    """Where the tool should send its requests: OLP's base URL (no ``/v1``), a key, a model."""

    base_url: str
    key: str
    model: str

    @property
    def root(self) -> str:
        """``http://HOST:PORT`` (what Anthropic-style clients append ``/v1/messages`` to)."""
        return self.base_url.rstrip("/").removesuffix("/v1").rstrip("/")

    @property
    def v1(self) -> str:
        """``http://HOST:PORT/v1`` (the OpenAI-style base URL)."""
        return f"{self.root}/v1"


@dataclass(frozen=True)
class Rendered:
    """A tool's configuration. ``path`` is relative to HOME (``None``: nothing to write);
    ``text`` is what :func:`write` writes to a new file, or the instructions."""

    path: Path | None
    text: str
    notes: list[str]


class ConnectError(Exception):
    """A refusal, with a message for the person (often with the snippet to paste)."""


def yaml_str(value: str) -> str:
    """A YAML double-quoted scalar (JSON's escapes are YAML's)."""
    return json.dumps(value, ensure_ascii=False)


def toml_str(value: str) -> str:
    """A TOML basic string."""
    escaped = "".join(
        "\\" + ch if ch in '"\\' else f"\\u{ord(ch):04x}" if ord(ch) < 0x20 or ch == "\x7f"
        else ch for ch in value)
    return f'"{escaped}"'


def json_text(data: Any) -> str:
    """Indented JSON with a final newline."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
