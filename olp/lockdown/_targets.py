"""What the lockdown self-check needs to know of each CLI (issue #26; ADR 0024): which vendor
API it speaks, how it is pointed at the loopback mock with a throwaway API key, and the floor
of built-in tools that the CLI offers whatever OLP does, each proven denied.

The redirection is added to what requests get, never in place of it: the variables and home
files below go on top of the provider's own (the adapter's settings still win over home
files), and the argv, the sandbox and the prompt's path are unchanged.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ._vendor_mock import Dialect

#: The API key every check uses: the mock takes any key; it is never a real one.
CHECK_KEY: Final = "olp-lockdown-check-0000"


def _codex_config(base_url: str, *, login: bool = False) -> str:
    # with a ChatGPT login codex also calls its backend (chatgpt_base_url): the mock too
    auth = "requires_openai_auth = true\n" if login else 'env_key = "OPENAI_API_KEY"\n'
    chatgpt = f'chatgpt_base_url = "{base_url}"\n' if login else ""
    return ('model_provider = "olp_lockdown_check"\n'
            f"check_for_update_on_startup = false\n{chatgpt}\n"
            "[model_providers.olp_lockdown_check]\n"
            'name = "OLP lockdown check"\n'
            f'base_url = "{base_url}"\n'
            f"{auth}"
            'wire_api = "responses"\n'
            "request_max_retries = 0\nstream_max_retries = 0\n")


def _jwt(claims: dict[str, Any]) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.c2ln"


def _codex_login() -> dict[str, str]:
    """A ChatGPT login as ``codex login`` writes one, with fake unsigned tokens that need no
    refresh (as ``tests/realcli/test_codex_rate_limits.py`` captures with)."""
    now = int(time.time())
    auth = {"chatgpt_plan_type": "plus", "chatgpt_account_id": "acct-olp-check",
            "chatgpt_user_id": "user-olp-check"}
    claims = {"exp": now + 30 * 86400, "iat": now, "https://api.openai.com/auth": auth}
    login = json.dumps({
        "auth_mode": "chatgpt", "OPENAI_API_KEY": None,
        "tokens": {"id_token": _jwt({"email": "check@olp.invalid", **claims}),
                   "access_token": _jwt(claims), "refresh_token": "rt-olp-check",
                   "account_id": "acct-olp-check"},
        "last_refresh": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))})
    return {".codex/auth.json": login}


def _vibe_config(base_url: str) -> str:
    # vibe_base_url: where vibe fetches its org's managed config at every start
    return ("enable_telemetry = false\nenable_update_checks = false\n"
            "api_retry_max_elapsed_time = 1.0\n"
            f'vibe_base_url = "{base_url}"\n\n'
            "[[providers]]\n"
            'name = "mistral"\n'
            f'api_base = "{base_url}"\n'
            'api_key_env_var = "MISTRAL_API_KEY"\n'
            'backend = "mistral"\n')


def _gemini_login() -> dict[str, str]:
    """A Google-account login as gemini keeps one (fake, unexpired): what OLP's pre-spawn
    check looks for; the token the CLI uses comes from the environment."""
    expiry = (int(time.time()) + 3600) * 1000
    return {".gemini/oauth_creds.json": json.dumps({
        "access_token": "ya29.olp-lockdown-check", "refresh_token": "olp-lockdown-check",
        "scope": "https://www.googleapis.com/auth/cloud-platform", "token_type": "Bearer",
        "expiry_date": expiry})}


@dataclass(frozen=True, slots=True)
class Target:
    """One CLI's check: ``tested``, the version OLP's lockdown was captured on and the test
    suite runs (``scripts/install-real-clis``, ``scripts/install-vibe``); ``dialect`` of its
    vendor's API; ``env`` and ``home_files`` that
    point it at the mock (given the mock's base URL); ``floor``: built-in tools it offers
    whatever OLP switches off, each proven denied before it runs (documented in ADR 0024);
    ``own_system_prompt``: the CLI sends its own agent prompt as the system text and OLP's
    in the prompt (codex, vibe), so only the prompt is checked for OLP's; ``home_reads``:
    files in its home the CLI inlines by design, which OLP's fresh home never holds unless
    the owner's ``home_files`` write them (no canary is planted there);
    ``login``: an emulated login (files in the owner's home, linked into the spawn's as a
    real login is) or ``login_env`` (a login token in the environment), with its
    ``login_home_files`` in place of ``env`` and ``home_files``; ``login_hosts``: the
    vendor's own identity hosts such a login calls (``host:port``, as a ``CONNECT`` names
    them),
    used when the provider's spawns use a login (the tools offered can differ: codex offered
    ``image_gen`` only to a ChatGPT login); ``None``: the key stands in for it."""

    cli: str
    tested: str
    dialect: Dialect
    env: Callable[[str], Mapping[str, str]]
    home_files: Callable[[str], Mapping[str, str]] = lambda base_url: {}
    floor: frozenset[str] = field(default_factory=frozenset)
    own_system_prompt: bool = False
    home_reads: frozenset[str] = field(default_factory=frozenset)
    login: Callable[[], Mapping[str, str]] | None = None
    login_env: Callable[[str], Mapping[str, str]] | None = None
    login_home_files: Callable[[str], Mapping[str, str]] = lambda base_url: {}
    login_hosts: frozenset[str] = field(default_factory=frozenset)

    @property
    def emulates_login(self) -> bool:
        return self.login is not None or self.login_env is not None


#: By the CLI's command name (``ProviderSpec.command``).
TARGETS: Final[Mapping[str, Target]] = {t.cli: t for t in (
    # a subscription's OAuth token, as the rate_limit_event captures sign in
    Target("claude", "2.1.332", "anthropic",
           lambda url: {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": CHECK_KEY},
           login_env=lambda url: {"ANTHROPIC_BASE_URL": url,
                                  "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-olp-check"}),
    # codex sends its base instructions as a developer message, and inlines
    # $CODEX_HOME/AGENTS.md (its global instructions) whatever project_doc_max_bytes says.
    Target("codex", "0.171.0", "openai-responses", lambda url: {"OPENAI_API_KEY": CHECK_KEY},
           home_files=lambda url: {".codex/config.toml": _codex_config(url)},
           own_system_prompt=True, home_reads=frozenset({".codex/AGENTS.md"}),
           login=_codex_login,
           login_home_files=lambda url: {".codex/config.toml": _codex_config(url, login=True)}),
    # gemini loads ~/.gemini/GEMINI.md (its global memory) into the system text. A Google
    # login talks to Code Assist (CODE_ASSIST_ENDPOINT), as the oauth.access_token_env
    # capture signs in.
    Target("gemini", "0.61.0", "gemini",
           lambda url: {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": CHECK_KEY},
           home_reads=frozenset({".gemini/GEMINI.md"}),
           login=_gemini_login,
           login_env=lambda url: {"OLP_GEMINI_AUTH_TYPE": "oauth-personal",
                                  "GOOGLE_GENAI_USE_GCA": "true",
                                  "GOOGLE_CLOUD_ACCESS_TOKEN": "ya29.olp-lockdown-check",
                                  "CODE_ASSIST_ENDPOINT": url},
           # Google's userinfo: every Google login asks it who is signed in (the capture's
           # strace saw it too); it is the vendor's identity API, not one a prompt chooses
           login_hosts=frozenset({"www.googleapis.com:443"})),
    # qwen loads ~/.qwen/QWEN.md (its global memory) and its own output-language.md.
    Target("qwen", "0.24.4", "openai-chat",
           lambda url: {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": CHECK_KEY},
           home_reads=frozenset({".qwen/QWEN.md"})),
    # tests/fixtures/security/vibe-tools-after.json: the Unified Harness builtins no vibe
    # setting removes; every call of one is refused (tool_denied) before it runs.
    Target("vibe", "3.0.2", "mistral", lambda url: {"MISTRAL_API_KEY": CHECK_KEY},
           home_files=lambda url: {".vibe/config.toml": _vibe_config(url)},
           floor=frozenset({"search_tool_functions", "run_typescript", "read_file",
                            "write_file", "edit", "bash", "skill"}),
           own_system_prompt=True),
)}


def runs_tested_version(target: Target, version: str | None) -> bool:
    """Whether ``version`` (a CLI's ``--version`` line) is the one the test suite runs."""
    return version is not None and target.tested in version.replace("v", " ").split()
