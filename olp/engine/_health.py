"""Cooldowns and circuit breakers: which hops to skip before spawning anything.

- A ``usage_window`` failure rests the provider (or the provider + model when the error
  is model-scoped) until its reset, or ``usage_window_default_s`` when none is given, capped
  at ``usage_window_max_s``. ``billing`` rests it for ``billing_s``.
- ``failures`` ``unavailable`` failures within ``window_s`` open the provider's circuit
  (``Code.CONCURRENCY_LIMIT`` never counts: a busy provider is healthy). After ``probe_after_s``
  one request is let through as a probe: success closes the circuit, failure re-opens it with
  the wait doubled, up to ``probe_max_s``.

The book is plain synchronous state on an injectable clock (wall-clock seconds in
production, trio's virtual clock in tests); :meth:`HealthBook.snapshot` and
:meth:`HealthBook.restore` carry it across restarts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from olp.failures import Code
from olp.ir import Error
from olp.store import split_slot

#: Refusals that say nothing of the upstream's health: no circuit counts them.
_NOT_HEALTH = frozenset({Code.CONCURRENCY_LIMIT, Code.LOCKDOWN_FAILED})


@dataclass(frozen=True, slots=True)
class HealthPolicy:
    usage_window_default_s: float = 900.0
    usage_window_max_s: float = 6 * 3600.0
    billing_s: float = 3600.0
    failures: int = 3
    window_s: float = 60.0
    probe_after_s: float = 15.0
    probe_max_s: float = 300.0


@dataclass(frozen=True, slots=True)
class Skip:
    """Why a hop is skipped, and for how much longer (``None``: unknown); ``lacks``, for a
    ``CAPABILITY`` skip, the capabilities the hop lacks that refused it."""

    code: Code
    message: str
    retry_after_s: float | None
    lacks: tuple[str, ...] = ()


@dataclass(slots=True)
class _Circuit:
    failures: deque[float] = field(default_factory=deque)
    open_until: float | None = None
    wait_s: float = 0.0
    probing: bool = False


class HealthBook:
    def __init__(self, policy: HealthPolicy | None = None, *,
                 clock: Callable[[], float]) -> None:
        self.policy = policy or HealthPolicy()
        self._clock = clock
        # (provider, model or "") -> (until, category, reason)
        self._cooldowns: dict[tuple[str, str], tuple[float, str, str]] = {}
        self._circuits: dict[str, _Circuit] = {}
        self.version = 0  # bumped on every change, so callers know when to persist

    def check(self, provider: str, model: str) -> Skip | None:
        """A reason to skip this hop now, or ``None`` (which may admit a half-open probe)."""
        now = self._clock()
        for key in ((provider, ""), (provider, model)):
            entry = self._cooldowns.get(key)
            if entry is None:
                continue
            until, category, reason = entry
            if now < until:
                return Skip(Code.COOLDOWN, f"{_named(provider)} is resting after {category}: "
                            f"{reason}", until - now)
            del self._cooldowns[key]
            self.version += 1
        circuit = self._circuits.get(provider)
        if circuit is None or circuit.open_until is None:
            return None
        if now < circuit.open_until or circuit.probing:
            remaining = max(0.0, circuit.open_until - now)
            return Skip(Code.CIRCUIT_OPEN, f"{_named(provider)} failed repeatedly; next probe in "
                        f"{remaining:.0f} s", remaining or None)
        circuit.probing = True  # this request is the probe
        return None

    def resting(self, provider: str, model: str) -> float | None:
        """Seconds until the longest running cooldown of this hop ends, or ``None``; unlike
        :meth:`check`, this changes nothing (no expiry, no probe)."""
        now = self._clock()
        ends = [entry[0] for key in ((provider, ""), (provider, model))
                if (entry := self._cooldowns.get(key)) is not None and entry[0] > now]
        return max(ends) - now if ends else None

    def record_failure(self, provider: str, model: str, error: Error, *,
                       model_scoped: bool = False) -> None:
        now, p = self._clock(), self.policy
        if error.category == "usage_window":
            rest = error.retry_after_s if error.retry_after_s is not None \
                else p.usage_window_default_s
            key = (provider, model if model_scoped else "")
            self._cooldowns[key] = (now + min(rest, p.usage_window_max_s), "usage_window",
                                    error.message[:120])
            self.version += 1
        elif error.category == "billing":
            self._cooldowns[(provider, "")] = (now + p.billing_s, "billing", error.message[:120])
            self.version += 1
        elif error.category == "unavailable" and error.code not in _NOT_HEALTH:
            circuit = self._circuits.setdefault(provider, _Circuit())
            if circuit.probing:
                circuit.probing = False
                circuit.wait_s = min(circuit.wait_s * 2, p.probe_max_s)
                circuit.open_until = now + circuit.wait_s
            else:
                circuit.failures.append(now)
                while circuit.failures and circuit.failures[0] <= now - p.window_s:
                    circuit.failures.popleft()
                if circuit.open_until is None and len(circuit.failures) >= p.failures:
                    circuit.wait_s = p.probe_after_s
                    circuit.open_until = now + circuit.wait_s
            self.version += 1

    def record_success(self, provider: str) -> None:
        circuit = self._circuits.get(provider)
        if circuit is not None and (circuit.open_until is not None or circuit.failures):
            del self._circuits[provider]
            self.version += 1

    def abandon_probe(self, provider: str) -> None:
        """The probe ended without a verdict (client gone): let the next request probe."""
        circuit = self._circuits.get(provider)
        if circuit is not None:
            circuit.probing = False

    def reset(self) -> int:
        """Forget every cooldown and circuit (the owner's reset); how many were cleared."""
        cleared = len(self._cooldowns) + sum(
            1 for c in self._circuits.values() if c.open_until is not None)
        self._cooldowns.clear()
        self._circuits.clear()
        self.version += 1
        return cleared

    def snapshot(self) -> dict[str, Any]:
        """The state as plain data: for ``/health`` and for persisting."""
        now = self._clock()
        return {
            "cooldowns": [
                {"provider": prov, "model": model or None, "category": cat, "reason": why,
                 "until": until, "remaining_s": round(max(0.0, until - now), 1)}
                for (prov, model), (until, cat, why) in self._cooldowns.items() if until > now],
            "circuits": [
                {"provider": prov, "open_until": c.open_until, "wait_s": c.wait_s,
                 "recent_failures": len(c.failures)}
                for prov, c in self._circuits.items() if c.open_until is not None],
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Load a :meth:`snapshot` (times are absolute on this book's clock)."""
        for c in snapshot.get("cooldowns", []):
            self._cooldowns[(c["provider"], c["model"] or "")] = (
                float(c["until"]), c["category"], c["reason"])
        for c in snapshot.get("circuits", []):
            self._circuits[c["provider"]] = _Circuit(open_until=float(c["open_until"]),
                                                     wait_s=float(c["wait_s"]))
        self.version += 1


def _named(slot: str) -> str:
    """A slot as a message names it: its provider only (the record carries the account, shown
    to whom the header policy allows; a message reaches any client)."""
    return split_slot(slot)[0]

