"""Rule tables: a provider's failure classification as data, first match wins.

A classifier gathers what its provider reported into a *facts* object (a small frozen
dataclass of its own: lower-cased text, status, the vendor's error type, ``now``, ...), then
looks the facts up in a module-level tuple of :class:`Rule`. The first rule whose ``when``
holds gives the code and category; its optional ``retry_after`` and ``status`` read the reset
and the HTTP status to report from the same facts. ``default`` answers when none holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from olp.ir import Category, Error

from ._codes import Code
from ._errors import failure
from ._text import cut

F = TypeVar("F")


@dataclass(frozen=True, slots=True)
class Rule(Generic[F]):
    """``when(facts)`` → a failure ``code`` in ``category``.

    ``retry_after(facts)`` (when given) is the delay to put on the error; ``status(facts)``
    (when given) overrides the HTTP status the caller reports.
    """

    code: Code
    category: Category
    when: Callable[[F], bool]
    retry_after: Callable[[F], float | None] | None = None
    status: Callable[[F], int | None] | None = None


def always(facts: object) -> bool:
    """A ``when`` that always holds (for a table's default rule)."""
    return True


def first_match(rules: Iterable[Rule[F]], facts: F, *, default: Rule[F]) -> Rule[F]:
    """The first rule of ``rules`` whose ``when`` holds for ``facts``, else ``default``."""
    return next((rule for rule in rules if rule.when(facts)), default)


def classify_by(rules: Iterable[Rule[F]], facts: F, *, default: Rule[F], message: str,
                fallback: Callable[[Code], str], status: int | None = None) -> Error:
    """The :class:`~olp.ir.Error` the first matching rule (else ``default``) gives ``facts``.

    Its message is ``message`` :func:`cut` to one bounded line or, when that is empty,
    ``fallback(code)``; its status is the rule's ``status(facts)`` when the rule has one,
    else ``status``.
    """
    rule = first_match(rules, facts, default=default)
    return failure(rule.code, cut(message) or fallback(rule.code), category=rule.category,
                   status=status if rule.status is None else rule.status(facts),
                   retry_after_s=None if rule.retry_after is None else rule.retry_after(facts))
