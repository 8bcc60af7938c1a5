"""Settings: environment variables plus ``$OLP_HOME/config.json``, validated strictly.

The config file is our own format, so every struct forbids unknown fields: a typo in a key is
reported with its dotted path instead of being silently ignored. Loading reads the disk and
may create ``OLP_HOME``; call :func:`load_settings` at start-up (or from a worker thread on
SIGHUP), never directly from the Trio loop.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Final, Literal, TypeVar

import msgspec

from olp.ir import Category

BUILTIN_PROVIDERS: Final[tuple[str, ...]] = ("anthropic", "openai", "mistral")
DEFAULT_COMMANDS: Final[Mapping[str, str]] = {
    "anthropic": "claude", "openai": "codex", "mistral": "vibe",
}
BINARY_ENV: Final[Mapping[str, str]] = {
    "anthropic": "OLP_CLAUDE_BIN", "openai": "OLP_CODEX_BIN", "mistral": "OLP_VIBE_BIN",
}
DEFAULT_PORT: Final = 4567
DEFAULT_BIND: Final = "127.0.0.1"
MIN_OWNER_TOKEN_CHARS: Final = 16
CLAUDE_STREAM_ABANDON_S: Final = 300.0  # claude re-asks after this much silence

LogLevel = Literal["debug", "info", "warning", "error"]
ProviderKind = Literal["cli", "openai-compatible"]
_LOG_LEVELS: Final[tuple[LogLevel, ...]] = ("debug", "info", "warning", "error")

_Positive = Annotated[float, msgspec.Meta(gt=0)]
_NonNegative = Annotated[float, msgspec.Meta(ge=0)]
_Count = Annotated[int, msgspec.Meta(ge=1)]
_Percent = Annotated[float, msgspec.Meta(gt=0, le=100)]
_NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class ConfigError(Exception):
    """The configuration (file or environment) is invalid; the message names where and why."""


class _Strict(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base for config structs: our own format, so an unknown key is an error."""


class AuthConfig(_Strict, frozen=True, kw_only=True):
    allow_anonymous: bool = False
    fallback_detail_header_policy: Literal["owner_only", "all", "none"] = "owner_only"


class TimeoutsConfig(_Strict, frozen=True, kw_only=True):
    """Per-hop deadlines as written; ``None`` means the provider's default."""

    first_output_s: _Positive | None = None
    idle_s: _Positive | None = None
    total_s: _Positive | None = None


class RetryConfig(_Strict, frozen=True, kw_only=True):
    """``providers.<name>.retry`` (HTTP providers): retries on the same hop before advancing."""

    server_errors: Annotated[int, msgspec.Meta(ge=0)] = 1
    connection_errors: Annotated[int, msgspec.Meta(ge=0)] = 1
    rate_limited: Annotated[int, msgspec.Meta(ge=0)] = 1
    max_retry_after_s: _NonNegative = 5.0


class ProviderConfig(_Strict, frozen=True, kw_only=True):
    """One ``providers.<name>`` block as written (see :meth:`Settings.provider` for defaults)."""

    kind: Literal["openai-compatible"] | None = None
    binary: str | None = None
    max_concurrent: _Count = 4
    extra_args: tuple[str, ...] = ()
    home_files: dict[str, str] = msgspec.field(default_factory=dict)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    timeouts: TimeoutsConfig = msgspec.field(default_factory=TimeoutsConfig)
    base_url: str | None = None
    api_key_env: str | None = None
    metered: bool | None = None
    retry: RetryConfig = msgspec.field(default_factory=RetryConfig)
    sandbox: bool = True
    sandbox_read_only: tuple[str, ...] = ()

    def __repr__(self) -> str:  # env may hold API keys: show names only
        return (f"ProviderConfig(kind={self.kind!r}, binary={self.binary!r}, "
                f"max_concurrent={self.max_concurrent}, env_keys={sorted(self.env)!r})")


class ProvidersConfig(_Strict, frozen=True, kw_only=True):
    """``providers``: the ``enabled`` map and the per-provider blocks (siblings in the file)."""

    enabled: dict[str, bool] = msgspec.field(default_factory=dict)
    blocks: dict[str, ProviderConfig] = msgspec.field(default_factory=dict)


