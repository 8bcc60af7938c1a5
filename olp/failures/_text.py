"""Text helpers shared by the classifiers: shortening a message and matching phrases."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

#: The longest message a classified :class:`~olp.ir.Error` carries.
MESSAGE_LIMIT: Final = 300


def cut(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` on one line (runs of whitespace become one space), at most ``limit``
    characters; an ellipsis marks a cut."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def has_any(text: str, phrases: Iterable[str]) -> bool:
    """Whether ``text`` contains any of ``phrases`` (a plain, case-sensitive substring test:
    callers lower-case ``text`` and write their phrases in lower case)."""
    return any(p in text for p in phrases)
