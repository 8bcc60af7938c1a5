"""OLP's failure taxonomy: every code, its default category, and the shared helpers that
turn what a provider reported into an :class:`~olp.ir.Error`.

Depends on :mod:`olp.ir` only; actors, cache, engine and HTTP layer import it.
"""

from ._codes import DEFAULT_CATEGORY as DEFAULT_CATEGORY
from ._codes import Code as Code
from ._errors import failure as failure
from ._reset import MONTH_PATTERN as MONTH_PATTERN
from ._reset import clock_reset as clock_reset
from ._reset import epoch_delta as epoch_delta
from ._reset import number as number
from ._reset import parse_duration as parse_duration
from ._reset import parse_reset as parse_reset
from ._reset import parse_retry_after as parse_retry_after
from ._reset import seconds_until as seconds_until
from ._reset import sum_durations as sum_durations
from ._reset import unit_seconds as unit_seconds
from ._reset import zone_named as zone_named
from ._rules import Rule as Rule
from ._rules import always as always
from ._rules import classify_by as classify_by
from ._rules import first_match as first_match
from ._text import MESSAGE_LIMIT as MESSAGE_LIMIT
from ._text import cut as cut
from ._text import has_any as has_any

__all__ = [
    "Code", "DEFAULT_CATEGORY", "MESSAGE_LIMIT", "MONTH_PATTERN", "Rule", "always",
    "classify_by", "clock_reset", "cut", "epoch_delta", "failure", "first_match", "has_any",
    "number", "parse_duration", "parse_reset", "parse_retry_after", "seconds_until",
    "sum_durations", "unit_seconds", "zone_named",
]
