"""The ``gemini`` provider: Google's gemini-cli (``gemini -p``, npm ``@google/gemini-cli``) as
the kit's :class:`~olp.providers.kit.ProviderAdapter` (``ADAPTER``).

gemini streams token deltas (``-o stream-json``) after ~2 s of start-up; usage and the
outcome are in its last line, ``result``. Every built-in tool, skill and agent is off, and
every MCP server but OLP's tool bridge when the request offers tools (the model's call is a
``tool_use`` line, and the job ends there); the prompt is guarded against the CLI's slash
commands and the working directory stays empty (``@path`` would inline its files). A
conversation's earlier text turns go as a session file gemini loads (``_history.py``), so each
upstream request is the previous one plus the new turns. See ``cli-reference/gemini/README.md``,
``cli-reference/gemini/tools/README.md`` and ``cli-reference/gemini/sessions/README.md``.
"""

from __future__ import annotations

from ._parser import GeminiParser
from ._spec import ADAPTER, SPEC

__all__ = ["ADAPTER", "SPEC", "GeminiParser"]
