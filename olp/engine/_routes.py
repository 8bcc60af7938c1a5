"""Which provider and model each hop of a requested model's route goes to."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from olp.ir import Category


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a hop's model can take (from ``models-registry.json``; HTTP hops pass through)."""

    tools: bool = True
    images: bool = True
    json_mode: bool = True
    sampling_params: bool = False  # temperature, top_p, … reach the model (HTTP hops only)


@dataclass(frozen=True, slots=True)
class Hop:
    """One entry of a route. ``name`` defaults to ``provider:model``; ``on`` is the gate on
    entering this hop after a failure (``None``: the default categories); ``unsupported`` is
    what to do when the request needs a capability the hop lacks."""

    provider: str
    model: str
    name: str = ""
    on: frozenset[Category] | None = None
    metered: bool = False
    unsupported: Literal["skip", "ignore"] = "skip"
    context_window: int | None = None
    capabilities: Capabilities = field(default_factory=Capabilities)

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", f"{self.provider}:{self.model}")


@dataclass(frozen=True, slots=True)
class Route:
    requested: str
    hops: tuple[Hop, ...]


class UnknownModel(Exception):
    """No chain and no registry entry for the requested model (a 404)."""

    def __init__(self, model: str) -> None:
        super().__init__(f"The model `{model}` does not exist or is not served here.")
        self.model = model


Lookup = Callable[[str], "Hop | None"]


class Router:
    """Resolves a requested model: a configured chain first, else the registry's mapping,
    then the default fallbacks appended (unless the route already ends with them).

    Routing is never taken from the request beyond the model name: no client-supplied
    provider, chain or base URL is honoured.
    """

    def __init__(self, lookup: Lookup, *, providers: Sequence[str],
                 chains: Mapping[str, Sequence[Hop]] | None = None,
                 default_fallbacks: Sequence[Hop] = ()) -> None:
        self._lookup = lookup
        self._providers = frozenset(providers)
        self._chains = {name: tuple(hops) for name, hops in (chains or {}).items()}
        self._defaults = tuple(h for h in default_fallbacks if h.provider in self._providers)

    @property
    def chain_names(self) -> tuple[str, ...]:
        return tuple(self._chains)

    def resolve(self, model: str) -> Route:
        """The route for ``model``; raises :class:`UnknownModel`. Hops of providers that are
        not running are left out, and so are repeats of a (provider, model)."""
        hops = self._chains.get(model)
        if hops is None:
            found = self._lookup(model)
            hops = (found,) if found else ()
        usable = [h for h in hops if h.provider in self._providers]
        if not usable:
            raise UnknownModel(model)
        if self._defaults and tuple(usable[-len(self._defaults):]) != self._defaults:
            usable += self._defaults
        return Route(model, dedupe(usable))


def dedupe(hops: Sequence[Hop]) -> tuple[Hop, ...]:
    """``hops`` without repeats of a (provider, model) pair, first kept."""
    seen: set[tuple[str, str]] = set()
    out = []
    for hop in hops:
        if (hop.provider, hop.model) not in seen:
            seen.add((hop.provider, hop.model))
            out.append(hop)
    return tuple(out)
