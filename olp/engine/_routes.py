"""Which provider and model each hop of a requested model's route goes to."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Hop:
    """One entry of a route: ``name`` is the chain entry's name (``provider:model`` default)."""

    provider: str
    model: str
    name: str = ""

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


Lookup = Callable[[str], "tuple[str, str] | None"]


class Router:
    """Resolves a requested model: a configured chain first, else the registry's mapping.

    Routing is never taken from the request beyond the model name: no client-supplied
    provider, chain or base URL is honoured.
    """

    def __init__(self, lookup: Lookup, *, providers: Sequence[str],
                 chains: Mapping[str, Sequence[Hop]] | None = None) -> None:
        self._lookup = lookup
        self._providers = frozenset(providers)
        self._chains = {name: tuple(hops) for name, hops in (chains or {}).items()}

    def resolve(self, model: str) -> Route:
        """The route for ``model``; raises :class:`UnknownModel` (hops of providers that are
        not running are left out, and a route with none left is unknown too)."""
        hops = self._chains.get(model)
        if hops is None:
            found = self._lookup(model)
            hops = (Hop(*found),) if found else ()
        usable = tuple(h for h in hops if h.provider in self._providers)
        if not usable:
            raise UnknownModel(model)
        return Route(model, usable)
