"""The ``anthropic`` provider's facts for the kit (:mod:`olp.providers.kit`)."""

from __future__ import annotations

from typing import Final

from olp.actors._deadline import Timeouts
from olp.ir import ChatRequest
from olp.providers.kit import ProviderAdapter, ProviderSpec

from . import _credentials
from ._invocation import build_invocation
from ._login import LOGIN
from ._parser import AnthropicParser
from ._sessions import SESSIONS

SPEC = ProviderSpec(
    reasoning_out=True,
    name="anthropic",
    kind="cli",
    order=10,
    command="claude",
    binary_env="OLP_CLAUDE_BIN",
    install_hint="npm install -g @anthropic-ai/claude-code, then run `claude` and log in",
    adapter=lambda: ADAPTER,
    credentials=_credentials,
    login=LOGIN,
    home_var=_credentials.CONFIG_DIR_VAR,
    login_vars=(*_credentials.TOKEN_VARS, _credentials.SEEN_CONFIG_DIR_VAR),
    metered_env=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
    # claude streams tokens; its idle deadline must fire before claude's own re-ask.
    timeouts=Timeouts(first_output_s=60.0, idle_s=120.0, total_s=600.0),
    max_idle_s=300.0,
    max_idle_reason="claude abandons a silent stream after ~300 s and re-asks",
    risk_tier="D",
    cache_bypass=ChatRequest.has_cache_control_markers,
    capabilities="registry",
    probe_model="claude-haiku-4-5",
    default_chains={"default": "sonnet", "coding": "sonnet", "smart": "opus", "fast": "haiku"},
    # measured: first content ~390 ms cold, ~134 ms from a claude waiting on stream-json
    # stdin; ~150 MB resident while it waits (ADR 0019)
    warm=1,
    # measured with the pinned claude (tests/fixtures/cli-reference/claude/sessions): a copied
    # session resumes from another home and sends the earlier turns as real messages
    sessions=True,
)

#: claude in ``--output-format stream-json --include-partial-messages`` mode.
ADAPTER: Final[ProviderAdapter] = ProviderAdapter(
    name=SPEC.name, build_invocation=build_invocation, parser_for=lambda workdir: AnthropicParser(),
    credentials=_credentials, sessions=SESSIONS)
