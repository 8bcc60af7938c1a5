"""The ``mistral`` provider's (vibe's) facts for the kit (:mod:`olp.providers.kit`)."""

from __future__ import annotations

from typing import Final

from olp.actors._deadline import Timeouts
from olp.actors._warm_units import WarmUnits
from olp.providers.kit import ProviderAdapter, ProviderSpec

from . import _credentials
from ._invocation import build_invocation
from ._parser import VibeParser


def _units() -> WarmUnits:
    from ._acp_units import AcpUnits

    return AcpUnits()


SPEC = ProviderSpec(
    reasoning_out=True,  # vibe prints the upstream's thinking (cli-reference/vibe/reasoning)
    name="mistral",
    kind="cli",
    order=30,
    command="vibe",
    binary_env="OLP_VIBE_BIN",
    install_hint="pipx install mistral-vibe (Python >= 3.12), then run `vibe` and set your "
                 "API key",
    adapter=lambda: ADAPTER,
    credentials=_credentials,
    home_var=_credentials.HOME_VAR,
    login_vars=(_credentials.KEY_VAR, _credentials.AUTH_PATH_VAR),
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

#: vibe in ``-p --output streaming --output-dir <workdir>/out`` mode, prompt on stdin.
ADAPTER: Final[ProviderAdapter] = ProviderAdapter(
    name=SPEC.name, build_invocation=build_invocation, parser_for=VibeParser,
    credentials=_credentials)
