"""The ``openai`` provider's (codex's) facts for the kit (:mod:`olp.providers.kit`)."""

from __future__ import annotations

from typing import Final

from olp.actors._deadline import Timeouts
from olp.actors._threads import ThreadServers
from olp.providers.kit import ProviderAdapter, ProviderSpec

from . import _credentials
from ._invocation import build_invocation
from ._login import LOGIN
from ._parser import CodexParser
from ._sessions import SESSIONS


def _app_servers() -> ThreadServers:
    from ._app_units import AppServers

    return AppServers()


SPEC = ProviderSpec(
    reasoning_out=True,
    name="openai",
    kind="cli",
    order=20,
    command="codex",
    binary_env="OLP_CODEX_BIN",
    install_hint="npm install -g @openai/codex, then run `codex login`",
    adapter=lambda: ADAPTER,
    credentials=_credentials,
    login=LOGIN,
    home_var="CODEX_HOME",
    login_vars=(_credentials.AUTH_PATH_VAR, *_credentials.KEY_VARS),
    metered_env=("OPENAI_API_KEY", "CODEX_API_KEY"),
    # codex prints content only once the answer is done: first output == total.
    timeouts=Timeouts(first_output_s=600.0, idle_s=120.0, total_s=600.0),
    risk_tier="D",
    capabilities="registry",
    probe_model="gpt-5.4-mini",
    default_chains={"default": "gpt5", "coding": "codex", "smart": "gpt5", "fast": "gpt5-mini"},
    # measured: ~530 ms cold, ~356 ms when started ahead (codex exec waits for stdin's EOF;
    # ADR 0019)
    warm=1,
    # measured with the pinned codex (tests/fixtures/cli-reference/codex/sessions): a copied
    # rollout resumes from another home, one prompt_cache_key per thread
    sessions=True,
    # one `codex app-server` per login streams token deltas and serves every request shape
    # (issue #43; ADR 0032); `codex_mode: "exec"` spawns `codex exec` per request instead
    thread_servers=_app_servers,
    thread_servers_default=True,
)

#: codex in ``exec --json`` mode: whole messages, usage from ``turn.completed``.
ADAPTER: Final[ProviderAdapter] = ProviderAdapter(
    name=SPEC.name, build_invocation=build_invocation, parser_for=lambda workdir: CodexParser(),
    credentials=_credentials, sessions=SESSIONS)
