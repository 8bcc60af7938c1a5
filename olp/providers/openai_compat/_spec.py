"""The ``openai-compatible`` provider kind's facts for the kit (:mod:`olp.providers.kit`):
the defaults every provider the owner declares with ``"kind": "openai-compatible"`` gets."""

from __future__ import annotations

from olp.providers.kit import ProviderSpec

from ._config import HTTP_TIMEOUTS

SPEC = ProviderSpec(
    reasoning_out=True,
    name="openai-compatible",
    kind="http",
    order=100,
    install_hint="set providers.<name>.base_url and the API key variable api_key_env names",
    timeouts=HTTP_TIMEOUTS,
    metered=True,
    risk_tier="D",
    capabilities="passthrough",
)
