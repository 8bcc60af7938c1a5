"""The provider kit: everything OLP knows about a kind of provider, in one :class:`ProviderSpec`.

A provider is a subpackage of :mod:`olp.providers` that exports ``SPEC``. :func:`builtin_specs`
finds them by walking the package (there is no central list), so adding a CLI means adding a
subpackage. Config (built-in names, default deadlines, limits), ``olp doctor`` and ``/health``
(install hints, binary resolution, risk tier), the engine (cache policy) and the provider
wiring (adapters, credentials) all read provider facts from here and nowhere else.

Discovery imports the subpackages once per search path; after that every lookup is a read of
an immutable tuple, safe to call from the Trio loop. :func:`resolve_binary` checks the
filesystem (briefly blocking).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, Protocol, runtime_checkable

import olp.providers
from olp.actors._adapter import CliAdapter, Credentials
from olp.actors._deadline import Timeouts
from olp.ir import ChatRequest

from ._adapter import BuildInvocation, ProviderAdapter
from ._login_format import LoginFormat

if TYPE_CHECKING:
    from olp.actors._threads import ThreadServers
    from olp.actors._warm_units import WarmUnits

SpecKind = Literal["cli", "http"]
#: D: enabled by default. C: off until the owner enables it. B: C plus an explicit consent.
#: A: refused.
RiskTier = Literal["A", "B", "C", "D"]
#: What each tier means (the OLP seed's risk tier guide), as ``olp doctor`` and config errors
#: say it.
TIER_MEANING: Final[Mapping[RiskTier, str]] = {
    "D": "permissive: enabled by default",
    "C": "a tightening signal without enforcement history: opt-in",
    "B": "the vendor may revoke the account's key for use through a proxy: opt-in with "
         "consent",
    "A": "excluded: the vendor prohibits it",
}
#: Where a hop's capabilities come from: the models registry (a model missing from it is
#: text only), or everything passed through to the upstream.
CapabilitySource = Literal["registry", "passthrough"]

__all__ = ["TIER_MEANING", "BuildInvocation", "CapabilitySource", "Credentials",
           "ExpiringLogins", "MeteredFiles",
           "ProviderAdapter", "ProviderSpec", "RiskTier", "SpecKind", "builtin_names",
           "builtin_specs", "cache_bypass", "find", "http_kinds", "never_bypass",
           "resolve_binary", "spec_for"]


@runtime_checkable
class MeteredFiles(Protocol):
    """Credentials whose login *file* can hold an API key (codex's ``auth.json`` in API-key
    mode, vibe's ``.env``): they say so, for :meth:`ProviderSpec.metered_by`."""

    def metered_source(self, env: Mapping[str, str], real_home: Path) -> str | None:
        """Where the API key the CLI will use is (a file it reads), or ``None`` when its
        login file holds none. ``env`` and ``real_home`` are as for ``preflight``. Reads
        the file (briefly blocking)."""
        ...


@runtime_checkable
class ExpiringLogins(Protocol):
    """Credentials whose login file says when its token ends (claude, codex, gemini): an
    expired one that cannot be refreshed is named in ``olp doctor`` and ``/health``."""

    def login_expired(self, env: Mapping[str, str], real_home: Path, now: float) -> str | None:
        """Why the login file the CLI will read can no longer log in (its token ended at
        ``now`` or before, and it has no refresh token), or ``None``. Reads the file
        (briefly blocking)."""
        ...


def never_bypass(request: ChatRequest) -> bool:
    """The default cache policy: every request may be answered from the cache."""
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderSpec:
    """One provider's facts.

    ``kind="cli"`` specs are the built-in providers (``name`` is the provider's name in the
    config); a ``kind="http"`` spec describes a provider kind the owner instantiates under
    names of their own (``name`` is the config's ``kind``, e.g. ``openai-compatible``).

    - ``order``: position among the built-ins (the config lists providers in this order).
    - ``command`` / ``binary_env``: the CLI looked up on ``PATH`` and the environment
      variable that overrides it (``providers.<name>.binary`` overrides both).
    - ``install_hint``: how to install (and log into) it, as ``olp doctor`` prints it.
    - ``adapter``: gives the CLI's :class:`~olp.actors.CliAdapter` (a :class:`ProviderAdapter`
      built from the subpackage's invocation, parser and credentials).
    - ``credentials``: where its login is found (:class:`~olp.providers.kit.Credentials`).
    - ``metered_env``: variables whose presence in the CLI's environment means metered
      (per-token) spend: an API key rather than a subscription login (see
      :meth:`metered_by`; credentials that are also :class:`MeteredFiles` add their files).
    - ``metered``: whether the provider is metered whatever its credential (HTTP kinds).
    - ``timeouts``: the default deadlines; ``max_idle_s`` an idle deadline the config must
      stay below, ``max_idle_reason`` why (shown in the config error).
    - ``risk_tier``: see :data:`RiskTier`; carried into ``/health`` and ``olp doctor``.
    - ``cache_bypass``: requests this provider must always run (never served from the cache).
    - ``capabilities``: see :data:`CapabilitySource`.
    - ``probe_model``: the model ``olp doctor --probe`` asks.
    - ``default_chains``: the registry alias this provider answers each of ``olp setup``'s
      default chains with (``default``, ``coding``, ``smart``, ``fast``); a chain it has no
      model for is left out.
    - ``warm``: the default size of its warm pool (``providers.<name>.warm``; processes
      started ahead of time, :mod:`olp.actors._warm`), chosen from its measured start-up
      gain and idle memory; ``None`` when starting it ahead gains nothing, ``warm_reason``
      says why (shown in the config error). ``warm_units`` makes its units when they are
      not processes waiting on stdin (vibe: sessions on a long-lived server).
    """

    name: str
    kind: SpecKind
    order: int
    install_hint: str
    timeouts: Timeouts
    risk_tier: RiskTier = "D"
    command: str | None = None
    binary_env: str | None = None
    adapter: Callable[[], CliAdapter] | None = None
    credentials: Credentials | None = None
    metered_env: tuple[str, ...] = ()
    metered: bool = False
    max_idle_s: float | None = None
    max_idle_reason: str = ""
    cache_bypass: Callable[[ChatRequest], bool] = never_bypass
    capabilities: CapabilitySource = "registry"
    probe_model: str | None = None
    default_chains: Mapping[str, str] = field(default_factory=dict)
    warm: int | None = None
    warm_reason: str = ""
    #: Whether ``providers.<name>.sessions`` is on by default: the CLI's own session is
    #: kept between turns and resumed (issue #25; only where measured to work).
    sessions: bool = False
    warm_units: Callable[[], WarmUnits] | None = None
    #: Whether the model's thinking comes back from this provider, when the client wants it
    #: (issue #27): its CLI prints thinking or a summary (claude, codex, qwen), or the
    #: upstream streams ``reasoning_content`` (HTTP). Otherwise ``X-OLP-Ignored-Params``
    #: names ``thinking``.
    reasoning_out: bool = False
    #: The CLI's own variable for where its login lives (``CLAUDE_CONFIG_DIR``…): an
    #: account's ``home`` is found through it (issue #30); ``None``: its login is a key in
    #: the environment only.
    home_var: str | None = None
    #: Variables of the proxy's environment that hold or point at the owner's login: an
    #: account other than the owner's never sees them (:meth:`account_env`).
    login_vars: tuple[str, ...] = ()
    #: How the CLI keeps a refreshable OAuth login in a file (issue #41): OLP's keeper then
    #: refreshes it and spawns get only its access token. ``None``: a key, or a login OLP
    #: leaves to the CLI (gemini: Google's refresh tokens can be reused).
    login: LoginFormat | None = None
    #: The CLI's long-lived model server, one per login, a thread per request (codex
    #: ``app-server``, issue #43; ``providers.<name>.codex_mode``), and whether it is used
    #: when the config does not say.
    thread_servers: Callable[[], ThreadServers] | None = None
    thread_servers_default: bool = False

    def account_env(self, proxy_env: Mapping[str, str], home: Path | None) -> dict[str, str]:
        """The proxy's environment as one account's spawns see it: for an account with its
        own ``home``, without :attr:`login_vars` and with :attr:`home_var` naming ``home``
        (the credentials' ``spawn_env`` finds the login there, never the owner's); for the
        owner's own login (``home`` ``None``), unchanged."""
        if home is None:
            return dict(proxy_env)
        env = {k: v for k, v in proxy_env.items()
               if k not in self.login_vars and k != self.home_var}
        if self.home_var is not None:
            env[self.home_var] = str(home)
        return env

    def __post_init__(self) -> None:
        if self.kind == "cli":
            missing = [f for f in ("command", "binary_env", "adapter", "credentials")
                       if getattr(self, f) is None]
            if missing:
                raise ValueError(f"CLI provider spec {self.name!r} lacks {', '.join(missing)}")
        if self.max_idle_s is not None and self.timeouts.idle_s >= self.max_idle_s:
            raise ValueError(f"provider spec {self.name!r}: default idle_s must be below "
                             f"max_idle_s")

    def metered_by(self, configured_env: Mapping[str, str], proxy_env: Mapping[str, str],
                   *, real_home: Path | None = None) -> str | None:
        """Why this provider is metered, or ``None`` when it is not.

        Metered when a ``metered_env`` variable reaches the CLI non-empty (from the
        provider's configured ``env``, or passed through from the proxy's environment by its
        credentials' ``spawn_env``: the variables the CLI actually gets), else when its
        credentials are :class:`MeteredFiles` and the login file the CLI will read holds an
        API key (``real_home`` defaults to ``proxy_env``'s ``HOME``, else the user's home);
        a kind that is always metered is. Reads that file (briefly blocking)."""
        if self.metered:
            return f"the {self.name} kind is metered by default"
        if self.credentials is None:
            return None
        passed = self.credentials.spawn_env(proxy_env)
        for var in self.metered_env:
            if configured_env.get(var, "").strip():
                return f"{var} in providers.{self.name}.env"
            if var not in configured_env and passed.get(var, "").strip():
                return f"{var} in the proxy's environment"
        if isinstance(self.credentials, MeteredFiles):
            home = real_home or Path(proxy_env.get("HOME") or Path.home())
            return self.credentials.metered_source({**passed, **configured_env}, home)
        return None


def builtin_specs() -> tuple[ProviderSpec, ...]:
    """Every ``SPEC`` exported by a subpackage of :mod:`olp.providers` (searched along the
    package's ``__path__``), ordered by :attr:`ProviderSpec.order`. Imports the subpackages
    the first time a given path is searched."""
    return _discover(tuple(olp.providers.__path__))


@lru_cache(maxsize=8)
def _discover(path: tuple[str, ...]) -> tuple[ProviderSpec, ...]:
    found: dict[str, ProviderSpec] = {}
    for module in pkgutil.iter_modules(list(path), prefix="olp.providers."):
        if not module.ispkg:
            continue
        spec = getattr(importlib.import_module(module.name), "SPEC", None)
        if not isinstance(spec, ProviderSpec):
            continue
        if spec.name in found:
            raise RuntimeError(f"two provider specs are named {spec.name!r}")
        found[spec.name] = spec
    return tuple(sorted(found.values(), key=lambda s: (s.order, s.name)))


def builtin_names() -> tuple[str, ...]:
    """The built-in providers (the CLI specs), in order."""
    return tuple(s.name for s in builtin_specs() if s.kind == "cli")


def http_kinds() -> tuple[str, ...]:
    """The provider kinds an owner may declare (the HTTP specs), in order."""
    return tuple(s.name for s in builtin_specs() if s.kind == "http")


def find(name: str) -> ProviderSpec | None:
    """The built-in (CLI) provider ``name``, or ``None``."""
    return next((s for s in builtin_specs() if s.kind == "cli" and s.name == name), None)


def spec_for(name: str, kind: str) -> ProviderSpec | None:
    """The spec governing a configured provider: the built-in ``name`` when ``kind`` is
    ``"cli"``, else the HTTP spec of that kind; ``None`` when there is none."""
    if kind == "cli":
        return find(name)
    return next((s for s in builtin_specs() if s.kind == "http" and s.name == kind), None)


def cache_bypass(provider: str, request: ChatRequest) -> bool:
    """Whether a hop to ``provider`` must run ``request`` rather than use the cache (the
    built-in provider's :attr:`ProviderSpec.cache_bypass`; never for other providers)."""
    spec = find(provider)
    return spec is not None and spec.cache_bypass(request)


def resolve_binary(spec: ProviderSpec, configured: str | None,
                   environ: Mapping[str, str]) -> str | None:
    """Absolute path of the CLI's binary, or ``None`` when not found (or not a CLI).

    Order: ``configured`` (``providers.<name>.binary``), then ``spec.binary_env`` from
    ``environ``, then ``spec.command``; a name is looked up on ``environ``'s ``PATH``.
    """
    if spec.kind != "cli" or spec.command is None:
        return None
    override = environ.get(spec.binary_env, "").strip() if spec.binary_env else ""
    command = configured or override or spec.command
    found = shutil.which(os.path.expanduser(command), path=environ.get("PATH", os.defpath))
    return os.path.abspath(found) if found else None
