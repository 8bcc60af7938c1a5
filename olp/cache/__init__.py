"""The response cache (docs/adr/0006-cache.md): content-addressed keys, a persistent SQLite store,
singleflight for identical concurrent requests, and replay of stored answers.

The engine consults it per hop, after the skip decisions::

    key = cache_key(request, provider=hop.provider, model=hop.model)
    events = await store.get(namespace, key)            # namespace: the API key's id
    if events is not None:
        source = ReplaySource(events)                   # X-OLP-Cache: HIT
    else:
        source, attached = await singleflight.open(
            f"{namespace}:{key}", partial(actor.submit, request, hop.model),
            on_complete=partial(store.put, namespace, key, hop.provider))
"""

from ._key import KEY_VERSION as KEY_VERSION
from ._key import cache_key as cache_key
from ._replay import ReplaySource as ReplaySource
from ._singleflight import OnComplete as OnComplete
from ._singleflight import Singleflight as Singleflight
from ._singleflight import SingleflightStatistics as SingleflightStatistics
from ._store import CacheService as CacheService
from ._store import CacheStats as CacheStats
from ._store import CacheStore as CacheStore
from ._store import ProviderCacheStats as ProviderCacheStats
