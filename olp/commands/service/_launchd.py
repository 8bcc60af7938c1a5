"""macOS: a launchd agent, ``~/Library/LaunchAgents/dev.olp.proxy.plist``, loaded with
``launchctl``."""

from __future__ import annotations

import math
import os
import plistlib
from collections.abc import Mapping
from pathlib import Path
from typing import Final, TextIO

from olp.config import Settings

from ._shared import (
    LOG_FILE,
    STOP_MARGIN_S,
    Manager,
    Runner,
    by_hand,
    call,
    gone,
    home,
    owner_key_hint,
    write_file,
)

LABEL: Final = "dev.olp.proxy"


def plist_bytes(*, olp_argv: list[str], env: Mapping[str, str], log_path: Path,
                grace_s: float = 30.0) -> bytes:
    """The launchd agent running ``olp_argv start`` with ``env``, restarted when it fails,
    its log (stderr) in ``log_path``; launchd waits the drain grace + 10 s after SIGTERM
    (``ExitTimeOut``; its default, 20 s, is shorter than the default drain)."""
    agent = {
        "Label": LABEL,
        "ProgramArguments": [*olp_argv, "start"],
        "EnvironmentVariables": dict(env),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "StandardErrorPath": str(log_path),
        "ExitTimeOut": math.ceil(grace_s + STOP_MARGIN_S),
    }
    return plistlib.dumps(agent, fmt=plistlib.FMT_XML)


def _plist_path(environ: Mapping[str, str]) -> Path:
    return home(environ) / "Library" / "LaunchAgents" / f"{LABEL}.plist"


def _install(settings: Settings, data: bytes, path: Path, runner: Runner,
             environ: Mapping[str, str], out: TextIO) -> int:
    """Write the plist and load it (``bootstrap``, else the older ``load -w``)."""
    write_file(path, data)
    print(f"Wrote {path}", file=out)
    boot = call(runner, ["launchctl", "bootstrap", f"gui/{os.getuid()}", str(path)])
    loaded = boot if boot.ok else call(runner, ["launchctl", "load", "-w", str(path)])
    if not loaded.ok:
        print(f"Failed: {boot.shell} ({boot.why()})", file=out)
        return by_hand(out, loaded, [boot.cmd])
    print(f"Ran {loaded.shell}", file=out)
    print(f"OLP runs as the launchd agent {LABEL} on http://{settings.bind}:{settings.port} "
          f"(OLP_HOME {settings.home}); its log is {settings.home / LOG_FILE}.", file=out)
    owner_key_hint(settings, environ, out, f"add OLP_OWNER_TOKEN to EnvironmentVariables in "
                   f"{path}, make it mode 0600 and reload the agent (launchctl bootout, then "
                   f"bootstrap; `olp service install` would overwrite it)")
    print("Status: olp service status", file=out)
    return 0


def _uninstall(path: Path, runner: Runner, out: TextIO) -> int:
    """Unload the agent and remove the plist."""
    stop = call(runner, ["launchctl", "bootout", f"gui/{os.getuid()}/{LABEL}"])
    if stop.ok:
        print(f"Ran {stop.shell}", file=out)
    if path.exists():
        path.unlink()
        print(f"Removed {path}", file=out)
    if not stop.ok and stop.code not in (3, 113) and not gone(stop):  # 3, 113: not loaded
        return by_hand(out, stop, [stop.cmd])
    return 0


def _file(olp_argv: list[str], env: Mapping[str, str], settings: Settings,
          grace_s: float) -> bytes:
    return plist_bytes(olp_argv=olp_argv, env=env, log_path=settings.home / LOG_FILE,
                       grace_s=grace_s)


LAUNCHD: Final = Manager(file=_file, path=_plist_path, install=_install, uninstall=_uninstall,
                         status=lambda: ["launchctl", "print", f"gui/{os.getuid()}/{LABEL}"])
