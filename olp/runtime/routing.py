"""Building the routes from the config and the models registry, validated at start-up, and
the ``GET /v1/models`` listing they make.

Each chain entry is checked: an unknown provider, a provider that is not running (disabled,
binary not found), one without credentials, or a metered provider without the entry's
``metered: true`` consent (or with ``OLP_FORBID_METERED_FALLBACK=1``) is pruned with a
warning; repeats of a (provider, model) are dropped. A chain with nothing usable left does
not stop the proxy: it is logged, listed by ``/health`` and ``olp doctor`` with the reason,
and a request to it answers 503 naming what is missing.

A model without a chain goes where the models registry maps it. When that provider is
metered, the owner's consent is ``providers.<name>.metered: true`` (there is no entry to
say it): without it, or with ``OLP_FORBID_METERED_FALLBACK=1``, the model answers 404 naming
why and the fix, and ``GET /v1/models`` does not list it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from olp.config import ChainEntry, ProviderSettings, Registry, Settings
from olp.engine import Capabilities, Hop, Router, UnknownModel
from olp.engine._routes import dedupe
from olp.ir import EFFORTS
from olp.store import DEFAULT_ACCOUNT

log = logging.getLogger("olp.runtime.routing")

#: What a hop whose spec passes capabilities through (openai-compatible) takes: everything.
HTTP_CAPABILITIES = Capabilities(tools=True, images=True, json_mode=True, sampling_params=True,
                                 reasoning=EFFORTS, reasoning_out=True)
#: A CLI model missing from the registry: text only.
UNKNOWN_CLI_CAPABILITIES = Capabilities(tools=False, images=False, json_mode=True)


@dataclass(frozen=True, slots=True)
class Login:
    """One account of a provider as routing sees it (issue #30): whether its login was
    found, whether it is metered, and whether keys without a binding may use it."""

    name: str
    credentials: bool
    metered: bool = False
    serves_all: bool = True


@dataclass(frozen=True, slots=True)
class Provider:
    """A provider as routing sees it: its settings, whether it can answer now, whether it is
    metered (configured, or detected from its credential) and why, and when it cannot
    answer, the problem and its fix. ``accounts``: its logins (``()``: the one login the
    provider-level fields describe, as the default account)."""

    settings: ProviderSettings
    running: bool
    credentials: bool
    metered: bool = False
    problem: str = ""
    fix: str = ""
    metered_by: str = ""
    accounts: tuple[Login, ...] = ()

    @property
    def logins(self) -> tuple[Login, ...]:
        return self.accounts or (Login(DEFAULT_ACCOUNT, self.credentials, self.metered),)

    def usable_logins(self, *, consent: bool, forbid_metered: bool) -> list[Login]:
        """The logins a hop may use: found, and not metered unless the owner consented
        (``consent``) and metered spend is not forbidden."""
        return [a for a in self.logins if a.credentials
                and (not a.metered or (consent and not forbid_metered))]


def hop_for(entry: ChainEntry | None, provider: ProviderSettings, model: str,
            registry: Registry, *, name: str = "", metered: bool | None = None,
            logins: Sequence[Login] | None = None) -> Hop:
    """A hop to ``provider``/``model`` with its capabilities and context window, found where
    the provider's spec says: everything passed through, or the models registry; ``logins``
    are the accounts it may use (``None``: the default account)."""
    metered = provider.metered if metered is None else metered
    spec = provider.spec
    if spec is None or spec.capabilities == "passthrough":
        caps, window = HTTP_CAPABILITIES, None
    else:
        known = registry.resolve(model, provider.name)
        if known is None:
            caps, window = UNKNOWN_CLI_CAPABILITIES, None
        else:
            c = known.capabilities
            caps = Capabilities(tools=c.tools, images=c.images, json_mode=c.json_mode,
                                reasoning=tuple(c.reasoning),
                                reasoning_out=bool(spec.reasoning_out and c.reasoning))
            window = known.context_window
            model = known.model
    logins = logins if logins is not None else (Login(DEFAULT_ACCOUNT, True),)
    accounts = tuple(a.name for a in logins)
    shared = tuple(a.name for a in logins if a.serves_all)
    if entry is None:
        return Hop(provider.name, model, name, metered=metered, context_window=window,
                   capabilities=caps, accounts=accounts, shared=shared)
    return Hop(provider.name, model, entry.label,
               on=frozenset(entry.on) if entry.on is not None else None,
               metered=metered, unsupported=entry.unsupported, context_window=window,
               capabilities=caps, accounts=accounts, shared=shared)


def build_router(settings: Settings, registry: Registry,
                 providers: Mapping[str, Provider]) -> Router:
    """The router for ``olp start``. A chain left with no usable entry is logged (a warning)
    and kept as :attr:`Router.unusable_chains`, with the reason; it never raises."""
    running = [n for n, p in providers.items() if p.running]

    def usable(where: str, entries: Sequence[ChainEntry]) -> tuple[list[Hop], list[str]]:
        hops, reasons = [], []
        for i, entry in enumerate(entries):
            why = _pruned(entry, providers.get(entry.provider), settings)
            if why is None:
                provider = providers[entry.provider]
                logins = provider.usable_logins(
                    consent=entry.metered, forbid_metered=settings.forbid_metered_fallback)
                hops.append(hop_for(entry, provider.settings, entry.model, registry,
                                    metered=any(a.metered for a in logins), logins=logins))
            else:
                log.warning("chain entry pruned: %s", why,
                            extra={"entry": f"{where}[{i}] ({entry.label})"})
                reasons.append(f"{entry.label}: {why}")
        return list(dedupe(hops)), reasons

    routing = settings.config.routing
    chains, unusable, pruned = {}, {}, {}
    for name, entries in routing.chains.items():
        hops, reasons = usable(f"routing.chains.{name}", entries)
        pruned[name] = reasons
        if hops:
            chains[name] = hops
        else:
            unusable[name] = "; ".join(reasons) or "it has no entries"
            log.warning("chain has no usable entry: requests to it answer 503 until fixed "
                        "(see olp doctor)", extra={"chain": name, "reason": unusable[name]})
    defaults, _ = usable("routing.default_fallbacks", routing.default_fallbacks)

    def lookup(model: str) -> Hop | None:
        entry = registry.resolve(model)
        if entry is None or entry.provider not in providers:
            return None
        provider = providers[entry.provider]
        refused = registry_refusal(provider, settings)
        if refused is not None:
            raise UnknownModel(model, refused)
        # None found: every login, so the request fails on the missing login with its fix
        # (a chain's entry is pruned instead, as before accounts).
        logins = provider.usable_logins(consent=_consented(provider.settings.name, settings),
                                        forbid_metered=settings.forbid_metered_fallback) \
            or list(provider.logins)
        return hop_for(None, provider.settings, entry.model, registry,
                       metered=any(a.metered for a in logins), logins=logins)

    unserved = {name: f"{p.problem} (fix: {p.fix}; see `olp doctor`)"
                for name, p in providers.items() if not p.running}
    return Router(lookup, providers=running, chains=chains, default_fallbacks=defaults,
                  unusable=unusable, unserved=unserved, pruned=pruned)


def _pruned(entry: ChainEntry, provider: Provider | None, settings: Settings) -> str | None:
    """Why a chain entry cannot be used (what is missing), or ``None`` when it can (some
    account of its provider can: the others are left out of its hop)."""
    if provider is None:
        return f"unknown provider `{entry.provider}`"
    if not provider.running:
        return provider.problem or "provider not running"
    if provider.usable_logins(consent=entry.metered,
                              forbid_metered=settings.forbid_metered_fallback):
        return None
    found = [a for a in provider.logins if a.credentials]
    if not found:
        return "no credentials"
    if not entry.metered:
        return ('the provider is metered; the entry must say "metered": true to consent '
                "to spend")
    return "metered, and OLP_FORBID_METERED_FALLBACK=1"


def _consented(name: str, settings: Settings) -> bool:
    """Whether the owner consented to a metered provider serving models without a chain
    (``providers.<name>.metered: true``)."""
    block = settings.config.providers.blocks.get(name)
    return block is not None and block.metered is True


def registry_refusal(provider: Provider, settings: Settings) -> str | None:
    """Why a model without a chain may not go to ``provider`` (the cause and the fix for its
    404), or ``None`` when it may: a running metered provider needs
    ``providers.<name>.metered: true`` (the consent) and no ``OLP_FORBID_METERED_FALLBACK``.
    A provider that is not running is the router's to report. With several accounts, one
    that is found and not metered is enough."""
    found = [a for a in provider.logins if a.credentials] or list(provider.logins)
    if not provider.running or not all(a.metered for a in found):
        return None
    name = provider.settings.name
    why = f" ({provider.metered_by})" if provider.metered_by else ""
    if settings.forbid_metered_fallback:
        return f"`{name}` is metered{why} and OLP_FORBID_METERED_FALLBACK=1"
    block = settings.config.providers.blocks.get(name)
    if block is not None and block.metered is True:
        return None
    return (f"`{name}` is metered{why}, and a model without a chain needs the consent to "
            f'spend: set providers.{name}.metered to true, or configure a chain whose entry '
            f'says "metered": true (see `olp doctor`)')


def model_listing(registry: Registry, router: Router,
                  running: Collection[str]) -> list[dict[str, Any]]:
    """The ``GET /v1/models`` rows, each id once: every usable chain (``owned_by: "olp"``),
    then the registry's models and aliases of running providers (``owned_by`` the provider)
    that no chain shadows (a chain named like an alias wins, as it does for requests) and
    that the router serves (not a metered provider's without the consent)."""
    chains = router.chain_names
    rows = [_row(name, "olp") for name in chains if name not in router.unusable_chains]
    seen = set(chains)
    for m in registry.models():
        if m.owned_by in running and m.id not in seen and _served(router, m.id):
            seen.add(m.id)
            rows.append(_row(m.id, m.owned_by, m.created))
    return rows


def _served(router: Router, model: str) -> bool:
    try:
        router.resolve(model)
    except UnknownModel:
        return False
    return True


def _row(model: str, owned_by: str, created: int = 0) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": created, "owned_by": owned_by}
