"""The ``gemini`` provider's (gemini-cli's) facts for the kit (:mod:`olp.providers.kit`)."""

from __future__ import annotations

from typing import Final

from olp.actors._deadline import Timeouts
from olp.providers.kit import ProviderAdapter, ProviderSpec

from . import _credentials
from ._invocation import build_invocation
from ._parser import parser_for

SPEC = ProviderSpec(
    name="gemini",
    kind="cli",
    order=24,
    command="gemini",
    binary_env="OLP_GEMINI_BIN",
    install_hint="npm install -g @google/gemini-cli@0.61.0, then run `gemini` once and sign "
                 "in with Google (or set GEMINI_API_KEY in providers.gemini.env)",
    adapter=lambda: ADAPTER,
    credentials=_credentials,
    home_var=_credentials.HOME_VAR,
    login_vars=(*_credentials.KEY_VARS, _credentials.AUTH_TYPE_VAR,
                "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT"),
    metered_env=_credentials.KEY_VARS,
    # gemini streams token deltas after ~2 s of start-up; a thinking model may be silent for
    # a while before its first one.
    timeouts=Timeouts(first_output_s=120.0, idle_s=120.0, total_s=600.0),
    max_idle_s=300.0,
    max_idle_reason="gemini-cli re-sends a request whose stream was silent for 300 s and "
                    "prints the answer's first delta a second time",
    # a tightening signal without enforcement history: off until the owner enables it
    risk_tier="C",
    capabilities="registry",
    probe_model="gemini-3.1-flash-lite",
    default_chains={"default": "gemini", "coding": "gemini-pro", "smart": "gemini-preview",
                    "fast": "gemini-flash"},
    warm=None,
    warm_reason="gemini-cli reads stdin once, ~2 s after it starts, and gives up on it after "
                "500 ms: a process started ahead of time cannot wait for its prompt",
)

#: gemini in ``-p "" -o stream-json`` mode, prompt on stdin, settings in its private home.
ADAPTER: Final[ProviderAdapter] = ProviderAdapter(
    name=SPEC.name, build_invocation=build_invocation, parser_for=parser_for,
    credentials=_credentials)
