"""Where vibe's Mistral API key lives, what its environment needs, and the pre-spawn check.

The key is looked up as vibe does: ``MISTRAL_API_KEY`` in the CLI's environment, else the
dotenv file ``MISTRAL_VIBE_AUTH_PATH`` names, else ``$VIBE_HOME/.env``, else ``~/.vibe/.env``.
Each spawn gets its own ``VIBE_HOME``, with the key file symlinked in as ``.vibe/.env`` (a
key: nothing in it is ever refreshed or rewritten); the proxy's ``VIBE_HOME`` is read only to
find that file. Every key is metered spend
(:func:`metered_source`); the system keyring is not looked at. The details and why:
``tests/fixtures/cli-reference/vibe/README.md``, "Login and credentials".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from olp.failures import Code, failure
from olp.ir import Error

KEY_VAR: Final = "MISTRAL_API_KEY"
AUTH_PATH_VAR: Final = "MISTRAL_VIBE_AUTH_PATH"
HOME_VAR: Final = "VIBE_HOME"
ENV_FILE_IN_HOME: Final = ".vibe/.env"
#: Always set: no telemetry and no update checks from a proxy's spawns.
ALWAYS_ENV: Final = {"VIBE_ENABLE_TELEMETRY": "false", "VIBE_ENABLE_UPDATE_CHECKS": "false"}
MISSING_MESSAGE: Final = (
    "no Mistral API key: set MISTRAL_API_KEY in the provider's env (or the proxy's "
    "environment), or put MISTRAL_API_KEY=... in ~/.vibe/.env ($VIBE_HOME/.env, or the file "
    "MISTRAL_VIBE_AUTH_PATH names); `vibe --setup` writes that file"
)
_MAX_ENV_FILE: Final = 1 << 20


def spawn_env(proxy_env: Mapping[str, str]) -> dict[str, str]:
    """The always-on variables, plus from the proxy's environment (when set and non-empty):
    ``MISTRAL_API_KEY``, ``MISTRAL_VIBE_AUTH_PATH``, or failing that ``VIBE_HOME`` as
    ``MISTRAL_VIBE_AUTH_PATH=<VIBE_HOME>/.env``. Nothing else of the proxy's environment."""
    env = dict(ALWAYS_ENV)
    if proxy_env.get(KEY_VAR):
        env[KEY_VAR] = proxy_env[KEY_VAR]
    if proxy_env.get(AUTH_PATH_VAR):
        env[AUTH_PATH_VAR] = proxy_env[AUTH_PATH_VAR]
    elif proxy_env.get(HOME_VAR):
        env[AUTH_PATH_VAR] = str(Path(proxy_env[HOME_VAR]).expanduser() / ".env")
    return env


def env_file(env: Mapping[str, str], real_home: Path) -> Path:
    """The dotenv file vibe's key is read from: ``MISTRAL_VIBE_AUTH_PATH`` when set, else
    ``$VIBE_HOME/.env`` when ``VIBE_HOME`` is set and is not the per-spawn one
    (``$HOME/.vibe`` of the spawn's temporary ``HOME``), else ``<real_home>/.vibe/.env``."""
    if env.get(AUTH_PATH_VAR):
        return Path(env[AUTH_PATH_VAR]).expanduser()
    vibe_home = env.get(HOME_VAR)
    if vibe_home and not _is_spawn_home(vibe_home, env):
        return Path(vibe_home).expanduser() / ".env"
    return real_home / ENV_FILE_IN_HOME


def _is_spawn_home(vibe_home: str, env: Mapping[str, str]) -> bool:
    home = env.get("HOME")
    return bool(home) and os.path.normpath(vibe_home) == os.path.normpath(
        os.path.join(str(home), ".vibe"))


def home_links(env: Mapping[str, str], real_home: Path) -> dict[str, Path]:
    """``{".vibe/.env": <the user's key file>}`` when that file exists, else ``{}``."""
    path = env_file(env, real_home)
    return {ENV_FILE_IN_HOME: path} if path.is_file() else {}


def has_key(path: Path) -> bool:
    """True when the dotenv file at ``path`` has a non-empty ``MISTRAL_API_KEY``. Unreadable,
    missing or oversized files count as having none."""
    return read_key(path) is not None


def read_key(path: Path) -> str | None:
    """The non-empty ``MISTRAL_API_KEY`` of the dotenv file at ``path``, or ``None``
    (unreadable, missing or oversized files hold none). Reads it (briefly blocking)."""
    try:
        with path.open("rb") as f:
            data = f.read(_MAX_ENV_FILE + 1)
    except OSError:
        return None
    if len(data) > _MAX_ENV_FILE:
        return None
    key: str | None = None
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if line.startswith("export "):
            line = line.removeprefix("export ").lstrip()
        name, eq, value = line.partition("=")
        if eq and name.strip() == KEY_VAR:
            value = value.split(" #", 1)[0].strip().strip("\"'")
            key = value or key
    return key


def metered_source(env: Mapping[str, str], real_home: Path) -> str | None:
    """``"MISTRAL_API_KEY in <file>"`` when the dotenv file vibe reads (:func:`env_file`,
    ``~`` for ``real_home`` in the path) holds a key, else ``None``. A key in ``env`` is the
    kit's to report (it wins over the file). Reads the file (briefly blocking)."""
    path = env_file(env, real_home)
    return f"{KEY_VAR} in {_shown(path, real_home)}" if has_key(path) else None


def _shown(path: Path, home: Path) -> str:
    """``path`` with ``home`` written as ``~``."""
    try:
        return f"~/{path.relative_to(home)}"
    except ValueError:
        return str(path)


def preflight(env: Mapping[str, str], home: Path) -> Error | None:
    """``None`` when a key is found (as the module docstring says), else ``AUTH_MISSING``.
    Empty variables do not count."""
    if env.get(KEY_VAR) or has_key(env_file(env, home)):
        return None
    return failure(Code.AUTH_MISSING, MISSING_MESSAGE)
