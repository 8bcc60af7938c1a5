"""Which provider and model each hop of a requested model's route goes to."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from olp.ir import Category
from olp.store import DEFAULT_ACCOUNT, slot_name


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a hop's model can take (from ``models-registry.json``; HTTP hops pass through)."""

    tools: bool = True
    images: bool = True
    json_mode: bool = True
    sampling_params: bool = False  # temperature, top_p, … reach the model (HTTP hops only)
    #: The reasoning levels the model takes (the registry's ``reasoning``; HTTP hops pass
    #: the client's on): a request that asks for reasoning needs one (issue #27).
    reasoning: tuple[str, ...] = ()
    reasoning_out: bool = False  # the model's thinking comes back when asked for (#27)


@dataclass(frozen=True, slots=True)
class Hop:
    """One entry of a route. ``name`` defaults to ``provider:model``; ``on`` is the gate on
    entering this hop after a failure (``None``: the default categories); ``unsupported`` is
    what a capability the request needs and the hop lacks does (``degrade``: reasoning is
    served without, anything else skips the hop; ``skip``: any skips it; ``ignore``: none
    does; :mod:`._capabilities`). ``accounts``: the provider's logins this entry may use, in
    order (issue #30); a request's walk tries those its key may use
    (:func:`olp.engine._walk.for_key`), one :attr:`account` at a time."""

    provider: str
    model: str
    name: str = ""
    on: frozenset[Category] | None = None
    metered: bool = False
    unsupported: Literal["degrade", "skip", "ignore"] = "degrade"
    context_window: int | None = None
    capabilities: Capabilities = field(default_factory=Capabilities)
    accounts: tuple[str, ...] = (DEFAULT_ACCOUNT,)
    shared: tuple[str, ...] = (DEFAULT_ACCOUNT,)  # of ``accounts``, those serving every key
    account: str = DEFAULT_ACCOUNT

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", f"{self.provider}:{self.model}")

    @property
    def slot(self) -> str:
        """The actor that serves this hop: its provider's, or its account's (``claude@bob``);
        cooldowns, circuits, soft triggers and quota windows are kept per slot."""
        return slot_name(self.provider, self.account)


@dataclass(frozen=True, slots=True)
class Route:
    requested: str
    hops: tuple[Hop, ...]


class UnknownModel(Exception):
    """No route for the requested model (a 404). ``cause`` is set when the model is known
    (the registry maps it to a provider) but that provider cannot serve here: what is
    missing and the fix."""

    def __init__(self, model: str, cause: str | None = None) -> None:
        super().__init__(model, cause)
        self.model = model
        self.cause = cause

    @property
    def message(self) -> str:
        if self.cause is None:
            return f"The model `{self.model}` does not exist or is not served here."
        return f"The model `{self.model}` is not served here: {self.cause}"

    def __str__(self) -> str:
        return self.message


class UnusableChain(UnknownModel):
    """A configured chain with no usable entry left (a 503): ``cause`` names what is missing
    for each of its entries."""

    def __init__(self, model: str, cause: str) -> None:
        super().__init__(model, cause)

    @property
    def message(self) -> str:
        return (f"The chain `{self.model}` has no usable entry: {self.cause}. Run "
                "`olp doctor` for the fix.")


Lookup = Callable[[str], "Hop | None"]


#: How many model names' routes a router keeps (names come from clients: bounded).
RESOLVED: Final = 256


class Router:
    """Resolves a requested model: a configured chain first, else the registry's mapping,
    then the default fallbacks appended (unless the route already ends with them).

    Routing is never taken from the request beyond the model name: no client-supplied
    provider, chain or base URL is honoured.
    """

    def __init__(self, lookup: Lookup, *, providers: Sequence[str],
                 chains: Mapping[str, Sequence[Hop]] | None = None,
                 default_fallbacks: Sequence[Hop] = (),
                 unusable: Mapping[str, str] | None = None,
                 unserved: Mapping[str, str] | None = None,
                 pruned: Mapping[str, Sequence[str]] | None = None) -> None:
        """``unusable``: chains left with no usable entry, each with why (they answer 503);
        ``unserved``: providers that are not running, each with why and the fix (named in
        the 404 for a model of theirs); ``pruned``: per chain, the entries left out at
        start-up, each as ``label: why``."""
        self._lookup = lookup
        self._providers = frozenset(providers)
        self._chains = {name: tuple(hops) for name, hops in (chains or {}).items()}
        self._defaults = tuple(h for h in default_fallbacks if h.provider in self._providers)
        self._unusable = dict(unusable or {})
        self._unserved = dict(unserved or {})
        self._pruned = {name: tuple(why) for name, why in (pruned or {}).items()}
        # what resolve() found for the last model names asked for: a route, or the class and
        # cause of the refusal (raised anew each time, so no traceback piles up)
        self._resolved: dict[str, Route | tuple[type[UnknownModel], str | None]] = {}

    @property
    def chain_names(self) -> tuple[str, ...]:
        """Every configured chain, usable or not."""
        return (*self._chains, *(n for n in self._unusable if n not in self._chains))

    @property
    def unusable_chains(self) -> Mapping[str, str]:
        """Chains with no usable entry, each with the reason."""
        return self._unusable

    def chain_status(self) -> dict[str, dict[str, object]]:
        """Each configured chain: ``{"usable": true}``, or ``false`` with the ``reason``; its
        ``hops`` (``entry provider/model``, in order) and the entries ``pruned`` at start-up
        (``label: why``)."""
        return {name: {"usable": name not in self._unusable,
                       **({"reason": self._unusable[name]} if name in self._unusable else {}),
                       "hops": [f"{h.name} {h.provider}/{h.model}"
                                for h in self._chains.get(name, ())],
                       "pruned": list(self._pruned.get(name, ()))}
                for name in self.chain_names}

    @property
    def default_fallbacks(self) -> tuple[Hop, ...]:
        return self._defaults

    def resolve(self, model: str) -> Route:
        """The route for ``model``; raises :class:`UnusableChain` for a chain with no usable
        entry, else :class:`UnknownModel` (with the cause when the model's provider is known
        but not running). Hops of providers that are not running are left out, and so are
        repeats of a (provider, model). A router never changes (a reload builds a new one),
        so the answers for the last :data:`RESOLVED` model names are kept."""
        known = self._resolved.get(model)
        if known is None:
            try:
                known = self._resolve(model)
            except UnknownModel as exc:
                known = (type(exc), exc.cause)
            if len(self._resolved) >= RESOLVED:
                self._resolved.clear()
            self._resolved[model] = known
        if isinstance(known, Route):
            return known
        refusal, cause = known
        raise refusal(model, cause)

    def _resolve(self, model: str) -> Route:
        if model in self._unusable and model not in self._chains:
            raise UnusableChain(model, self._unusable[model])
        hops = self._chains.get(model)
        if hops is None:
            found = self._lookup(model)
            hops = (found,) if found else ()
        usable = [h for h in hops if h.provider in self._providers]
        if not usable:
            cause = next((self._unserved[h.provider] for h in hops
                          if h.provider in self._unserved), None)
            raise UnknownModel(model, cause)
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
