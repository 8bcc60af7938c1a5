"""The ``qwen`` provider's (qwen-code's) facts for the kit (:mod:`olp.providers.kit`)."""

from __future__ import annotations

from typing import Final

from olp.actors._deadline import Timeouts
from olp.providers.kit import ProviderAdapter, ProviderSpec

from . import _credentials
from ._invocation import build_invocation
from ._parser import QwenParser
from ._sessions import SESSIONS

SPEC = ProviderSpec(
    reasoning_out=True,
    name="qwen",
    kind="cli",
    order=26,
    command="qwen",
    binary_env="OLP_QWEN_BIN",
    install_hint="npm install -g @qwen-code/qwen-code@0.24.4, then set "
                 "BAILIAN_CODING_PLAN_API_KEY (Alibaba Coding Plan), or OPENAI_API_KEY and "
                 "OPENAI_BASE_URL in providers.qwen.env",
    adapter=lambda: ADAPTER,
    credentials=_credentials,
    login_vars=(_credentials.CODING_PLAN_VAR, _credentials.KEY_VAR, _credentials.BASE_URL_VAR),
    # a Coding Plan key reaches qwen as OPENAI_API_KEY too: _credentials.metered_source
    # tells a plan from a per-token key
    metered_env=(),
    # ~2-4 s start-up, then token deltas; the CLI's own 7 silent attempts on a 429/5xx take
    # 15-70 s before it reports: the first-output deadline bounds that storm.
    timeouts=Timeouts(first_output_s=60.0, idle_s=120.0, total_s=600.0),
    max_idle_s=240.0,
    max_idle_reason="qwen re-sends a request whose stream was silent for 240 s, continuing "
                    "the partial answer",
    # Alibaba Coding Plan: service-level key revocation risk for use through a proxy
    risk_tier="B",
    capabilities="registry",
    probe_model="qwen3-coder-next",
    default_chains={"default": "qwen-coder", "coding": "qwen-coder", "smart": "qwen-plus",
                    "fast": "qwen-coder-next"},
    warm=None,
    warm_reason="qwen reads its prompt once, ~3.5 s after start, with a 500 ms window: a "
                "process started ahead of its prompt treats stdin as empty",
    # qwen resumes a copied session at the same cwd (/olp/job/work; proven by
    # tests/realcli/test_sessions_real_qwen.py), but off by default: its date reminder moves
    # to the newest user turn on every request, so a resumed turn leaves ~2.5 turns uncached,
    # the flattened history ~1.2 (measured: 2,340 vs 1,151 characters per 951-character turn)
    sessions=False,
)

#: qwen in ``-o stream-json --include-partial-messages`` mode, prompt on stdin.
ADAPTER: Final[ProviderAdapter] = ProviderAdapter(
    name=SPEC.name, build_invocation=build_invocation, parser_for=lambda workdir: QwenParser(),
    credentials=_credentials, sessions=SESSIONS)
