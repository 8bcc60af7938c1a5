"""Building the routes from the config and the models registry, validated at start-up.

Each chain entry is checked: an unknown provider, a provider that is not running (disabled,
binary not found), one without credentials, or a metered provider without the entry's
``metered: true`` consent (or with ``OLP_FORBID_METERED_FALLBACK=1``) is pruned with a
warning; repeats of a (provider, model) are dropped; a chain with nothing usable left is a
start-up error naming it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from olp.config import ChainEntry, ConfigError, ProviderSettings, Registry, Settings
from olp.engine import Capabilities, Hop, Router
from olp.engine._routes import dedupe

log = logging.getLogger("olp.routing")

#: What a hop whose spec passes capabilities through (openai-compatible) takes: everything.
HTTP_CAPABILITIES = Capabilities(tools=True, images=True, json_mode=True, sampling_params=True)
#: A CLI model missing from the registry: text only.
UNKNOWN_CLI_CAPABILITIES = Capabilities(tools=False, images=False, json_mode=True)


@dataclass(frozen=True, slots=True)
class Provider:
    """A provider as routing sees it: its settings and whether it can answer now."""

    settings: ProviderSettings
    running: bool
    credentials: bool


def hop_for(entry: ChainEntry | None, provider: ProviderSettings, model: str,
            registry: Registry, *, name: str = "") -> Hop:
    """A hop to ``provider``/``model`` with its capabilities and context window, found where
    the provider's spec says: everything passed through, or the models registry."""
    spec = provider.spec
    if spec is None or spec.capabilities == "passthrough":
        caps, window = HTTP_CAPABILITIES, None
    else:
        known = registry.resolve(model, provider.name)
        if known is None:
            caps, window = UNKNOWN_CLI_CAPABILITIES, None
        else:
            c = known.capabilities
            caps = Capabilities(tools=c.tools, images=c.images, json_mode=c.json_mode)
            window = known.context_window
            model = known.model
    if entry is None:
        return Hop(provider.name, model, name, metered=provider.metered, context_window=window,
                   capabilities=caps)
    return Hop(provider.name, model, entry.label,
               on=frozenset(entry.on) if entry.on is not None else None,
               metered=provider.metered, unsupported=entry.unsupported, context_window=window,
               capabilities=caps)


def build_router(settings: Settings, registry: Registry,
                 providers: Mapping[str, Provider]) -> Router:
    """The router for ``olp start``; raises :class:`ConfigError` for an unusable chain."""
    running = [n for n, p in providers.items() if p.running]

    def usable(where: str, entries: Sequence[ChainEntry]) -> list[Hop]:
        hops = []
        for i, entry in enumerate(entries):
            at = f"{where}[{i}] ({entry.label})"
            provider = providers.get(entry.provider)
            if provider is None:
                log.warning("chain entry pruned: unknown provider", extra={"entry": at})
            elif not provider.running:
                log.warning("chain entry pruned: provider not running (disabled or binary "
                            "not found)", extra={"entry": at})
            elif not provider.credentials:
                log.warning("chain entry pruned: provider has no credentials",
                            extra={"entry": at})
            elif provider.settings.metered and not entry.metered:
                log.warning("chain entry pruned: the provider is metered; the entry must say "
                            '"metered": true to consent to spend', extra={"entry": at})
            elif provider.settings.metered and settings.forbid_metered_fallback:
                log.warning("chain entry pruned: OLP_FORBID_METERED_FALLBACK=1",
                            extra={"entry": at})
            else:
                hops.append(hop_for(entry, provider.settings, entry.model, registry))
        return list(dedupe(hops))

    routing = settings.config.routing
    chains = {}
    for name, entries in routing.chains.items():
        hops = usable(f"routing.chains.{name}", entries)
        if not hops:
            raise ConfigError(f"routing.chains.{name}: no usable entry left (see the warnings "
                              "above: unknown, disabled, missing binary or credentials, or "
                              "metered without consent)")
        chains[name] = hops
    defaults = usable("routing.default_fallbacks", routing.default_fallbacks)

    def lookup(model: str) -> Hop | None:
        entry = registry.resolve(model)
        if entry is None or entry.provider not in providers:
            return None
        return hop_for(None, providers[entry.provider].settings, entry.model, registry)

    return Router(lookup, providers=running, chains=chains, default_fallbacks=defaults)
