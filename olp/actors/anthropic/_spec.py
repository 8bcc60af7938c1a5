"""The ``anthropic`` provider's facts for the kit (:mod:`olp.actors.kit`)."""

from __future__ import annotations

from olp.actors._adapter import CliAdapter
from olp.actors._deadline import Timeouts
from olp.actors.kit import ProviderSpec
from olp.ir import ChatRequest, TextPart

from . import _credentials


def _adapter() -> CliAdapter:
    from . import AnthropicAdapter  # the package imports this module first

    return AnthropicAdapter()


def has_cache_control_markers(request: ChatRequest) -> bool:
    """Whether the request carries Anthropic ``cache_control`` markers (on text parts, as
    clients of OpenAI-compatible gateways send them): such requests ask for Anthropic's own
    prompt caching, so an anthropic hop runs them instead of replaying a stored answer."""
    return any(isinstance(p, TextPart) and p.cache_control is not None
               for m in request.messages for p in m.content)


SPEC = ProviderSpec(
    name="anthropic",
    kind="cli",
    order=10,
    command="claude",
    binary_env="OLP_CLAUDE_BIN",
    install_hint="npm install -g @anthropic-ai/claude-code, then run `claude` and log in",
    adapter=_adapter,
    credentials=_credentials,
    metered_env=("ANTHROPIC_API_KEY",),
    # claude streams tokens; its idle deadline must fire before claude's own re-ask.
    timeouts=Timeouts(first_output_s=60.0, idle_s=120.0, total_s=600.0),
    max_idle_s=300.0,
    max_idle_reason="claude abandons a silent stream after ~300 s and re-asks",
    risk_tier="D",
    cache_bypass=has_cache_control_markers,
    capabilities="registry",
    probe_model="claude-haiku-4-5",
)
