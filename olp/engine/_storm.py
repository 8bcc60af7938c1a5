"""A CLI's own retry storm: when it is cut short, and what the client hears instead.

A CLI that says it is retrying on its own (claude's ``system/api_retry``, a
:class:`~olp.ir.Retrying` with ``bounded=False``) for a category in :data:`STORM_CATEGORIES`
is abandoned at once when a later hop would take that category (``RETRY_ABANDONED``). With no
such hop, it is left to retry for the provider's budget (``providers.<name>.cli_retry_budget_s``,
counted from its first retry line) and then stopped; the client gets the storm's own
category and status (a 429 with ``Retry-After`` when a reset is known), never the
first-output timeout that would hide the cause. See docs/adr/0005-fallback-engine.md.

Pure bookkeeping: nothing here blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from olp.failures import Code, failure
from olp.ir import Category, Error, Retrying

from ._routes import Hop

#: A CLI retrying for one of these is a storm: cut short (at once when another hop could
#: answer, else after its budget).
STORM_CATEGORIES: Final[frozenset[Category]] = frozenset(
    {"usage_window", "rate_limited", "unavailable"})
#: How long a CLI may retry on its own when no other hop could take over (per provider:
#: ``providers.<name>.cli_retry_budget_s``).
DEFAULT_CLI_RETRY_BUDGET_S: Final = 20.0
#: The proxy's own deadlines: a hop that ends on one of them mid-storm ends for the storm.
DEADLINE_CODES: Final = frozenset({Code.FIRST_OUTPUT_TIMEOUT, Code.IDLE_TIMEOUT,
                                   Code.TOTAL_TIMEOUT})
_CODES: Final[Mapping[Category, Code]] = {"rate_limited": Code.RATE_LIMITED,
                                          "usage_window": Code.USAGE_WINDOW}


def is_storm(event: Retrying) -> bool:
    """A CLI's own (unbounded) retry for a cause another hop, or waiting, could avoid."""
    return not event.bounded and event.category in STORM_CATEGORIES


@dataclass(frozen=True, slots=True)
class Storm:
    """A storm in progress on one hop: when its first retry line came, and its latest."""

    started_at: float
    last: Retrying

    def then(self, event: Retrying) -> Storm:
        """The same storm after a further retry line (the latest decides its category)."""
        return Storm(self.started_at, event)

    def error(self, hop: Hop, *, now: float, resting_s: float | None,
              deadline: bool) -> Error:
        """The client's error when the storm is stopped: its category, the upstream status
        the CLI reported, and a reset from the CLI's retry line, else from the provider's
        cooldown. ``deadline``: a hop deadline stopped it, not the retry budget."""
        last = self.last
        status = f", HTTP {last.status}" if last.status else ""
        why = "the hop's deadline" if deadline else "its retry budget"
        reset = last.delay_s if last.delay_s is not None else resting_s
        return failure(_code(last), f"{hop.provider} kept retrying on its own ({last.category}"
                                   f"{status}, {last.attempt} attempt(s) in "
                                   f"{now - self.started_at:.0f} s); stopped at {why}",
                       category=last.category, status=last.status, retry_after_s=reset)


def abandoned(hop: Hop, event: Retrying) -> Error:
    """The hop's error when its storm is abandoned for the next hop."""
    status = f" (HTTP {event.status})" if event.status else ""
    return failure(Code.RETRY_ABANDONED, f"{hop.provider} was retrying on its own{status}; "
                                         "abandoned for the next hop",
                   category=event.category, status=event.status)


def _code(event: Retrying) -> Code:
    if event.category in _CODES:
        return _CODES[event.category]
    if event.status == 529:
        return Code.OVERLOADED
    if event.status is not None and event.status >= 500:
        return Code.UPSTREAM_5XX
    return Code.UPSTREAM_UNAVAILABLE
