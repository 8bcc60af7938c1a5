"""Settings: the environment plus ``$OLP_HOME/config.json``, merged with the provider kit.

Loading reads the disk and may create ``OLP_HOME``; call :func:`load_settings` at start-up
(or from a worker thread on SIGHUP), never directly from the Trio loop. Provider defaults
(which providers are built in, their deadlines, whether they are metered) come from
:mod:`olp.providers.kit`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from olp.actors import Timeouts
from olp.providers import kit
from olp.store import DEFAULT_ACCOUNT

from . import _env
from ._env import LogFormat, LogLevel
from ._load import load_config
from ._schema import Config, ProviderConfig, ProviderKind, RetryConfig


@dataclass(frozen=True, slots=True)
class AccountSettings:
    """One login of a CLI provider (issue #30). ``home``: the directory the CLI's own home
    variable names for it (``None``: the owner's own login, found as before accounts
    existed; only the default account has none); ``env``: added to its spawns;
    ``serves_all``: keys without a binding for the provider may use it."""

    name: str
    home: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    serves_all: bool = True


#: The account of a provider whose config names none: the owner's own login, for every key.
IMPLICIT_DEFAULT: Final = AccountSettings(DEFAULT_ACCOUNT)


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
    cli_retry_budget_s: float = 20.0
    sandbox: bool = True
    sandbox_read_only: tuple[str, ...] = ()
    warm: int = 0  # warm processes kept idle (0: none)
    warm_ttl_s: float = 600.0
    sessions: bool = False  # the CLI's own session kept between turns (issue #25)
    session_ttl_s: float = 3600.0
    lockdown_check: bool = True  # the self-check before the CLI serves (issue #26)
    #: Answer in threads of the CLI's long-lived model server (``codex_mode: "app-server"``,
    #: issue #43) rather than a spawn per request.
    app_server: bool = False
    #: Its logins in the order unbound keys try them: ``default`` first unless configured
    #: (then in file order). Always at least one.
    accounts: tuple[AccountSettings, ...] = (IMPLICIT_DEFAULT,)

    def account(self, name: str) -> AccountSettings | None:
        return next((a for a in self.accounts if a.name == name), None)

    @property
    def spec(self) -> kit.ProviderSpec | None:
        """The kit's facts for this provider (its built-in spec, or its HTTP kind's)."""
        return kit.spec_for(self.name, self.kind)


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
    log_format: LogFormat = "auto"

    @property
    def db_path(self) -> Path:
        return self.home / "olp.db"

    def __repr__(self) -> str:
        return (f"Settings(home={str(self.home)!r}, port={self.port}, bind={self.bind!r}, "
                f"log_level={self.log_level!r}, providers={list(self.provider_names())!r}, "
                f"owner_token={'<set>' if self.owner_token else None})")

    def provider_names(self) -> tuple[str, ...]:
        """Built-in providers (the kit's CLI specs), then the configured ones in file order."""
        builtin = kit.builtin_names()
        extra = [n for n in self.config.providers.blocks if n not in builtin]
        return (*builtin, *extra)

    def enabled_providers(self) -> tuple[str, ...]:
        """Providers that run: see :meth:`is_enabled`."""
        return tuple(n for n in self.provider_names() if self.is_enabled(n))

    def is_enabled(self, name: str) -> bool:
        """``providers.enabled.<name>`` when written; absent, a provider of risk tier D is
        enabled and one of tier C or B is not (opt-in). Tier A never is (the config check
        refuses enabling it)."""
        block = self.config.providers.blocks.get(name)
        spec = kit.spec_for(name, "cli" if block is None or block.kind is None else block.kind)
        tier = spec.risk_tier if spec is not None else "D"
        if tier == "A":
            return False
        return self.config.providers.enabled.get(name, tier == "D")

    def provider(self, name: str) -> ProviderSettings:
        """The ``providers.<name>`` block merged with defaults; ``KeyError`` if unknown."""
        if name not in self.provider_names():
            raise KeyError(name)
        block = self.config.providers.blocks.get(name) or ProviderConfig()
        kind: ProviderKind = "cli" if block.kind is None else block.kind
        spec = kit.spec_for(name, kind)
        if spec is None:  # the config admits only built-in names and known kinds
            raise KeyError(name)
        base, t = spec.timeouts, block.timeouts
        return ProviderSettings(
            name=name,
            kind=kind,
            enabled=self.is_enabled(name),
            max_concurrent=block.max_concurrent,
            timeouts=Timeouts(
                first_output_s=_or(t.first_output_s, base.first_output_s),
                idle_s=_or(t.idle_s, base.idle_s),
                total_s=_or(t.total_s, base.total_s),
            ),
            metered=block.metered if block.metered is not None else spec.metered,
            binary=block.binary,
            extra_args=block.extra_args,
            home_files=dict(block.home_files),
            env=dict(block.env),
            base_url=block.base_url,
            api_key_env=block.api_key_env,
            retry=block.retry,
            cli_retry_budget_s=block.cli_retry_budget_s,
            sandbox=block.sandbox,
            sandbox_read_only=block.sandbox_read_only,
            warm=block.warm if block.warm is not None else (spec.warm or 0),
            warm_ttl_s=block.warm_ttl_s,
            sessions=block.sessions if block.sessions is not None else spec.sessions,
            session_ttl_s=block.session_ttl_s,
            lockdown_check=block.lockdown_check,
            app_server=spec.thread_servers is not None and (
                block.codex_mode == "app-server" if block.codex_mode is not None
                else spec.thread_servers_default),
            accounts=self._accounts(name, block),
        )

    def _accounts(self, provider: str, block: ProviderConfig) -> tuple[AccountSettings, ...]:
        """The provider's accounts: the implicit default (unless written), then the written
        ones in file order, each home defaulting to ``$OLP_HOME/accounts/<provider>/<name>``
        (the default account's to the owner's own login)."""
        out = [] if DEFAULT_ACCOUNT in block.accounts else [IMPLICIT_DEFAULT]
        for name, written in block.accounts.items():
            home = Path(written.home).expanduser() if written.home is not None else \
                None if name == DEFAULT_ACCOUNT else self.account_home(provider, name)
            out.append(AccountSettings(name, home, dict(written.env), written.serves == "*"))
        return tuple(out)

    def account_home(self, provider: str, account: str) -> Path:
        """Where an account's login lives unless its ``home`` says otherwise."""
        return self.home / "accounts" / provider / account


def load_settings(environ: Mapping[str, str] = os.environ, *,
                  read_config: bool = True) -> Settings:
    """Read the environment and ``$OLP_HOME/config.json`` (with ``read_config=False``, not
    the file: an empty config, for ``olp setup --force`` to replace a broken one); create
    ``OLP_HOME`` (0700) if missing.

    Blocks on disk I/O. Raises :class:`ConfigError` naming the bad variable or config path.
    """
    home = _env.olp_home(environ)
    config_path = home / "config.json"
    return Settings(
        home=home,
        config_path=config_path,
        port=_env.port(environ.get("OLP_PORT")),
        bind=_env.bind(environ.get("OLP_BIND")),
        log_level=_env.log_level(environ.get("OLP_LOG_LEVEL")),
        log_format=_env.log_format(environ.get("OLP_LOG_FORMAT")),
        config=load_config(config_path) if read_config else Config(),
        owner_token=_env.owner_token(environ.get("OLP_OWNER_TOKEN")),
        forbid_metered_fallback=_env.flag(environ.get("OLP_FORBID_METERED_FALLBACK")),
    )


def resolve_binary(provider_name: str, settings: Settings,
                   environ: Mapping[str, str] = os.environ) -> str | None:
    """Absolute path of a CLI provider's binary, or ``None`` if it is not found (or not a CLI):
    :func:`olp.providers.kit.resolve_binary` with the configured ``providers.<name>.binary``.
    Blocks briefly on filesystem checks."""
    try:
        provider = settings.provider(provider_name)
    except KeyError:
        return None
    spec = provider.spec
    return None if spec is None else kit.resolve_binary(spec, provider.binary, environ)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value
