"""The ``olp`` command line: :func:`main` parses the arguments and runs one command.

Each command module adds its commands' parsers (``add_*``) and handlers; this module puts
them in the order ``olp --help`` lists them, reads the settings and turns the errors every
command shares into exit codes: 0 ok, 1 the operation failed, 2 usage or configuration error.
Commands run synchronously (blocking disk I/O is fine here, no event loop is running yet).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Final

from olp.config import ConfigError, Settings, load_settings
from olp.store import StoreError

from . import admin, connect, keys, login, migrate, service, views
from ._args import Commands
from ._proxy_client import ProxyRefused
from ._tables import printable

#: Every command's parser, in the order ``olp --help`` lists them.
COMMANDS: Final[tuple[Callable[[Commands], None], ...]] = (
    admin.add_start, admin.add_setup, login.add_login, keys.add_keys, views.add_usage,
    views.add_audit, views.add_quota, migrate.add_migrate, connect.add_connect,
    service.add_service, admin.add_reload, admin.add_status, admin.add_chain, admin.add_doctor,
    admin.add_cooldowns, admin.add_cache)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``olp`` command and return its exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else 2
    if args.handler is None:
        parser.print_help(sys.stderr)
        return 2
    read_settings: Callable[[], Settings] = getattr(args, "settings", _settings)
    try:
        settings = read_settings()
        code: int = args.handler(settings, args)
        return code
    except ConfigError as exc:
        print(printable(f"olp: configuration error: {exc}"), file=sys.stderr)
        return 2
    except (StoreError, ProxyRefused) as exc:
        print(printable(f"olp: {exc}"), file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="olp", description="OLP, the Open LLM Proxy: one OpenAI-compatible endpoint in "
        "front of the vendor CLIs you are logged into.")
    parser.set_defaults(handler=None)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for add in COMMANDS:
        add(commands)
    return parser


def _settings() -> Settings:
    """What a command reads unless its parser says otherwise: the environment and the
    config file."""
    return load_settings(os.environ)
