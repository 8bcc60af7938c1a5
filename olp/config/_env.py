"""The environment variables OLP reads: ``OLP_HOME``, ``OLP_PORT``, ``OLP_BIND``,
``OLP_LOG_LEVEL``, ``OLP_LOG_FORMAT``, ``OLP_OWNER_TOKEN`` and ``OLP_FORBID_METERED_FALLBACK``.

Each parser raises :class:`~olp.config.ConfigError` naming the variable; none echoes a secret.
:func:`olp_home` may create the directory (blocking disk I/O).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final, Literal

from ._schema import ConfigError

DEFAULT_PORT: Final = 4567
DEFAULT_BIND: Final = "127.0.0.1"
MIN_OWNER_TOKEN_CHARS: Final = 32  # docs/adr/0022: see why 32

LogLevel = Literal["debug", "info", "warning", "error"]
_LOG_LEVELS: Final[tuple[LogLevel, ...]] = ("debug", "info", "warning", "error")
#: ``auto``: readable lines on a terminal, JSON lines otherwise (a service, a pipe, a file).
LogFormat = Literal["auto", "text", "json"]
_LOG_FORMATS: Final[tuple[LogFormat, ...]] = ("auto", "text", "json")


def olp_home(environ: Mapping[str, str]) -> Path:
    raw = environ.get("OLP_HOME", "").strip()
    if raw:
        home = Path(raw).expanduser()
    else:
        user_home = environ.get("HOME", "").strip()
        home = (Path(user_home) if user_home else Path.home()) / ".olp"
    home = home.absolute()
    try:
        if not home.exists():
            home.mkdir(mode=0o700, parents=True)
            home.chmod(0o700)
    except OSError as exc:
        raise ConfigError(f"{home}: cannot create OLP_HOME: {exc.strerror}") from None
    if not home.is_dir():
        raise ConfigError(f"{home}: OLP_HOME is not a directory")
    _owner_only(home, 0o700)
    return home


def protect_config(path: Path) -> None:
    """Make ``config.json`` (it can hold API keys in ``providers.*.env``) 0600, as the
    database is; at ``olp start``. Blocks on disk I/O."""
    _owner_only(path, 0o600)


def _owner_only(path: Path, mode: int) -> None:
    """Take group and other permissions off ``path`` if this user owns it (keys, the
    database and the config may hold secrets); leave a path of another user alone."""
    try:
        st = path.stat()
        if st.st_uid == os.getuid() and st.st_mode & 0o077:
            path.chmod(mode)
    except OSError:
        pass  # reported by whatever then fails to use it


def port(raw: str | None) -> int:
    if raw is None or not raw.strip():
        return DEFAULT_PORT
    try:
        number = int(raw.strip())
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise ConfigError(f"environment: OLP_PORT: expected a port number 0-65535, got {raw!r}")
    return number


def log_level(raw: str | None) -> LogLevel:
    value = (raw or "").strip().lower() or "info"
    value = "warning" if value == "warn" else value
    for level in _LOG_LEVELS:
        if level == value:
            return level
    raise ConfigError(f"environment: OLP_LOG_LEVEL: expected one of "
                      f"{', '.join(_LOG_LEVELS)}, got {raw!r}")


def log_format(raw: str | None) -> LogFormat:
    value = (raw or "").strip().lower() or "auto"
    for fmt in _LOG_FORMATS:
        if fmt == value:
            return fmt
    raise ConfigError(f"environment: OLP_LOG_FORMAT: expected one of "
                      f"{', '.join(_LOG_FORMATS)}, got {raw!r}")


def owner_token(raw: str | None) -> str | None:
    token = (raw or "").strip()
    if not token:
        return None
    if len(token) < MIN_OWNER_TOKEN_CHARS:  # never echo the value
        raise ConfigError(f"environment: OLP_OWNER_TOKEN: too short (use at least "
                          f"{MIN_OWNER_TOKEN_CHARS} random characters, e.g. from "
                          f"`openssl rand -base64 32`)")
    return token


def bind(raw: str | None) -> str:
    return (raw or "").strip() or DEFAULT_BIND


def flag(raw: str | None) -> bool:
    """A boolean variable: ``1``, ``true``, ``yes`` or ``on`` (any case) is true."""
    return (raw or "").strip().lower() in {"1", "true", "yes", "on"}
