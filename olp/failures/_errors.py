"""Building the terminal :class:`~olp.ir.Error` for a code."""

from __future__ import annotations

from olp.ir import Category, Error

from ._codes import DEFAULT_CATEGORY, Code


def failure(code: Code, message: str, *, category: Category | None = None,
            status: int | None = None, retry_after_s: float | None = None) -> Error:
    """An :class:`Error` with ``code``, in the code's default category unless one is given."""
    return Error(code=code, category=category or DEFAULT_CATEGORY[code], message=message,
                 status=status, retry_after_s=retry_after_s)
