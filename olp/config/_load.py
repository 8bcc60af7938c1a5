"""Decoding ``config.json``: per-key conversion, error locating and the cross-field checks.

msgspec reports a map value's path as ``[...]``, so the maps whose keys the owner names
(providers, chains, soft triggers) are decoded raw first and then key by key: every error
names the dotted path of the bad value. Blocks on disk I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar
from urllib.parse import urlsplit

import msgspec

from olp.providers import kit
from olp.store import valid_account_name

from ._schema import (
    AuditConfig,
    AuthConfig,
    CacheConfig,
    ChainEntry,
    Config,
    ConfigError,
    ProviderConfig,
    ProvidersConfig,
    ResilienceConfig,
    RoutingConfig,
    ServerConfig,
    SoftTriggers,
    StreamingConfig,
    Strict,
)

_T = TypeVar("_T")
_AT = re.compile(r"^(?P<msg>.*) - at `\$(?P<loc>.*)`$", re.DOTALL)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>.*)`$", re.DOTALL)
_BYTE = re.compile(r"\s*\(byte (\d+)\)$")


class _RawRouting(Strict, frozen=True, kw_only=True):
    chains: dict[str, Any] = msgspec.field(default_factory=dict)
    default_fallbacks: tuple[ChainEntry, ...] = ()
    soft_triggers: dict[str, Any] = msgspec.field(default_factory=dict)
    resilience: ResilienceConfig = msgspec.field(default_factory=ResilienceConfig)


class _RawConfig(Strict, frozen=True, kw_only=True):
    """``Config`` with user-named maps left raw, decoded per key so errors name the key."""

    auth: AuthConfig = msgspec.field(default_factory=AuthConfig)
    providers: dict[str, Any] = msgspec.field(default_factory=dict)
    routing: _RawRouting = msgspec.field(default_factory=_RawRouting)
    streaming: StreamingConfig = msgspec.field(default_factory=StreamingConfig)
    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    cache: CacheConfig = msgspec.field(default_factory=CacheConfig)
    audit: AuditConfig = msgspec.field(default_factory=AuditConfig)


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
    except RecursionError:
        raise ConfigError(f"{path}: invalid JSON: nested too deeply") from None
    try:
        return _decode(obj, path)
    except RecursionError:  # decodable, but too deep to convert or check
        raise ConfigError(f"{path}: (top level): nested too deeply") from None


def _decode(obj: object, path: Path) -> Config:
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
                    cache=raw.cache, audit=raw.audit)
    _check(config, path)
    return config


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
    """Rules the types cannot express: provider kinds, names, safe paths, risk tiers (A
    cannot be enabled; B needs ``consent``) and each built-in provider's idle limit
    (:attr:`~olp.providers.kit.ProviderSpec.max_idle_s`)."""
    blocks = config.providers.blocks
    builtin = kit.builtin_names()

    def fail(where: str, detail: str) -> None:
        raise ConfigError(f"{source}: {where}: {detail}")

    for name, block in blocks.items():
        where = f"providers.{name}"
        if name in builtin and block.kind is not None:
            fail(f"{where}.kind", f"{name} is a built-in CLI provider and takes no kind")
        if name not in builtin and block.kind is None:
            fail(f"{where}.kind", "required for a provider that is not built in "
                 f"({', '.join(builtin)}); known kinds: {', '.join(kit.http_kinds())}")
        if block.kind == "openai-compatible" and not block.base_url:
            fail(f"{where}.base_url", "required for kind openai-compatible")
        if block.base_url is not None and (why := _bad_base_url(block.base_url)):
            fail(f"{where}.base_url", f"{block.base_url!r} {why}")
        for rel in block.home_files:
            if why := _bad_home_file(rel, block.home_files):
                fail(f"{where}.home_files", f"{rel!r} {why}")
        spec = kit.spec_for(name, "cli" if block.kind is None else block.kind)
        if block.warm and spec is not None and spec.warm is None:
            why = spec.warm_reason or f"{spec.kind} providers start no process"
            fail(f"{where}.warm", f"{name} cannot be kept warm: {why}; remove it or set 0")
        if block.codex_mode is not None and (spec is None or spec.thread_servers is None):
            fail(f"{where}.codex_mode", f"only codex takes it ({name} has no app-server mode)")
        for path in block.sandbox_read_only:
            if not PurePosixPath(path).is_absolute() or ".." in PurePosixPath(path).parts:
                fail(f"{where}.sandbox_read_only", f"{path!r} must be an absolute path")
        if block.accounts and (spec is None or spec.kind != "cli"):
            fail(f"{where}.accounts", "accounts are logins of a CLI provider; an HTTP "
                 "provider is one API key (declare another provider for another key)")
        for account, written_account in block.accounts.items():
            if not valid_account_name(account):
                fail(f"{where}.accounts", f"{account!r} is not an account name (1-32 of a-z, "
                     "0-9, - and _, starting with a letter or digit)")
            home = written_account.home
            if home is not None and not Path(home).expanduser().is_absolute():
                fail(f"{where}.accounts.{account}.home", f"{home!r} must be an absolute path")
    for name, chain in config.routing.chains.items():
        if not chain:
            fail(f"routing.chains.{name}", "a chain needs at least one entry")
    for name in config.providers.enabled:
        if name not in builtin and name not in blocks:
            fail(f"providers.enabled.{name}", f"unknown provider (no providers.{name} block)")
    for name, on in config.providers.enabled.items():
        written = blocks.get(name)
        spec = kit.spec_for(name, "cli" if written is None or written.kind is None
                            else written.kind)
        if spec is None or not on:
            continue
        if spec.risk_tier == "A":
            fail(f"providers.enabled.{name}", f"{name} is risk tier A ({kit.TIER_MEANING['A']})"
                 " and cannot be enabled; remove the entry")
        if spec.risk_tier == "B" and not (written is not None and written.consent):
            fail(f"providers.{name}.consent", f"{name} is risk tier B "
                 f"({kit.TIER_MEANING['B']}): set providers.{name}.consent to true to accept "
                 f"that risk, or providers.enabled.{name} to false")
    for spec in kit.builtin_specs():
        written = blocks.get(spec.name)
        idle = written.timeouts.idle_s if written is not None and spec.kind == "cli" else None
        if idle is not None and spec.max_idle_s is not None and idle >= spec.max_idle_s:
            fail(f"providers.{spec.name}.timeouts.idle_s",
                 f"must be below {spec.max_idle_s:g} ({spec.max_idle_reason})")


def _bad_base_url(url: str) -> str | None:
    """Why ``url`` is not an ``http(s)://host[:port]/...`` URL, or ``None``."""
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        return "is not a URL"
    if parts.scheme not in ("http", "https"):
        return "must be an http:// or https:// URL"
    if not parts.hostname or not port_ok or any(c.isspace() or ord(c) < 32 for c in url):
        return "must be an http(s) URL with a host, e.g. https://api.example.com/v1"
    return None


#: Made by the runner in every private home: a file cannot take its place.
_HOME_DIRS = frozenset({"tmp"})


def _bad_home_file(rel: str, siblings: Iterable[str]) -> str | None:
    """Why ``rel`` (a ``home_files`` key) does not name a file inside the home, or ``None``."""
    parts = PurePosixPath(rel).parts
    if (not rel or rel.startswith(("/", "~")) or ".." in parts or "\\" in rel
            or any(ord(c) < 32 for c in rel)):
        return "must be a relative path inside the home"
    if rel.rsplit("/", 1)[-1] in ("", ".") or not parts or "/".join(parts) in _HOME_DIRS:
        return "names a directory; home_files keys name files (e.g. .codex/config.toml)"
    for other in siblings:
        if other != rel and PurePosixPath(other).parts[:len(parts)] == parts:
            return f"names a directory (it holds {other!r}); home_files keys name files"
    return None
