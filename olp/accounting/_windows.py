"""The calendar windows of key limits and of the usage ledger: UTC day, ISO week, month."""

from __future__ import annotations

import datetime as dt
import functools
import math
from typing import Final, Literal

Window = Literal["day", "week", "month"]
WINDOWS: Final[tuple[Window, ...]] = ("day", "week", "month")
_UTC = dt.UTC


def day_of(ts: float) -> str:
    """The UTC day of a wall-clock time, ``YYYY-MM-DD`` (the ledger's ``day`` column)."""
    return _day_text(int(ts // _DAY_S))


def window_start(window: Window, ts: float) -> dt.date:
    """The first UTC day of the ``window`` holding ``ts``."""
    return _window_start(window, int(ts // _DAY_S))


def window_id(window: Window, ts: float) -> str:
    """The ``window`` holding ``ts`` as its first day, ``YYYY-MM-DD`` (a key's counts are
    kept per window id)."""
    return _window_id(window, int(ts // _DAY_S))


#: A UTC day in Unix time, which has no leap seconds: day N starts at N * 86,400.
_DAY_S: Final = 86_400
_EPOCH: Final = dt.date(1970, 1, 1)


@functools.lru_cache(maxsize=16)
def _day_text(day_number: int) -> str:
    """Day ``day_number`` since the epoch as ``YYYY-MM-DD`` (the same day every request
    asks for: computed once a day)."""
    return (_EPOCH + dt.timedelta(days=day_number)).isoformat()


@functools.lru_cache(maxsize=16)
def _window_id(window: Window, day_number: int) -> str:
    """:func:`window_id` of a day (the same every request of the day asks for)."""
    return _window_start(window, day_number).isoformat()


@functools.lru_cache(maxsize=16)
def _window_start(window: Window, day_number: int) -> dt.date:
    day = _EPOCH + dt.timedelta(days=day_number)
    if window == "week":
        return day - dt.timedelta(days=day.weekday())
    if window == "month":
        return day.replace(day=1)
    return day


def window_end(window: Window, ts: float) -> float:
    """When the ``window`` holding ``ts`` ends (wall clock, seconds)."""
    start = window_start(window, ts)
    if window == "day":
        end = start + dt.timedelta(days=1)
    elif window == "week":
        end = start + dt.timedelta(days=7)
    else:
        end = (start + dt.timedelta(days=32)).replace(day=1)
    return dt.datetime(end.year, end.month, end.day, tzinfo=_UTC).timestamp()


def duration_text(seconds: float) -> str:
    """A reset delay as OpenAI writes it in ``x-ratelimit-reset-*``: ``20ms``, ``45s``,
    ``6m0s``, ``5h2m3s``."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    whole = int(-(-seconds // 1))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def parse_since(text: str) -> float:
    """A ``since`` bound: Unix seconds, or an ISO 8601 time (a date alone is its UTC
    midnight; a time without an offset is UTC). Raises ``ValueError``."""
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise ValueError(f"{text!r} is not a time")
        return value
    parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_UTC)
    return parsed.timestamp()
