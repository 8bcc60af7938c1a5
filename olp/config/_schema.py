"""The ``config.json`` format: msgspec structs, strict, with the defaults of every field.

The file is our own format, so every struct forbids unknown fields: a typo in a key is
reported with its dotted path instead of being silently ignored (see :mod:`._load`).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from olp.ir import Category

ProviderKind = Literal["cli", "openai-compatible"]

Positive = Annotated[float, msgspec.Meta(gt=0)]
NonNegative = Annotated[float, msgspec.Meta(ge=0)]
Count = Annotated[int, msgspec.Meta(ge=1)]
Percent = Annotated[float, msgspec.Meta(gt=0, le=100)]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class ConfigError(Exception):
    """The configuration (file or environment) is invalid; the message names where and why."""


class Strict(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base for config structs: our own format, so an unknown key is an error."""


class AuthConfig(Strict, frozen=True, kw_only=True):
    allow_anonymous: bool = False
    fallback_detail_header_policy: Literal["owner_only", "all", "none"] = "owner_only"


class TimeoutsConfig(Strict, frozen=True, kw_only=True):
    """Per-hop deadlines as written; ``None`` means the provider's default."""

    first_output_s: Positive | None = None
    idle_s: Positive | None = None
    total_s: Positive | None = None


class RetryConfig(Strict, frozen=True, kw_only=True):
    """``providers.<name>.retry`` (HTTP providers): retries on the same hop before advancing."""

    server_errors: Annotated[int, msgspec.Meta(ge=0)] = 1
    connection_errors: Annotated[int, msgspec.Meta(ge=0)] = 1
    rate_limited: Annotated[int, msgspec.Meta(ge=0)] = 1
    max_retry_after_s: NonNegative = 5.0


class AccountConfig(Strict, frozen=True, kw_only=True):
    """``providers.<name>.accounts.<account>`` (issue #30): one login of the provider's CLI.
    ``home``: where the login lives (the directory the CLI's own home variable names;
    default ``$OLP_HOME/accounts/<provider>/<account>``); ``env``: variables added to its
    spawns (e.g. ``CLAUDE_CODE_OAUTH_TOKEN``); ``serves``: ``"*"`` when keys without a binding
    for the provider may use it (omitted: only keys bound to it)."""

    home: NonEmpty | None = None
    env: dict[str, str] = msgspec.field(default_factory=dict)
    serves: Literal["*"] | None = None

    def __repr__(self) -> str:  # env may hold tokens: show names only
        return (f"AccountConfig(home={self.home!r}, serves={self.serves!r}, "
                f"env_keys={sorted(self.env)!r})")


class ProviderConfig(Strict, frozen=True, kw_only=True):
    """One ``providers.<name>`` block as written (see :meth:`Settings.provider` for defaults)."""

    kind: Literal["openai-compatible"] | None = None
    binary: str | None = None
    max_concurrent: Count = 4
    extra_args: tuple[str, ...] = ()
    home_files: dict[str, str] = msgspec.field(default_factory=dict)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    timeouts: TimeoutsConfig = msgspec.field(default_factory=TimeoutsConfig)
    base_url: str | None = None
    api_key_env: str | None = None
    metered: bool | None = None
    retry: RetryConfig = msgspec.field(default_factory=RetryConfig)
    cli_retry_budget_s: Positive = 20.0  # a CLI's own retry storm, before its cause is answered
    sandbox: bool = True
    sandbox_read_only: tuple[str, ...] = ()
    consent: bool = False  # the owner accepts a tier-B provider's risk (see olp.providers.kit)
    warm: Annotated[int, msgspec.Meta(ge=0, le=16)] | None = None  # None: the kit's default
    warm_ttl_s: Positive = 600.0
    # keep the CLI's own session between a conversation's turns and resume it (issue #25);
    # None: the kit's default (on where measured to work)
    sessions: bool | None = None
    session_ttl_s: Positive = 3600.0  # a kept session unused this long is dropped
    lockdown_check: bool = True  # self-check the CLI's lockdown before it serves (#26)
    # codex only (issue #43): answer in threads of one long-lived `codex app-server` per
    # login, or spawn `codex exec` per request; None: the kit's default
    codex_mode: Literal["app-server", "exec"] | None = None
    accounts: dict[str, AccountConfig] = msgspec.field(default_factory=dict)  # issue #30

    def __repr__(self) -> str:  # env may hold API keys: show names only
        return (f"ProviderConfig(kind={self.kind!r}, binary={self.binary!r}, "
                f"max_concurrent={self.max_concurrent}, env_keys={sorted(self.env)!r})")