class ChainEntry(_Strict, frozen=True, kw_only=True):
    """One hop of a chain; ``on=None`` means the engine's default gate."""

    provider: _NonEmpty
    model: _NonEmpty
    name: _NonEmpty | None = None
    on: tuple[Category, ...] | None = None
    metered: bool = False
    unsupported: Literal["skip", "ignore"] = "skip"

    @property
    def label(self) -> str:
        """The entry's name, defaulting to ``provider:model``."""
        return self.name if self.name is not None else f"{self.provider}:{self.model}"


class SoftTriggers(_Strict, frozen=True, kw_only=True):
    daily_request_count_threshold: _Count | None = None
    five_hour_window_percent_threshold: _Percent | None = None
    credit_pool_percent_threshold: _Percent | None = None
    five_hour_window_budget_requests: _Count | None = None
    credit_pool_budget_tokens: _Count | None = None


class ResilienceConfig(_Strict, frozen=True, kw_only=True):
    """``routing.resilience``: cooldowns after usage-window/billing failures, and circuits."""

    usage_window_default_s: _Positive = 900.0
    usage_window_max_s: _Positive = 6 * 3600.0
    billing_s: _Positive = 3600.0
    circuit_failures: _Count = 3
    circuit_window_s: _Positive = 60.0
    probe_after_s: _Positive = 15.0
    probe_max_s: _Positive = 300.0


class RoutingConfig(_Strict, frozen=True, kw_only=True):
    chains: dict[str, tuple[ChainEntry, ...]] = msgspec.field(default_factory=dict)
    default_fallbacks: tuple[ChainEntry, ...] = ()
    soft_triggers: dict[str, SoftTriggers] = msgspec.field(default_factory=dict)
    resilience: ResilienceConfig = msgspec.field(default_factory=ResilienceConfig)


class StreamingConfig(_Strict, frozen=True, kw_only=True):
    heartbeat_interval_ms: Annotated[int, msgspec.Meta(ge=0)] = 0


class CacheConfig(_Strict, frozen=True, kw_only=True):
    """``cache``: complete answers, per API key, in ``$OLP_HOME/olp.db``."""

    enabled: bool = True
    ttl_s: _Positive = 86400.0
    max_entry_bytes: _Count = 1024 * 1024
    max_total_bytes: _Count = 256 * 1024 * 1024
    max_entries_per_key: _Count = 2000
    max_client_buffer_events: _Count = 256


class ServerConfig(_Strict, frozen=True, kw_only=True):
    max_body_bytes: _Count = 5 * 1024 * 1024
    drain_grace_s: _NonNegative = 30.0
    kill_grace_s: _NonNegative = 3.0


class Config(_Strict, frozen=True, kw_only=True):
    """The decoded ``config.json``; a missing file is ``Config()``."""

    auth: AuthConfig = msgspec.field(default_factory=AuthConfig)
    providers: ProvidersConfig = msgspec.field(default_factory=ProvidersConfig)
    routing: RoutingConfig = msgspec.field(default_factory=RoutingConfig)
    streaming: StreamingConfig = msgspec.field(default_factory=StreamingConfig)
    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    cache: CacheConfig = msgspec.field(default_factory=CacheConfig)


class _RawRouting(_Strict, frozen=True, kw_only=True):
    chains: dict[str, Any] = msgspec.field(default_factory=dict)
    default_fallbacks: tuple[ChainEntry, ...] = ()
    soft_triggers: dict[str, Any] = msgspec.field(default_factory=dict)
    resilience: ResilienceConfig = msgspec.field(default_factory=ResilienceConfig)


class _RawConfig(_Strict, frozen=True, kw_only=True):
    """``Config`` with user-named maps left raw, decoded per key so errors name the key
    (msgspec reports a map value's path as ``[...]``)."""

    auth: AuthConfig = msgspec.field(default_factory=AuthConfig)
    providers: dict[str, Any] = msgspec.field(default_factory=dict)
    routing: _RawRouting = msgspec.field(default_factory=_RawRouting)
    streaming: StreamingConfig = msgspec.field(default_factory=StreamingConfig)
    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    cache: CacheConfig = msgspec.field(default_factory=CacheConfig)


