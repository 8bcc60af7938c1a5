"""``olp service install|uninstall|status [--print]``: the command, and what every service
file carries (how to run ``olp``, and its environment)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final, TextIO

from olp.config import Settings

from .._args import Commands
from ._launchd import LAUNCHD
from ._shared import Manager, Runner, call, default_runner, pass_through
from ._systemd import SYSTEMD

#: ``systemctl status``'s code for an inactive unit, also used for "not installed".
NOT_INSTALLED: Final = 3


def add_service(commands: Commands) -> None:
    service = commands.add_parser("service", help="run olp start as a user service (systemd "
                                                  "on Linux, launchd on macOS)")
    service.add_argument("action", choices=("install", "uninstall", "status"))
    service.add_argument("--print", action="store_true",
                         help="show the unit (or plist) and change nothing")
    service.set_defaults(handler=_command)


def _command(settings: Settings, args: argparse.Namespace) -> int:
    return run(args.action, settings, print_only=args.print, out=sys.stdout, err=sys.stderr,
               grace_s=settings.config.server.drain_grace_s)


def olp_command() -> list[str]:
    """The absolute argv prefix that runs ``olp`` (without ``start``): the ``olp`` script next
    to this interpreter, else the one on ``PATH``, else ``<python> -m olp``."""
    beside = Path(sys.executable).parent / "olp"
    if beside.is_file():
        return [str(beside.absolute())]
    found = shutil.which("olp")
    if found is not None:
        return [str(Path(found).absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "olp"]


def service_env(settings: Settings, path: str) -> dict[str, str]:
    """The service's environment: where and how OLP runs, and ``path`` as ``PATH``. Never
    ``OLP_OWNER_TOKEN`` or any other secret (the unit file and the plist are readable)."""
    return {
        "OLP_HOME": str(settings.home),
        "OLP_PORT": str(settings.port),
        "OLP_BIND": settings.bind,
        "OLP_LOG_LEVEL": settings.log_level,
        "PATH": path,
    }


def run(action: str, settings: Settings, *, print_only: bool, out: TextIO, err: TextIO,
        platform: str = sys.platform, environ: Mapping[str, str] = os.environ,
        runner: Runner | None = None, grace_s: float = 30.0) -> int:
    """``olp service <action>`` (``install``, ``uninstall``, ``status``); ``print_only``
    prints the unit (or plist) and does nothing else. Returns the exit code: 0 done, 1 a
    failure (said on ``out``, with what to run by hand), 3 not installed (``status``)."""
    if action not in ("install", "uninstall", "status"):
        print(f"olp service: unknown action {action!r} (install, uninstall, status)", file=err)
        return 2
    manager = _manager(platform)
    if manager is None:
        print(f"olp service: not supported on {platform} (systemd on Linux and launchd on "
              f"macOS are); run `olp start` under your own service manager.", file=err)
        return 1
    env = service_env(settings, environ.get("PATH", os.defpath))
    data = manager.file(olp_command(), env, settings, grace_s)
    path = manager.path(environ)
    runs = default_runner if runner is None else runner
    if print_only:
        out.write(data.decode())
        return 0
    if action == "install":
        return manager.install(settings, data, path, runs, environ, out)
    if action == "uninstall":
        return manager.uninstall(path, runs, out)
    if not path.exists():
        print(f"not installed ({path} does not exist; `olp service install` writes it)",
              file=out)
        return NOT_INSTALLED
    return pass_through(call(runs, manager.status()), out, err)


def _manager(platform: str) -> Manager | None:
    if platform.startswith("linux"):
        return SYSTEMD
    return LAUNCHD if platform == "darwin" else None
