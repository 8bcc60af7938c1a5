"""Where claude's credentials live, what its environment needs, and the pre-spawn check.

Discovery order (as claude itself looks): a token/key variable in the CLI's
environment (``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``, ``CLAUDE_CODE_OAUTH_TOKEN``),
then the credentials file (``$CLAUDE_CONFIG_DIR/.credentials.json`` when that variable is
set, else ``~/.claude/.credentials.json``), then on macOS the keychain — which cannot be
checked cheaply, so on darwin the check passes and a missing login surfaces as claude's own
"Not logged in" error (classified ``AUTH_MISSING``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from olp.failures import Code, failure
from olp.ir import Error

CREDENTIALS_IN_HOME: Final = ".claude/.credentials.json"
#: claude's own variable for where its login and settings live.
CONFIG_DIR_VAR: Final = "CLAUDE_CONFIG_DIR"
#: The proxy's ``CLAUDE_CONFIG_DIR``, carried to the credential check (never as claude's
#: own variable: a spawn keeps its settings in its private home).
SEEN_CONFIG_DIR_VAR: Final = "OLP_CLAUDE_CONFIG_DIR"
TOKEN_VARS: Final = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
ALWAYS_ENV: Final = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
PASSED_THROUGH: Final = ("CLAUDE_CODE_OAUTH_TOKEN",)
MISSING_MESSAGE: Final = (
    "no Claude credentials: run `claude` and log in, or set ANTHROPIC_API_KEY / "
    "CLAUDE_CODE_OAUTH_TOKEN in the provider's env"
)


def spawn_env(proxy_env: Mapping[str, str]) -> dict[str, str]:
    """The always-on variables plus ``CLAUDE_CODE_OAUTH_TOKEN`` from the proxy's environment
    when it is set and non-empty, and the proxy's ``CLAUDE_CONFIG_DIR`` as
    ``OLP_CLAUDE_CONFIG_DIR`` (where the login file is found); nothing else."""
    env = dict(ALWAYS_ENV)
    env.update({k: proxy_env[k] for k in PASSED_THROUGH if proxy_env.get(k)})
    if proxy_env.get(CONFIG_DIR_VAR):
        env[SEEN_CONFIG_DIR_VAR] = proxy_env[CONFIG_DIR_VAR]
    return env


def credentials_file(env: Mapping[str, str], real_home: Path) -> Path:
    """Where claude keeps its login: under ``CLAUDE_CONFIG_DIR`` (``~`` expanded) when that is
    set and non-empty in ``env`` (the provider's configured one), else under the proxy's
    (``OLP_CLAUDE_CONFIG_DIR``, an account's home), else
    ``<real_home>/.claude/.credentials.json``."""
    config_dir = env.get(CONFIG_DIR_VAR) or env.get(SEEN_CONFIG_DIR_VAR)
    if config_dir:
        return Path(config_dir).expanduser() / ".credentials.json"
    return real_home / CREDENTIALS_IN_HOME


def home_links(env: Mapping[str, str], real_home: Path) -> dict[str, Path]:
    """``{".claude/.credentials.json": <real file>}`` when the file exists, else ``{}``."""
    path = credentials_file(env, real_home)
    return {CREDENTIALS_IN_HOME: path} if path.is_file() else {}


def preflight(env: Mapping[str, str], home: Path, *, platform: str | None = None,
              ) -> Error | None:
    """``None`` when a credential is found (or on darwin, see the module docstring), else an
    ``AUTH_MISSING`` error. Empty variables do not count. ``platform`` defaults to
    ``sys.platform``."""
    if any(env.get(k) for k in TOKEN_VARS):
        return None
    on_darwin = (platform or sys.platform) == "darwin"
    if credentials_file(env, home).is_file() or on_darwin:
        return None
    return failure(Code.AUTH_MISSING, MISSING_MESSAGE)


def login_expired(env: Mapping[str, str], real_home: Path, now: float) -> str | None:
    """Why the credentials file can no longer log in: its ``expiresAt`` (milliseconds) is
    past and it holds no ``refreshToken`` (claude refreshes one that has it). ``None``
    otherwise, and for a token in the environment (no date to read)."""
    if any(env.get(k) for k in TOKEN_VARS):
        return None
    data = _read_json(credentials_file(env, real_home))
    oauth = data.get("claudeAiOauth") if isinstance(data, dict) else None
    if not isinstance(oauth, dict) or oauth.get("refreshToken"):
        return None
    expires = oauth.get("expiresAt")
    if isinstance(expires, int | float) and not isinstance(expires, bool) \
            and expires / 1000 <= now:
        return "its token expired and it has no refresh token: log in again"
    return None


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
