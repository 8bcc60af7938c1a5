"""OLP's failure taxonomy: every code, its default category, and the shared helpers that
turn what a provider reported into an :class:`~olp.ir.Error`.

Depends on :mod:`olp.ir` only; actors, cache, engine and HTTP layer import it.
"""

from ._codes import DEFAULT_CATEGORY as DEFAULT_CATEGORY
from ._codes import Code as Code
from ._errors import failure as failure

__all__ = ["Code", "DEFAULT_CATEGORY", "failure"]
