"""The ``mistral`` provider's (vibe's) facts for the kit (:mod:`olp.providers.kit`)."""

from __future__ import annotations

from olp.actors._adapter import CliAdapter
from olp.actors._cli_runner import WarmUnits
from olp.actors._deadline import Timeouts
from olp.providers.kit import ProviderSpec

from . import _credentials


def _units() -> WarmUnits:
    from ._acp_units import AcpUnits

    return AcpUnits()


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
    default_chains={"default": "devstral", "coding": "devstral", "smart": "devstral",
                    "fast": "devstral-small"},
    # vibe -p reads its prompt before it starts up: its warm units are sessions made ahead
    # of time on a long-lived vibe-acp (~125 MB), answering in ~0.5 s instead of ~5 s
    warm=1,
    warm_units=_units,
)
