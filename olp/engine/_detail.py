"""What happened at each hop: the records behind ``X-OLP-Fallback-Detail`` and the logs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from olp.store import DEFAULT_ACCOUNT

TriggerType = Literal["hard", "soft", "client_error", "auth_missing", "non_trigger"]
DETAIL_CAP_BYTES = 4096
MESSAGE_CHARS = 200


@dataclass(frozen=True, slots=True)
class HopRecord:
    """One hop that failed (``hard``; or stopped the chain: ``client_error``,
    ``auth_missing``, ``non_trigger``) or was skipped before spawning (``soft``); ``lacks``,
    for a ``CAPABILITY`` skip, what the hop lacks that refused it (``tools``, ``images``,
    ``response_format``, ``reasoning``)."""

    hop: int
    provider: str
    model: str
    code: str
    category: str
    error_message: str
    trigger_type: TriggerType
    retry_after_s: float | None = None
    seconds: float | None = None  # how long an attempted hop ran (None: skipped)
    account: str = DEFAULT_ACCOUNT  # which login of the provider (issue #30)
    lacks: tuple[str, ...] = ()

    def as_tuple(self) -> dict[str, object]:
        message = self.error_message
        if len(message) > MESSAGE_CHARS:
            message = message[:MESSAGE_CHARS - 1] + "\u2026"
        item: dict[str, object] = {
            "hop": self.hop, "provider": self.provider, "account": self.account,
            "model": self.model, "code": self.code, "category": self.category,
            "error_message": message, "trigger_type": self.trigger_type}
        if self.lacks:
            item["lacks"] = list(self.lacks)
        return item


def detail_header(records: list[HopRecord], cap: int = DETAIL_CAP_BYTES) -> str:
    """The ``X-OLP-Fallback-Detail`` value: a JSON array, pure ASCII (``\\uXXXX`` escapes),
    at most ``cap`` bytes — tail tuples dropped for a ``{"truncated": true, "omitted_hops": N}``
    sentinel when it would not fit."""
    tuples = [r.as_tuple() for r in records]
    value = _dump(tuples)
    if len(value) <= cap:
        return value
    for keep in range(len(tuples) - 1, -1, -1):
        value = _dump([*tuples[:keep], {"truncated": True, "omitted_hops": len(tuples) - keep}])
        if len(value) <= cap:
            return value
    return value  # the sentinel alone always fits


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))