@dataclass(frozen=True, slots=True)
class Timeouts:
    first_output_s: float
    idle_s: float
    total_s: float


DEFAULT_TIMEOUTS: Final[Mapping[str, Timeouts]] = {
    # claude streams tokens; its idle deadline must fire before claude's 300 s re-ask.
    "anthropic": Timeouts(first_output_s=60.0, idle_s=120.0, total_s=600.0),
    # codex and vibe print content only once the answer is done: first output == total.
    "openai": Timeouts(first_output_s=600.0, idle_s=120.0, total_s=600.0),
    "mistral": Timeouts(first_output_s=600.0, idle_s=120.0, total_s=600.0),
}
HTTP_TIMEOUTS: Final = Timeouts(first_output_s=120.0, idle_s=120.0, total_s=600.0)


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """A provider block merged with its defaults (what actors and routing consume)."""

    name: str
    kind: ProviderKind
    enabled: bool
    max_concurrent: int
    timeouts: Timeouts
    metered: bool
    binary: str | None = None
    extra_args: tuple[str, ...] = ()
    home_files: Mapping[str, str] = field(default_factory=dict, repr=False)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    base_url: str | None = None
    api_key_env: str | None = None
    retry: RetryConfig = field(default_factory=RetryConfig)
    sandbox: bool = True
    sandbox_read_only: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, repr=False)
class Settings:
    """Everything OLP reads at start-up. ``repr`` never shows the owner token or env values."""

    home: Path
    config_path: Path
    port: int
    bind: str
    log_level: LogLevel
    config: Config
    owner_token: str | None = None
    forbid_metered_fallback: bool = False

    @property
    def db_path(self) -> Path:
        return self.home / "olp.db"

    def __repr__(self) -> str:
        return (f"Settings(home={str(self.home)!r}, port={self.port}, bind={self.bind!r}, "
                f"log_level={self.log_level!r}, providers={list(self.provider_names())!r}, "
                f"owner_token={'<set>' if self.owner_token else None})")

    def provider_names(self) -> tuple[str, ...]:
        """Built-in providers, then the configured ones in file order."""
        extra = [n for n in self.config.providers.blocks if n not in BUILTIN_PROVIDERS]
        return (*BUILTIN_PROVIDERS, *extra)

    def enabled_providers(self) -> tuple[str, ...]:
        """Providers not switched off in ``providers.enabled`` (absent means enabled)."""
        enabled = self.config.providers.enabled
        return tuple(n for n in self.provider_names() if enabled.get(n, True))

    def provider(self, name: str) -> ProviderSettings:
        """The ``providers.<name>`` block merged with defaults; ``KeyError`` if unknown."""
        if name not in self.provider_names():
            raise KeyError(name)
        block = self.config.providers.blocks.get(name) or ProviderConfig()
        kind: ProviderKind = "cli" if block.kind is None else block.kind
        base = DEFAULT_TIMEOUTS.get(name, HTTP_TIMEOUTS) if kind == "cli" else HTTP_TIMEOUTS
        t = block.timeouts
        return ProviderSettings(
            name=name,
            kind=kind,
            enabled=self.config.providers.enabled.get(name, True),
            max_concurrent=block.max_concurrent,
            timeouts=Timeouts(
                first_output_s=_or(t.first_output_s, base.first_output_s),
                idle_s=_or(t.idle_s, base.idle_s),
                total_s=_or(t.total_s, base.total_s),
            ),
            metered=block.metered if block.metered is not None else kind != "cli",
            binary=block.binary,
            extra_args=block.extra_args,
            home_files=dict(block.home_files),
            env=dict(block.env),
            base_url=block.base_url,
            api_key_env=block.api_key_env,
            retry=block.retry,
            sandbox=block.sandbox,
            sandbox_read_only=block.sandbox_read_only,
        )


