"""``python -m olp``: the same as the ``olp`` command."""

from __future__ import annotations

from olp.commands import main

if __name__ == "__main__":
    raise SystemExit(main())
