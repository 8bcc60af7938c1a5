"""The effort names the dialects take, on the IR's one scale (issue #27, ADR 0026).

The SDKs name levels above ``high`` (openai ``xhigh`` and ``max``, Anthropic's
``output_config.effort`` the same two); the IR's top is ``high``, so both are ``high``, the
nearest level every CLI has.
"""

from __future__ import annotations

from typing import Final

from ._request import Effort
from ._validation import InvalidRequest

#: Chat ``reasoning_effort`` and Responses ``reasoning.effort`` (the openai SDK's
#: ``ReasoningEffort``).
OPENAI_EFFORTS: Final = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
#: Messages ``output_config.effort`` (the anthropic SDK's ``OutputConfigParam``).
ANTHROPIC_EFFORTS: Final = ("low", "medium", "high", "xhigh", "max")
_LEVELS: Final[dict[str, Effort]] = {
    "none": "none", "minimal": "minimal", "low": "low", "medium": "medium", "high": "high",
    "xhigh": "high", "max": "high"}


def effort(param: str, value: str, accepted: tuple[str, ...]) -> Effort:
    """``value`` on the IR's scale; one not in ``accepted`` is a 400 naming ``param``."""
    level = _LEVELS.get(value) if value in accepted else None
    if level is None:
        raise InvalidRequest(f"Invalid value for '{param}': expected one of "
                             f"{', '.join(accepted)}, got {value!r}.", param,
                             "invalid_value")
    return level
