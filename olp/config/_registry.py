"""The models registry (``models-registry.json``): models, aliases and capabilities per provider.

Loading reads the disk once at start-up; the resulting :class:`Registry` is immutable and its
lookups are pure dictionary reads, safe to call from the Trio loop.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Final, Literal

import msgspec

from olp.ir import Effort

from ._schema import ConfigError

REGISTRY_FILE: Final = "models-registry.json"
#: The repository's top-level file in a source checkout; an installed wheel carries the same
#: file as data under ``<prefix>/share/olp`` (pyproject's ``data-files``).
_CANDIDATES: Final = (Path(__file__).resolve().parents[2] / REGISTRY_FILE,
                      Path(sys.prefix) / "share" / "olp" / REGISTRY_FILE)
DEFAULT_REGISTRY_PATH: Final = next((p for p in _CANDIDATES if p.is_file()), _CANDIDATES[0])


class RegistryError(ConfigError):
    """``models-registry.json`` is missing or invalid."""


class _Strict(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Our own file: an unknown key is a typo."""


class Capabilities(_Strict, frozen=True, kw_only=True):
    """What a model can do through its provider (a hop lacking a needed one is skipped).

    ``reasoning``: the levels of OLP's effort scale (``none``, ``minimal``, ``low``,
    ``medium``, ``high``) the model honours through its CLI, exactly or by the CLI's nearest
    setting (issue #27; each CLI's mapping: ``docs/providers.md``, "Reasoning"); ``()``: none,
    the model's thinking cannot be set through its CLI."""

    tools: bool
    images: bool
    json_mode: bool
    streaming: Literal["token", "message"]
    reasoning: tuple[Effort, ...] = ()


class _Model(_Strict, frozen=True, kw_only=True):
    id: Annotated[str, msgspec.Meta(min_length=1)]
    display_name: str = msgspec.field(name="displayName")
    context_window: Annotated[int, msgspec.Meta(ge=1)] | None = msgspec.field(
        name="contextWindow")
    created: int
    capabilities: Capabilities


class _Provider(_Strict, frozen=True, kw_only=True):
    models: tuple[_Model, ...]
    aliases: dict[str, str] = msgspec.field(default_factory=dict)


class _File(_Strict, frozen=True, kw_only=True):
    version: int
    comment: str = ""
    providers: dict[str, _Provider]


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """A canonical model: ``context_window`` is ``None`` when unknown."""

    provider: str
    model: str
    display_name: str
    context_window: int | None
    created: int
    capabilities: Capabilities


@dataclass(frozen=True, slots=True)
class ModelListing:
    """One ``/v1/models`` row; aliases are listed as their own rows."""

    id: str
    owned_by: str
    created: int


class Registry:
    """Lookups by model id or alias, globally or within one provider."""

    def __init__(self, version: int, entries: Mapping[str, Mapping[str, ModelEntry]],
                 listing: tuple[ModelListing, ...]) -> None:
        self.version = version
        self._by_provider = entries
        self._by_name = {name: e for names in entries.values() for name, e in names.items()}
        self._listing = listing

    def resolve(self, name: str, provider: str | None = None) -> ModelEntry | None:
        """The model ``name`` (an id or alias) denotes, or ``None``; ``provider`` narrows it."""
        if provider is None:
            return self._by_name.get(name)
        return self._by_provider.get(provider, {}).get(name)

    def models(self) -> tuple[ModelListing, ...]:
        """Every id and alias, in file order, for ``GET /v1/models``."""
        return self._listing

    def providers(self) -> tuple[str, ...]:
        return tuple(self._by_provider)


def load_registry(path: Path | None = None) -> Registry:
    """Read and validate the registry (blocks on disk I/O); defaults to the repo-root file."""
    path = DEFAULT_REGISTRY_PATH if path is None else path
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read the models registry: {exc.strerror}") from None
    try:
        decoded = msgspec.json.decode(data, type=_File)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise RegistryError(f"{path}: {str(exc).replace('`', '')}") from None
    return _build(decoded, path)


def _build(decoded: _File, path: Path) -> Registry:
    entries: dict[str, dict[str, ModelEntry]] = {}
    listing: list[ModelListing] = []
    owner: dict[str, str] = {}  # every id and alias -> provider, to reject ambiguity

    def claim(name: str, provider: str) -> None:
        if name in owner:
            raise RegistryError(f"{path}: providers.{provider}: {name!r} is already defined "
                                f"by providers.{owner[name]}")
        owner[name] = provider

    for provider, block in decoded.providers.items():
        names: dict[str, ModelEntry] = {}
        ids = {m.id for m in block.models}
        for m in block.models:
            claim(m.id, provider)
            names[m.id] = ModelEntry(provider, m.id, m.display_name, m.context_window,
                                     m.created, m.capabilities)
            listing.append(ModelListing(m.id, provider, m.created))
        for alias, target in block.aliases.items():
            if target not in ids:
                raise RegistryError(f"{path}: providers.{provider}.aliases.{alias}: "
                                    f"{target!r} is not a model of {provider}")
            claim(alias, provider)
            names[alias] = names[target]
            listing.append(ModelListing(alias, provider, names[target].created))
        entries[provider] = names
    return Registry(decoded.version, entries, tuple(listing))
