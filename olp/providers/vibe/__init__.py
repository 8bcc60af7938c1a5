"""The ``mistral`` provider: Mistral Vibe (``vibe -p``, PyPI ``mistral-vibe``) as the kit's
:class:`~olp.providers.kit.ProviderAdapter` (``ADAPTER``).

vibe prints whole messages (no token deltas), so a hop's content arrives when the answer is
done (~5 s of start-up first); usage and the error code are in the ``export.json`` it writes
into ``--output-dir`` on exit, errors on stderr. See ``cli-reference/vibe/README.md``.
"""

from __future__ import annotations

from ._parser import VibeParser
from ._spec import ADAPTER, SPEC

__all__ = ["ADAPTER", "SPEC", "VibeParser"]
