"""Where codex's login lives, what its environment needs, and the pre-spawn check.

The login is the auth file (``OPENAI_CODEX_AUTH_PATH``, else ``$CODEX_HOME/auth.json``, else
``~/.codex/auth.json``: a ChatGPT or an API-key login) or a key in the provider's configured
``env`` (never the proxy's own: that is metered spend). A ChatGPT login is kept by OLP
(``_login``, ADR 0031): each spawn's fresh ``$HOME/.codex`` gets a copy without its refresh
token; an API-key file is linked in. ``CODEX_HOME`` is read only to find that file, never
passed on. The file's ``auth_mode`` says metered or
subscription (:func:`metered_source`). The details and why:
``tests/fixtures/cli-reference/codex/README.md``, "Login and credentials".
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from olp.failures import Code, failure
from olp.ir import Error

AUTH_IN_HOME: Final = ".codex/auth.json"
AUTH_PATH_VAR: Final = "OPENAI_CODEX_AUTH_PATH"
KEY_VARS: Final = ("OPENAI_API_KEY", "CODEX_API_KEY")
MISSING_MESSAGE: Final = (
    "no Codex credentials: run `codex login` (or set OPENAI_CODEX_AUTH_PATH / CODEX_HOME to "
    "where its auth.json is), or set OPENAI_API_KEY / CODEX_API_KEY in the provider's env"
)


def spawn_env(proxy_env: Mapping[str, str]) -> dict[str, str]:
    """``OPENAI_CODEX_AUTH_PATH`` for the credential check: the proxy's own when set, else
    ``$CODEX_HOME/auth.json`` when the proxy has ``CODEX_HOME``; nothing else (no key, no
    ``CODEX_HOME``: see the fixture README)."""
    explicit = proxy_env.get(AUTH_PATH_VAR)
    if explicit:
        return {AUTH_PATH_VAR: explicit}
    codex_home = proxy_env.get("CODEX_HOME")
    if codex_home:
        return {AUTH_PATH_VAR: str(Path(codex_home).expanduser() / "auth.json")}
    return {}


def auth_file(env: Mapping[str, str], real_home: Path) -> Path:
    """Where the login is looked for: ``OPENAI_CODEX_AUTH_PATH``, ``$CODEX_HOME/auth.json``
    (both from ``env``, ``~`` expanded, empty values ignored), else
    ``<real_home>/.codex/auth.json``."""
    explicit = env.get(AUTH_PATH_VAR)
    if explicit:
        return Path(explicit).expanduser()
    codex_home = env.get("CODEX_HOME")
    if codex_home:
        return Path(codex_home).expanduser() / "auth.json"
    return real_home / AUTH_IN_HOME


def _read(path: Path) -> dict[str, object] | None:
    """The auth file's JSON object, or ``None`` when it is missing, unreadable or not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _key(data: Mapping[str, object]) -> str | None:
    key = data.get("OPENAI_API_KEY")
    return key if isinstance(key, str) and key.strip() else None


def has_login(path: Path) -> bool:
    """True when ``path`` is a readable JSON object with a non-empty ``tokens.access_token``
    or ``OPENAI_API_KEY`` string."""
    data = _read(path)
    if data is None:
        return False
    tokens = data.get("tokens")
    token = tokens.get("access_token") if isinstance(tokens, dict) else None
    key = data.get("OPENAI_API_KEY")
    return any(isinstance(v, str) and v.strip() for v in (token, key))


def api_key_mode(data: Mapping[str, object]) -> bool:
    """Whether codex logs in with the auth file's API key (see the fixture README)."""
    mode = data.get("auth_mode")
    if isinstance(mode, str) and mode.strip():
        return mode.strip().lower().replace("_", "").replace("-", "") == "apikey"
    return _key(data) is not None


def metered_source(env: Mapping[str, str], real_home: Path) -> str | None:
    """``"OPENAI_API_KEY in <auth file>"`` when codex will log in with the API key the auth
    file holds (``~`` for ``real_home`` in the path), else ``None``. A key in ``env`` is
    the kit's to report (it wins over the file). Reads the file (briefly blocking)."""
    path = auth_file(env, real_home)
    data = _read(path)
    if data is None or not api_key_mode(data) or _key(data) is None:
        return None
    return f"OPENAI_API_KEY in {_shown(path, real_home)} (auth_mode apikey)"


def _shown(path: Path, home: Path) -> str:
    """``path`` with ``home`` written as ``~``."""
    try:
        return f"~/{path.relative_to(home)}"
    except ValueError:
        return str(path)


def home_links(env: Mapping[str, str], real_home: Path) -> dict[str, Path]:
    """``{".codex/auth.json": <real file>}`` when the auth file exists, else ``{}``."""
    path = auth_file(env, real_home)
    return {AUTH_IN_HOME: path} if path.is_file() else {}


def preflight(env: Mapping[str, str], home: Path) -> Error | None:
    """``None`` when a key is in ``env`` or the auth file holds a login, else
    ``AUTH_MISSING`` with the fix. Empty variables do not count."""
    if any(env.get(k, "").strip() for k in KEY_VARS):
        return None
    path = auth_file(env, home)
    if has_login(path):
        return None
    message = MISSING_MESSAGE
    if path.is_file():
        message = ("the Codex auth file holds no login (no tokens.access_token or "
                   "OPENAI_API_KEY): run `codex login` again")
    return failure(Code.AUTH_MISSING, message)


def login_expired(env: Mapping[str, str], real_home: Path, now: float) -> str | None:
    """Why a ChatGPT login can no longer log in: its access token's ``exp`` is past and it
    has no ``refresh_token`` (codex refreshes one that has it). ``None`` otherwise, and for
    a key."""
    if any(env.get(k, "").strip() for k in KEY_VARS):
        return None
    data = _read(auth_file(env, real_home))
    tokens = data.get("tokens") if data is not None else None
    if not isinstance(tokens, dict) or tokens.get("refresh_token"):
        return None
    exp = _jwt_exp(tokens.get("access_token"))
    if exp is not None and exp <= now:
        return "its ChatGPT token expired and it has no refresh token: run `codex login` again"
    return None


def _jwt_exp(token: object) -> float | None:
    """The ``exp`` claim of a JWT (unverified: only to say when it ends), or ``None``."""
    if not isinstance(token, str) or token.count(".") != 2:
        return None
    payload = token.split(".")[1]
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, binascii.Error):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None
