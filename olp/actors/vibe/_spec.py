"""The ``mistral`` provider's (vibe's) facts for the kit (:mod:`olp.actors.kit`)."""

from __future__ import annotations

from olp.actors._adapter import CliAdapter
from olp.actors._deadline import Timeouts
from olp.actors.kit import ProviderSpec

from . import _credentials


def _adapter() -> CliAdapter:
    from . import VibeAdapter  # the package imports this module first

    return VibeAdapter()


SPEC = ProviderSpec(
    name="mistral",
    kind="cli",
    order=30,
    command="vibe",
    binary_env="OLP_VIBE_BIN",
    install_hint="pipx install mistral-vibe (Python >= 3.12), then run `vibe` and set your "
                 "API key",
    adapter=_adapter,
    credentials=_credentials,
    metered_env=("MISTRAL_API_KEY",),
    # vibe prints whole messages once the answer is done: first output == total.
    timeouts=Timeouts(first_output_s=600.0, idle_s=120.0, total_s=600.0),
    risk_tier="D",
    capabilities="registry",
    probe_model="devstral-small-2-25-12",
    warm=None,
    warm_reason="vibe -p reads its prompt before it starts up, so a vibe started ahead of "
                "time answers no sooner (ADR 0019)",
)
