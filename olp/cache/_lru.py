"""A least-recently-used map bounded by a byte budget (the cache's decoded entries in memory)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ByteBoundedLRU(Generic[K, V]):
    """At most ``max_bytes`` worth of values (their sizes as given to :meth:`put`); adding one
    evicts the least recently used until it fits, and a value larger than the whole budget is
    not kept. :meth:`get` makes a value the most recently used. Not thread-safe: use it from
    one thread (here, the Trio thread)."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: OrderedDict[K, tuple[int, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[1]

    def put(self, key: K, value: V, size: int) -> None:
        self.pop(key)
        if size > self.max_bytes:
            return
        while self._items and self.bytes + size > self.max_bytes:
            _, (old, _) = self._items.popitem(last=False)
            self.bytes -= old
        self._items[key] = (size, value)
        self.bytes += size

    def pop(self, key: K) -> V | None:
        item = self._items.pop(key, None)
        if item is None:
            return None
        self.bytes -= item[0]
        return item[1]

    def pop_where(self, predicate: Callable[[K], bool]) -> int:
        """Drop every key ``predicate`` accepts; returns how many."""
        doomed = [k for k in self._items if predicate(k)]
        for key in doomed:
            self.pop(key)
        return len(doomed)
