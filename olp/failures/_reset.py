"""When may a limited provider be tried again: the reset-time parsing the classifiers share.

The arithmetic lives here (units, durations, epochs, HTTP dates, the next occurrence of a clock
time in a zone); each classifier keeps the regular expressions for its own vendor's phrasing
and hands the pieces over. :func:`parse_reset` is the prose parser used by claude and vibe
(``tests/fixtures/cli-reference/claude/README.md``). Every delay returned is finite and
non-negative: a reset in the past gives 0.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Final
from zoneinfo import ZoneInfo

MONTHS: Final = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                 "dec")
#: An alternation of the three-letter month names, for a ``(?P<mon>...)`` group.
MONTH_PATTERN: Final = "|".join(MONTHS)

_UNIT_S: Final = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_AMOUNT: Final = re.compile(
    r"(\d+(?:\.\d+)?)\s*(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s|ms)\b",
    re.IGNORECASE,
)
_DURATION_PART: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|hours?|h|minutes?|m|seconds?|s)",
                                   re.IGNORECASE)


# --- numbers, epochs and HTTP headers --------------------------------------------------------


def finite(value: float) -> float | None:
    """``value`` clamped at 0, or ``None`` when it is infinite or NaN."""
    return max(0.0, value) if math.isfinite(value) else None


def number(value: Any) -> float | None:
    """A JSON number or a numeric string as a :func:`finite` delay; ``None`` for anything
    else (booleans included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return finite(float(value))
    if isinstance(value, str):
        try:
            return finite(float(value.strip()))
        except ValueError:
            return None
    return None


def seconds_until(epoch: float, now: float) -> float:
    """Seconds from ``now`` until the epoch time ``epoch`` (0 when it has passed)."""
    return max(0.0, epoch - now)


def epoch_delta(value: float, now: float) -> float | None:
    """An epoch in milliseconds or seconds becomes a delay; a small number is one already."""
    if value > 1e11:
        return finite(value / 1000 - now)
    if value > 1e9:
        return finite(value - now)
    return finite(value)


def parse_retry_after(raw: str | None, now: float) -> float | None:
    """An HTTP ``Retry-After`` value: delay seconds or an HTTP date (relative to ``now``)."""
    if raw is None:
        return None
    seconds = number(raw)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    return finite(when.timestamp() - now)


# --- durations -------------------------------------------------------------------------------


def unit_seconds(unit: str) -> float:
    """Seconds in one ``unit``: ``ms``, or a word starting with d, h, m or s (``hrs``,
    ``minutes``, ``secs``, ...)."""
    unit = unit.lower()
    return 0.001 if unit == "ms" else _UNIT_S[unit[0]]


def sum_durations(text: str) -> float | None:
    """The sum of every amount with a unit in ``text`` (``"2 hours 5 minutes"``, ``"1d 3h"``,
    ``"250ms"``), words in between ignored; ``None`` when there is none."""
    amounts = _AMOUNT.findall(text)
    if not amounts:
        return None
    return sum(float(amount) * unit_seconds(unit) for amount, unit in amounts)


def parse_duration(text: str) -> float | None:
    """An OpenAI duration (``"20ms"``, ``"1.5s"``, ``"6m0s"``, ``"1h2m3s"``) or plain seconds.

    Strict: anything but adjacent amounts with units (a space inside, a stray word) gives
    ``None``.
    """
    text = text.strip()
    plain = number(text)
    if plain is not None:
        return plain
    total, pos = 0.0, 0
    for m in _DURATION_PART.finditer(text):
        if text[pos:m.start()].strip():
            return None
        total += float(m.group(1)) * unit_seconds(m.group(2))
        pos = m.end()
    return finite(total) if pos and not text[pos:].strip() else None


# --- clock times -----------------------------------------------------------------------------


def zone_named(name: str | None) -> tzinfo | None:
    """The zone an IANA name (or UTC/GMT/Z) names; UTC when unknown; ``None`` without a name."""
    if name is None:
        return None
    if name.upper() in ("UTC", "GMT", "Z"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return UTC


def clock_reset(m: re.Match[str], now: float, tz: tzinfo | None = None) -> float | None:
    """Seconds from ``now`` until the clock time a regular-expression match names.

    The match's named groups: ``hour`` (required), ``min``, ``ampm``, and optionally ``mon``
    + ``day`` (a date), ``year`` and ``tz`` (a zone name, see :func:`zone_named`). The time is
    taken in the named zone, else ``tz``, else the machine's local zone. Without a date it is
    the next such time after ``now``; a date without a year is the next such date. A bare
    hour (no minutes, no am/pm) and impossible times or dates give ``None``.
    """
    groups = m.groupdict()
    hour, minute, ampm = int(groups["hour"]), int(groups.get("min") or 0), \
        (groups.get("ampm") or "").lower()
    if not ampm and groups.get("min") is None:
        return None
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    zone = zone_named(groups.get("tz")) or tz
    here = datetime.fromtimestamp(now, zone) if zone else datetime.fromtimestamp(now).astimezone()
    year = groups.get("year")
    try:
        if groups.get("mon"):
            target = here.replace(year=int(year) if year else here.year,
                                  month=MONTHS.index(groups["mon"].lower()[:3]) + 1,
                                  day=int(groups["day"]), hour=hour, minute=minute, second=0,
                                  microsecond=0)
            if not year and target < here:
                target = target.replace(year=target.year + 1)
        else:
            target = here.replace(hour=hour, minute=minute, second=0, microsecond=0)
            if target <= here:
                target += timedelta(days=1)
    except ValueError:  # e.g. "Feb 30"
        return None
    return seconds_until(target.timestamp(), now)


# --- a usage window's reset, from prose ------------------------------------------------------

_EPOCH: Final = re.compile(r"\|\s*(\d{10})(?!\d)")
_IN_DURATION: Final = re.compile(
    r"\b(?:in|after)\s+(\d+)\s*(hours?|hrs?|h|minutes?|mins?|m)\b"
    r"(?:\s*(?:and\s+)?(\d+)\s*(minutes?|mins?|m)\b)?",
    re.IGNORECASE,
)
_RESET_AT: Final = re.compile(
    r"\bresets?\s+(?:at\s+|on\s+)?"
    rf"(?:(?P<mon>{MONTH_PATTERN})[a-z]*\.?\s+(?P<day>\d{{1,2}}),?"
    r"\s+(?:at\s+)?)?"
    r"(?P<hour>\d{1,2})(?::(?P<min>\d{2}))?\s*(?P<ampm>am|pm)?"
    r"(?:\s*\((?P<tz>[A-Za-z_]+(?:/[A-Za-z0-9_+-]+)*)\))?",
    re.IGNORECASE,
)


def parse_reset(text: str, *, now: float | None = None, tz: tzinfo | None = None,
                ) -> float | None:
    """Seconds until a usage window resets, parsed from a vendor's prose; ``None`` if not found.

    Understood, in this order: an epoch after a bar (``"...limit reached|1767225600"``);
    ``"in N hours"`` / ``"in N minutes"`` / ``"in 2 hours 30 minutes"``; a clock time after
    "reset(s)" (``"resets at 3pm"``, ``"resets 3:30 pm (Europe/Paris)"``, ``"resets Oct 9,
    10am"``), taken in the named IANA zone (UTC when unknown or unavailable) or, with no zone,
    ``tz`` (default the machine's local zone), as the next such time after ``now`` (default
    the current time). A bare hour without am/pm or minutes is ignored.
    """
    current = time.time() if now is None else now
    if m := _EPOCH.search(text):
        return seconds_until(float(m.group(1)), current)
    if m := _IN_DURATION.search(text):
        seconds = float(m.group(1)) * unit_seconds(m.group(2))
        if m.group(3):
            seconds += float(m.group(3)) * unit_seconds(m.group(4))
        return seconds
    if m := _RESET_AT.search(text):
        return clock_reset(m, current, tz)
    return None
