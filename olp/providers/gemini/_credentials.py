"""Where gemini-cli's login lives, what its environment needs, and the pre-spawn check.

Two logins: an API key (metered; ``GEMINI_API_KEY``, or the proxy's ``GOOGLE_API_KEY`` handed on
under that name) or a Google account (``~/.gemini/oauth_creds.json`` and
``google_accounts.json``, symlinked into the spawn's private home: gemini refreshes its own
token, which is safe because Google's refresh tokens can be used again, and it rewrites the file
in place through the link, also inside the sandbox (measured:
``tests/fixtures/cli-reference/gemini/login_refresh/README.md``)). The CLI picks its login from
``security.auth.selectedType``, which the spawn's settings set to
``${OLP_GEMINI_AUTH_TYPE:-gemini-api-key}``: :func:`auth_type` chooses ``oauth-personal`` when
the proxy has no key and an account login exists. How the CLI chooses, and why:
``tests/fixtures/cli-reference/gemini/README.md``, "Login and credentials".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from olp.failures import Code, failure
from olp.ir import Error

KEY_VAR: Final = "GEMINI_API_KEY"
KEY_VARS: Final = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
AUTH_TYPE_VAR: Final = "OLP_GEMINI_AUTH_TYPE"
API_KEY_AUTH: Final = "gemini-api-key"
OAUTH_AUTH: Final = "oauth-personal"
OAUTH_IN_HOME: Final = ".gemini/oauth_creds.json"
ACCOUNTS_IN_HOME: Final = ".gemini/google_accounts.json"
HOME_VAR: Final = "GEMINI_CLI_HOME"
MISSING_MESSAGE: Final = (
    "no gemini-cli credentials: run `gemini` once and sign in with Google "
    "(~/.gemini/oauth_creds.json), or set GEMINI_API_KEY in providers.gemini.env"
)


def _key(env: Mapping[str, str]) -> str | None:
    """The API key the CLI would get from ``env``: ``GEMINI_API_KEY``, else ``GOOGLE_API_KEY``
    (empty values do not count)."""
    for var in KEY_VARS:
        value = env.get(var, "").strip()
        if value:
            return value
    return None


def gemini_home(env: Mapping[str, str], real_home: Path) -> Path:
    """The real user's ``~`` as gemini-cli sees it: ``$GEMINI_CLI_HOME`` when set (``~``
    expanded), else ``real_home``."""
    override = env.get(HOME_VAR, "").strip()
    return Path(override).expanduser() if override else real_home


def oauth_file(env: Mapping[str, str], real_home: Path) -> Path:
    return gemini_home(env, real_home) / OAUTH_IN_HOME


def has_oauth_login(path: Path) -> bool:
    """True when ``path`` is a readable JSON object with a non-empty ``refresh_token`` or
    ``access_token`` string (google-auth-library's credentials, as the CLI caches them)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict):
        return False
    return any(isinstance(data.get(k), str) and data[k].strip()
               for k in ("refresh_token", "access_token"))


def auth_type(proxy_env: Mapping[str, str]) -> str | None:
    """``oauth-personal`` when ``proxy_env`` holds no API key and the Google-account login file
    (under its ``GEMINI_CLI_HOME`` or ``HOME``) exists, else ``None`` (the settings' default,
    the API key). Checks the file (briefly blocking)."""
    if _key(proxy_env) is not None:
        return None
    home = proxy_env.get("HOME")
    if not home and not proxy_env.get(HOME_VAR):
        return None
    path = oauth_file(proxy_env, Path(home or "/nonexistent"))
    return OAUTH_AUTH if path.is_file() else None


def spawn_env(proxy_env: Mapping[str, str]) -> dict[str, str]:
    """The proxy's API key as ``GEMINI_API_KEY`` when it has one, else
    ``OLP_GEMINI_AUTH_TYPE=oauth-personal`` when a Google-account login exists (see the module
    docstring). Nothing else: no base URL, no ``GEMINI_CLI_HOME`` (the spawn's home is its
    private one)."""
    key = _key(proxy_env)
    if key is not None:
        return {KEY_VAR: key}
    chosen = auth_type(proxy_env)
    return {AUTH_TYPE_VAR: chosen} if chosen is not None else {}


def home_links(env: Mapping[str, str], real_home: Path) -> dict[str, Path]:
    """The Google-account login files that exist (``oauth_creds.json``,
    ``google_accounts.json``) when the spawn uses that login; ``{}`` for an API-key spawn (its
    home then holds no Google token at all)."""
    if env.get(AUTH_TYPE_VAR, "").strip() != OAUTH_AUTH:
        return {}
    base = gemini_home(env, real_home)
    return {rel: base / rel for rel in (OAUTH_IN_HOME, ACCOUNTS_IN_HOME)
            if (base / rel).is_file()}


def preflight(env: Mapping[str, str], home: Path) -> Error | None:
    """``None`` when the login the spawn will use is there: for ``oauth-personal`` a cached
    Google-account token, else ``GEMINI_API_KEY``; otherwise ``AUTH_MISSING`` with the fix."""
    chosen = env.get(AUTH_TYPE_VAR, "").strip() or API_KEY_AUTH
    if chosen == OAUTH_AUTH:
        path = oauth_file(env, home)
        if has_oauth_login(path):
            return None
        message = (f"{AUTH_TYPE_VAR} is {OAUTH_AUTH} but ~/.gemini/oauth_creds.json holds no "
                   "Google-account login: run `gemini` and sign in again")
        return failure(Code.AUTH_MISSING, message)
    if chosen != API_KEY_AUTH:
        return failure(Code.AUTH_MISSING, f"{AUTH_TYPE_VAR} must be {API_KEY_AUTH} or "
                       f"{OAUTH_AUTH}, not {chosen!r}")
    if env.get(KEY_VAR, "").strip():
        return None
    message = MISSING_MESSAGE
    if env.get("GOOGLE_API_KEY", "").strip():
        message = ("gemini-cli reads its API key from GEMINI_API_KEY: set that in "
                   "providers.gemini.env instead of GOOGLE_API_KEY")
    return failure(Code.AUTH_MISSING, message)


def login_expired(env: Mapping[str, str], real_home: Path, now: float) -> str | None:
    """Why the Google-account login can no longer log in: its ``expiry_date``
    (milliseconds) is past and it has no ``refresh_token``. ``None`` otherwise, and for an
    API key."""
    if env.get(AUTH_TYPE_VAR, "").strip() != OAUTH_AUTH:
        return None
    try:
        data = json.loads(oauth_file(env, real_home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("refresh_token"):
        return None
    expiry = data.get("expiry_date")
    if isinstance(expiry, int | float) and not isinstance(expiry, bool) \
            and expiry / 1000 <= now:
        return "its Google token expired and it has no refresh token: sign in again"
    return None
