"""What every command module shares to add its parser: the type of ``olp``'s sub-parsers, a
command's handler, and the argument types and defaults more than one command uses."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeAlias

from olp.config import Settings

#: ``olp``'s sub-parsers: each command module adds its commands here.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
#: A command: the settings and the parsed arguments in, the exit code out. A parser names
#: its handler with ``set_defaults(handler=...)``, and how its settings are read with
#: ``set_defaults(settings=...)`` when not from the environment and the config file.
Handler: TypeAlias = Callable[[Settings, argparse.Namespace], int]


def positive(text: str) -> int:
    """An argument type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def user_home() -> Path:
    """The user's home directory (``HOME``, else the password database's)."""
    return Path(os.environ.get("HOME") or Path.home())
