"""Describing how a CLI ended, for error messages: its exit status and the end of its
stderr, on one line, with anything that looks like a secret cut short."""

from __future__ import annotations

import re
import signal
from collections.abc import Collection
from typing import Final

_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]+")
_SECRET: Final = re.compile(r"(Bearer\s+)\S+|((?:sk|key)-[A-Za-z0-9_-]{4})[A-Za-z0-9_-]+",
                            re.IGNORECASE)


def describe_exit(returncode: int) -> str:
    """``exited with code 1``, ``was killed by signal 9 (SIGKILL)``, ``exited with code 143
    (signal 15, SIGTERM)``; a code 129..192 is read as 128 + a signal number."""
    if returncode < 0:
        return f"was killed by signal {-returncode}{_signal_name(-returncode, ' ({})')}"
    if 128 < returncode <= 128 + 64:
        number = returncode - 128
        return f"exited with code {returncode} (signal {number}{_signal_name(number, ', {}')})"
    return f"exited with code {returncode}"


def _signal_name(number: int, template: str) -> str:
    try:
        return template.format(signal.Signals(number).name)
    except ValueError:
        return ""


def mask_secrets(text: str) -> str:
    """``text`` with bearer tokens and key-looking strings cut to a short prefix."""
    return _SECRET.sub(lambda m: f"{m[1] or m[2]}…", text)


def stderr_excerpt(stderr_tail: bytes, *, limit: int = 200,
                   drop: Collection[str] = ()) -> str:
    """The end of stderr on one line, secrets masked, at most ``limit`` characters; lines
    equal to one of ``drop`` (a CLI's constant notices) are left out."""
    lines = [ln for ln in stderr_tail.decode("utf-8", "replace").splitlines()
             if ln.strip() not in drop]
    text = mask_secrets(" ".join(_CONTROL.sub(" ", " ".join(lines)).split()))
    return text if len(text) <= limit else "…" + text[-(limit - 1):]
