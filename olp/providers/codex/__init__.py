"""The ``openai`` provider: Codex CLI (``codex exec --json``), as the kit's
:class:`~olp.providers.kit.ProviderAdapter` (``ADAPTER``)."""

from __future__ import annotations

from ._parser import CodexParser
from ._spec import ADAPTER, SPEC

__all__ = ["ADAPTER", "SPEC", "CodexParser"]