def load_settings(environ: Mapping[str, str] = os.environ) -> Settings:
    """Read the environment and ``$OLP_HOME/config.json``; create ``OLP_HOME`` (0700) if missing.

    Blocks on disk I/O. Raises :class:`ConfigError` naming the bad variable or config path.
    """
    home = _olp_home(environ)
    config_path = home / "config.json"
    return Settings(
        home=home,
        config_path=config_path,
        port=_port(environ.get("OLP_PORT")),
        bind=(environ.get("OLP_BIND") or "").strip() or DEFAULT_BIND,
        log_level=_log_level(environ.get("OLP_LOG_LEVEL")),
        config=load_config(config_path),
        owner_token=_owner_token(environ.get("OLP_OWNER_TOKEN")),
        forbid_metered_fallback=(environ.get("OLP_FORBID_METERED_FALLBACK", "").strip().lower()
                                 in {"1", "true", "yes", "on"}),
    )


def load_config(path: Path) -> Config:
    """Decode and validate one config file (blocks on disk I/O); a missing file is ``Config()``."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Config()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        obj = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON{_position(data, str(exc))}") from None
    raw = _convert(obj, _RawConfig, "", path)
    providers = dict(raw.providers)
    enabled = {name: _convert(value, bool, f"providers.enabled.{name}", path)
               for name, value in _convert(providers.pop("enabled", {}), dict[str, Any],
                                           "providers.enabled", path).items()}
    blocks = {name: _provider_block(block, f"providers.{name}", path)
              for name, block in providers.items()}
    chains = {name: _convert(chain, tuple[ChainEntry, ...], f"routing.chains.{name}", path)
              for name, chain in raw.routing.chains.items()}
    soft = {name: _convert(block, SoftTriggers, f"routing.soft_triggers.{name}", path)
            for name, block in raw.routing.soft_triggers.items()}
    routing = RoutingConfig(chains=chains, default_fallbacks=raw.routing.default_fallbacks,
                            soft_triggers=soft, resilience=raw.routing.resilience)
    config = Config(auth=raw.auth, providers=ProvidersConfig(enabled=enabled, blocks=blocks),
                    routing=routing, streaming=raw.streaming, server=raw.server,
                    cache=raw.cache)
    _check(config, path)
    return config


def resolve_binary(provider_name: str, settings: Settings,
                   environ: Mapping[str, str] = os.environ) -> str | None:
    """Absolute path of a CLI provider's binary, or ``None`` if it is not found (or not a CLI).

    Order: ``providers.<name>.binary``, then ``OLP_CLAUDE_BIN``/``OLP_CODEX_BIN``/``OLP_VIBE_BIN``
    from ``environ``, then ``claude``/``codex``/``vibe``; names are looked up on ``environ``'s
    ``PATH``. Blocks briefly on filesystem checks.
    """
    try:
        provider = settings.provider(provider_name)
    except KeyError:
        return None
    if provider.kind != "cli" or provider_name not in DEFAULT_COMMANDS:
        return None
    command = (provider.binary or environ.get(BINARY_ENV[provider_name], "").strip()
               or DEFAULT_COMMANDS[provider_name])
    found = shutil.which(os.path.expanduser(command), path=environ.get("PATH", os.defpath))
    return os.path.abspath(found) if found else None


# -- helpers ------------------------------------------------------------------------------

_T = TypeVar("_T")
_AT = re.compile(r"^(?P<msg>.*) - at `\$(?P<loc>.*)`$", re.DOTALL)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>.*)`$", re.DOTALL)
_BYTE = re.compile(r"\s*\(byte (\d+)\)$")


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _convert(obj: object, typ: type[_T], prefix: str, source: Path) -> _T:
    try:
        return msgspec.convert(obj, typ, strict=True)
    except msgspec.ValidationError as exc:
        where, detail = _locate(str(exc), prefix)
        raise ConfigError(f"{source}: {where}: {detail}") from None


def _provider_block(block: object, prefix: str, source: Path) -> ProviderConfig:
    if isinstance(block, dict):  # check string maps per key first, for a precise path
        for name in ("env", "home_files"):
            values = block.get(name)
            if isinstance(values, dict):
                for key, value in values.items():
                    _convert(value, str, f"{prefix}.{name}.{key}", source)
    return _convert(block, ProviderConfig, prefix, source)


def _locate(message: str, prefix: str) -> tuple[str, str]:
    """Turn msgspec's ``msg - at `$.a.b``` into (``prefix.a.b``, ``msg``) without backticks."""
    loc = ""
    m = _AT.match(message)
    if m:
        message, loc = m["msg"], m["loc"]
    where = (prefix + loc).removeprefix(".")
    u = _UNKNOWN.match(message)
    if u:
        where = f"{where}.{u['field']}" if where else u["field"]
        return where, "unknown field (check the spelling)"
    return where or "(top level)", message.replace("`", "")


