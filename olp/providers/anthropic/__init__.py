"""The ``anthropic`` provider: Claude Code (``claude -p``) in stream-json mode, as the kit's
:class:`~olp.providers.kit.ProviderAdapter` (``ADAPTER``)."""

from __future__ import annotations

from ._parser import AnthropicParser
from ._spec import ADAPTER, SPEC

__all__ = ["ADAPTER", "SPEC", "AnthropicParser"]
