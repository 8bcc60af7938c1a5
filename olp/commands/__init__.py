"""The ``olp`` command line: :func:`main` parses the arguments and runs one command."""

from __future__ import annotations

from .main import main as main
