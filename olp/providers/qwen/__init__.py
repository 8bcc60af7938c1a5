"""The ``qwen`` provider: qwen-code (``qwen -o stream-json``, npm ``@qwen-code/qwen-code``) as
the kit's :class:`~olp.providers.kit.ProviderAdapter` (``ADAPTER``).

qwen streams token deltas (``--include-partial-messages``) after ~2-4 s of Node start-up;
upstream errors come as ``[API Error: ...]`` text and a ``result`` error, which the parser
never forwards as content. It runs with every built-in tool off through a per-spawn
``~/.qwen/settings.json`` in its private home. A request's tools reach the model through
OLP's MCP bridge (the one MCP server qwen may start, in a workdir trusted for that spawn
only); the parser reports the model's calls and the runner kills qwen at the end of the
model's message. See ``cli-reference/qwen/README.md`` and ``cli-reference/qwen/tools/``.
"""

from __future__ import annotations

from ._parser import QwenParser
from ._spec import ADAPTER, SPEC

__all__ = ["ADAPTER", "SPEC", "QwenParser"]