class ProvidersConfig(Strict, frozen=True, kw_only=True):
    """``providers``: the ``enabled`` map and the per-provider blocks (siblings in the file)."""

    enabled: dict[str, bool] = msgspec.field(default_factory=dict)
    blocks: dict[str, ProviderConfig] = msgspec.field(default_factory=dict)


class ChainEntry(Strict, frozen=True, kw_only=True):
    """One hop of a chain; ``on=None`` means the engine's default gate."""

    provider: NonEmpty
    model: NonEmpty
    name: NonEmpty | None = None
    on: tuple[Category, ...] | None = None
    metered: bool = False
    #: What a lacked capability does (docs/adr/0026-reasoning.md): ``degrade`` serves without
    #: reasoning but skips the hop for tools, images or JSON; ``skip`` skips it for any;
    #: ``ignore`` serves without any. What is served without is in X-OLP-Ignored-Params.
    unsupported: Literal["degrade", "skip", "ignore"] = "degrade"

    @property
    def label(self) -> str:
        """The entry's name, defaulting to ``provider:model``."""
        return self.name if self.name is not None else f"{self.provider}:{self.model}"


class SoftTriggers(Strict, frozen=True, kw_only=True):
    daily_request_count_threshold: Count | None = None
    five_hour_window_percent_threshold: Percent | None = None
    credit_pool_percent_threshold: Percent | None = None
    five_hour_window_budget_requests: Count | None = None
    credit_pool_budget_tokens: Count | None = None


class ResilienceConfig(Strict, frozen=True, kw_only=True):
    """``routing.resilience``: cooldowns after usage-window/billing failures, and circuits."""

    usage_window_default_s: Positive = 900.0
    usage_window_max_s: Positive = 6 * 3600.0
    billing_s: Positive = 3600.0
    circuit_failures: Count = 3
    circuit_window_s: Positive = 60.0
    probe_after_s: Positive = 15.0
    probe_max_s: Positive = 300.0


class RoutingConfig(Strict, frozen=True, kw_only=True):
    chains: dict[str, tuple[ChainEntry, ...]] = msgspec.field(default_factory=dict)
    default_fallbacks: tuple[ChainEntry, ...] = ()
    soft_triggers: dict[str, SoftTriggers] = msgspec.field(default_factory=dict)
    resilience: ResilienceConfig = msgspec.field(default_factory=ResilienceConfig)


class StreamingConfig(Strict, frozen=True, kw_only=True):
    heartbeat_interval_ms: Annotated[int, msgspec.Meta(ge=0)] = 0


class CacheConfig(Strict, frozen=True, kw_only=True):
    """``cache``: complete answers, per API key, in ``$OLP_HOME/olp.db``."""

    enabled: bool = True
    ttl_s: Positive = 86400.0
    max_entry_bytes: Count = 1024 * 1024
    max_total_bytes: Count = 256 * 1024 * 1024
    max_entries_per_key: Count = 2000
    max_client_buffer_events: Count = 256


class ServerConfig(Strict, frozen=True, kw_only=True):
    max_body_bytes: Count = 5 * 1024 * 1024
    drain_grace_s: NonNegative = 30.0
    kill_grace_s: NonNegative = 3.0
    keep_alive_s: Positive = 5.0
    # GET /metrics: the owner's key ("owner"), or no key from a loopback address
    # ("loopback"; any other address still needs the owner's key), or not served ("off")
    metrics: Literal["owner", "loopback", "off"] = "owner"
    # GET /dashboard: only from this machine ("loopback"), from any address ("on"), or "off"
    dashboard: Literal["loopback", "on", "off"] = "loopback"
    # Host names served besides localhost and IP addresses (DNS rebinding): exact names,
    # ".example.lan" for a domain and its subdomains, or "*" for any
    allowed_hosts: tuple[str, ...] = ()
    # a request body not complete this long after its headers is answered 408
    body_timeout_s: Positive = 10.0


class AuditConfig(Strict, frozen=True, kw_only=True):
    """``audit``: how long the audit trail and the usage ledger are kept."""

    max_age_days: Positive = 90.0
    max_rows: Count = 1_000_000
    usage_days: Count = 400


class Config(Strict, frozen=True, kw_only=True):
    """The decoded ``config.json``; a missing file is ``Config()``."""

    auth: AuthConfig = msgspec.field(default_factory=AuthConfig)
    providers: ProvidersConfig = msgspec.field(default_factory=ProvidersConfig)
    routing: RoutingConfig = msgspec.field(default_factory=RoutingConfig)
    streaming: StreamingConfig = msgspec.field(default_factory=StreamingConfig)
    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    cache: CacheConfig = msgspec.field(default_factory=CacheConfig)
    audit: AuditConfig = msgspec.field(default_factory=AuditConfig)