def _position(data: bytes, message: str) -> str:
    message = message.removeprefix("JSON is malformed: ")
    m = _BYTE.search(message)
    if not m:
        return f": {message}"
    pos = int(m[1])
    line = data.count(b"\n", 0, pos) + 1
    column = pos - (data.rfind(b"\n", 0, pos) + 1) + 1
    return f" at line {line}, column {column}: {message[: m.start()]}"


def _check(config: Config, source: Path) -> None:
    """Rules the types cannot express: provider kinds, names, safe paths, claude's idle limit."""
    blocks = config.providers.blocks

    def fail(where: str, detail: str) -> None:
        raise ConfigError(f"{source}: {where}: {detail}")

    for name, block in blocks.items():
        where = f"providers.{name}"
        if name in BUILTIN_PROVIDERS and block.kind is not None:
            fail(f"{where}.kind", f"{name} is a built-in CLI provider and takes no kind")
        if name not in BUILTIN_PROVIDERS and block.kind is None:
            fail(f"{where}.kind", "required for a provider that is not built in "
                 f"({', '.join(BUILTIN_PROVIDERS)}); known kinds: openai-compatible")
        if block.kind == "openai-compatible" and not block.base_url:
            fail(f"{where}.base_url", "required for kind openai-compatible")
        for rel in block.home_files:
            parts = PurePosixPath(rel).parts
            if not rel or rel.startswith(("/", "~")) or ".." in parts or "\\" in rel:
                fail(f"{where}.home_files", f"{rel!r} must be a relative path inside the home")
        for path in block.sandbox_read_only:
            if not PurePosixPath(path).is_absolute() or ".." in PurePosixPath(path).parts:
                fail(f"{where}.sandbox_read_only", f"{path!r} must be an absolute path")
    for name, chain in config.routing.chains.items():
        if not chain:
            fail(f"routing.chains.{name}", "a chain needs at least one entry")
    for name in config.providers.enabled:
        if name not in BUILTIN_PROVIDERS and name not in blocks:
            fail(f"providers.enabled.{name}", f"unknown provider (no providers.{name} block)")
    claude = blocks.get("anthropic")
    idle = claude.timeouts.idle_s if claude else None
    if idle is not None and idle >= CLAUDE_STREAM_ABANDON_S:
        fail("providers.anthropic.timeouts.idle_s", "must be below 300 (claude abandons a "
             "silent stream after ~300 s and re-asks)")


def _olp_home(environ: Mapping[str, str]) -> Path:
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
    return home


def _port(raw: str | None) -> int:
    if raw is None or not raw.strip():
        return DEFAULT_PORT
    try:
        port = int(raw.strip())
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ConfigError(f"environment: OLP_PORT: expected a port number 0-65535, got {raw!r}")
    return port


def _log_level(raw: str | None) -> LogLevel:
    value = (raw or "").strip().lower() or "info"
    value = "warning" if value == "warn" else value
    for level in _LOG_LEVELS:
        if level == value:
            return level
    raise ConfigError(f"environment: OLP_LOG_LEVEL: expected one of "
                      f"{', '.join(_LOG_LEVELS)}, got {raw!r}")


def _owner_token(raw: str | None) -> str | None:
    token = (raw or "").strip()
    if not token:
        return None
    if len(token) < MIN_OWNER_TOKEN_CHARS:  # never echo the value
        raise ConfigError(f"environment: OLP_OWNER_TOKEN: too short (use at least "
                          f"{MIN_OWNER_TOKEN_CHARS} random characters)")
    return token
