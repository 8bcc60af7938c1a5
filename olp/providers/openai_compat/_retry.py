"""Per-hop retry for HTTP providers: which failures are retried, and after how long
(``docs/adr/0008-openai-compatible-provider.md``).

Only failures *before any content* reach this module (after content, every failure is
terminal). Retried, each kind with its own budget:

* ``server``: a 500/502/503 (also an in-stream error naming one of them), once by default,
  after at least its ``Retry-After`` when it sent one (and not at all when that is over
  ``max_retry_after_s``);
* ``connection``: a connection refused, reset or closed before the response headers, once;
* ``rate_limit``: a 429 whose reset (``Retry-After`` and friends) is known and at most
  ``max_retry_after_s``, once.

Never retried: ``usage_window`` and ``billing`` (waiting cannot cure them within a request),
auth, client errors, context length, timeouts (they already spent their budget), anything
unknown, and a *silent route*: a failure with not a byte from the upstream after it had the
request for ``silent_after_s`` or longer (a connection closed or reset after a long silence,
like a first-byte timeout, says the route is dead, not busy: the chain moves on at once).
The caller also refuses a retry that could not finish before its deadlines.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from olp.failures import Code
from olp.ir import Error

RetryKind = Literal["server", "connection", "rate_limit"]

#: Deadlines that expired with nothing (or nothing useful) from the upstream: never retried.
TIMEOUT_CODES: frozenset[str] = frozenset({
    Code.CONNECT_TIMEOUT, Code.FIRST_BYTE_TIMEOUT, Code.FIRST_OUTPUT_TIMEOUT,
    Code.IDLE_TIMEOUT, Code.TOTAL_TIMEOUT, Code.UPSTREAM_TIMEOUT})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How one HTTP hop retries transient failures before giving up on the hop.

    The delay before retry *n* (1-based) is an "equal jitter" exponential backoff,
    ``b/2 + U(0, b/2)`` with ``b = min(backoff_max_s, backoff_base_s * 2**(n-1))``; for a
    429 it is the upstream's reset plus ``U(0, backoff_base_s)``. ``random`` returns a float
    in ``[0, 1)``; tests inject a constant. A failure that came after the upstream held the
    request ``silent_after_s`` or longer without sending a byte is never retried.
    """

    max_retries_500: int = 1
    max_retries_connection: int = 1
    max_retries_429: int = 1
    max_retry_after_s: float = 5.0
    backoff_base_s: float = 0.25
    backoff_max_s: float = 2.0
    silent_after_s: float = 1.0
    retry_statuses: frozenset[int] = frozenset({500, 502, 503})
    random: Callable[[], float] = field(default=random.random, repr=False, compare=False)

    def budget(self, kind: RetryKind) -> int:
        return {"server": self.max_retries_500, "connection": self.max_retries_connection,
                "rate_limit": self.max_retries_429}[kind]


NO_RETRIES = RetryPolicy(max_retries_500=0, max_retries_connection=0, max_retries_429=0)


def retry_kind(error: Error, policy: RetryPolicy, *, silent_s: float = 0.0
               ) -> RetryKind | None:
    """Which retry budget ``error`` may draw on, or ``None`` when it is never retried.

    ``silent_s``: how long the upstream had held the request without sending a byte when
    the failure came (0 when it answered something, or never had the request).
    """
    if error.code in TIMEOUT_CODES or silent_s >= policy.silent_after_s:
        return None  # a silent route stays silent: move to the next hop
    if error.code == Code.CONNECTION_FAILED:
        return "connection"
    if error.category == "unavailable" and error.status in policy.retry_statuses:
        too_long = error.retry_after_s is not None and \
            error.retry_after_s > policy.max_retry_after_s
        return None if too_long else "server"
    if (error.category == "rate_limited" and error.retry_after_s is not None
            and error.retry_after_s <= policy.max_retry_after_s):
        return "rate_limit"
    return None


def plan_retry(error: Error, policy: RetryPolicy, used: Mapping[RetryKind, int], *,
               silent_s: float = 0.0) -> tuple[RetryKind, float] | None:
    """``(kind, delay_s)`` when ``error`` is retried, given the retries ``used`` so far and
    how long the upstream stayed ``silent_s`` (see :func:`retry_kind`)."""
    kind = retry_kind(error, policy, silent_s=silent_s)
    if kind is None or used.get(kind, 0) >= policy.budget(kind):
        return None
    after = error.retry_after_s
    if kind == "rate_limit":
        assert after is not None
        return kind, after + policy.random() * policy.backoff_base_s
    n = sum(used.values()) + 1
    ceiling = min(policy.backoff_max_s, policy.backoff_base_s * 2 ** (n - 1))
    delay = ceiling / 2 + policy.random() * ceiling / 2
    return kind, delay if after is None else max(delay, after)
