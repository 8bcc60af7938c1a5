"""Captured CLI lines with a few figures written in, for what the captures cannot hit at will
(the mocks keep no prompt cache, so every cached-token figure they recorded is 0)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any


def edit_json_lines(lines: Iterable[bytes], edit: Callable[[dict[str, Any]], bool]
                    ) -> list[bytes]:
    """``lines`` with each JSON object handed to ``edit``, which changes it in place and says
    whether it did; every other line comes back byte for byte. Fails unless ``edit`` changed
    at least one line."""
    out: list[bytes] = []
    changed = 0
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if isinstance(obj, dict) and edit(obj):
            changed += 1
            out.append(json.dumps(obj).encode())
        else:
            out.append(line)
    assert changed, "no line matched the edit"
    return out
