"""Linux: a systemd *user* unit, ``$XDG_CONFIG_HOME/systemd/user/olp.service``, enabled and
started with ``systemctl --user``."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final, TextIO

from olp.config import Settings

from ._shared import (
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

UNIT_NAME: Final = "olp.service"
_SYSTEMCTL: Final = ("systemctl", "--user")


def unit_text(*, olp_argv: list[str], env: Mapping[str, str], grace_s: float) -> str:
    """The systemd user unit running ``olp_argv start`` with ``env``; systemd waits
    ``grace_s`` + 10 s for the drain before it kills."""
    exec_start = " ".join(_exec_word(w) for w in [*olp_argv, "start"])
    lines = [
        "# Written by `olp service install`; `olp service uninstall` removes it.",
        "[Unit]",
        "Description=OLP, the Open LLM Proxy",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={exec_start}",
        "Restart=on-failure",
        "RestartSec=5",
        "# SIGTERM to olp only, so in-flight requests drain while their CLIs keep running;",
        "# whatever is left when the timeout ends is killed.",
        "KillMode=mixed",
        "KillSignal=SIGTERM",
        f"TimeoutStopSec={math.ceil(grace_s + STOP_MARGIN_S)}",
        "# PATH is the one `olp service install` ran with, so the proxy finds the vendor CLIs",
        "# (claude, codex, vibe) and bwrap. No secret here: set OLP_OWNER_TOKEN, if you want",
        "# your own owner key, with `systemctl --user edit olp`.",
        *(f"Environment={_env_assignment(k, v)}" for k, v in env.items()),
        "",
        "[Install]",
        "WantedBy=default.target",
    ]
    return "\n".join(lines) + "\n"


def _env_assignment(key: str, value: str) -> str:
    """``KEY=value`` for ``Environment=``: ``%`` doubled (specifiers), and the whole
    assignment double-quoted with C escapes when the value holds anything but plain
    characters or ``=`` (``$`` is literal there: ``Environment=`` expands no variables)."""
    text = _c_escape(f"{key}={value}")
    if text == f"{key}={value}" and _plain(value) and "=" not in value:
        return text.replace("%", "%%")
    return f'"{text}"'.replace("%", "%%")


def _exec_word(word: str) -> str:
    """One ``ExecStart=`` word: ``%`` and ``$`` doubled (specifiers, variables), and
    double-quoted with C escapes when it holds anything but plain characters."""
    text = _c_escape(word)
    if not (text == word and _plain(word)):
        text = f'"{text}"'
    return text.replace("%", "%%").replace("$", "$$")


def _plain(text: str) -> bool:
    """No whitespace, quotes, backslash or ``;`` (systemd would split or unquote there)."""
    return bool(text) and not any(c.isspace() or c in "\"'\\;" for c in text)


def _c_escape(text: str) -> str:
    """Backslash, double quote and control characters as the C escapes systemd reads."""
    out: list[str] = []
    for c in text:
        if c in '\\"':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    return "".join(out)


def _unit_path(environ: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/systemd/user/olp.service`` (a relative value is ignored, per XDG)."""
    xdg = environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else home(environ) / ".config"
    return base / "systemd" / "user" / UNIT_NAME


def _install(settings: Settings, unit: bytes, path: Path, runner: Runner,
             environ: Mapping[str, str], out: TextIO) -> int:
    """Write the unit, reload systemd, enable and start the service."""
    write_file(path, unit)
    print(f"Wrote {path}", file=out)
    steps = [[*_SYSTEMCTL, "daemon-reload"], [*_SYSTEMCTL, "enable", "--now", UNIT_NAME]]
    for i, cmd in enumerate(steps):
        result = call(runner, cmd)
        if not result.ok:
            return by_hand(out, result, steps[i:])
        print(f"Ran {result.shell}", file=out)
    print(f"OLP runs as the systemd user service {UNIT_NAME} on "
          f"http://{settings.bind}:{settings.port} (OLP_HOME {settings.home}); if it was "
          f"already running, `systemctl --user restart olp` applies a changed unit.", file=out)
    owner_key_hint(settings, environ, out, "set OLP_OWNER_TOKEN with `systemctl --user edit "
                   "olp` ([Service] then Environment=OLP_OWNER_TOKEN=...)")
    print("To keep it running without a login session: loginctl enable-linger $USER", file=out)
    print("Status: olp service status; log: journalctl --user -u olp", file=out)
    return 0


def _uninstall(path: Path, runner: Runner, out: TextIO) -> int:
    """Stop and disable the service, remove the unit, reload systemd."""
    installed = path.exists() or path.is_symlink()
    stop = call(runner, [*_SYSTEMCTL, "disable", "--now", UNIT_NAME])
    stopped = stop.ok or not installed or gone(stop)
    if stop.ok:
        print(f"Ran {stop.shell}", file=out)
    if installed:
        path.unlink()
        print(f"Removed {path}", file=out)
    else:
        print(f"{UNIT_NAME} was not installed ({path} does not exist)", file=out)
    wants = path.parent / "default.target.wants" / UNIT_NAME  # what `disable` removes
    if wants.is_symlink():
        wants.unlink()
    reload = call(runner, [*_SYSTEMCTL, "daemon-reload"])
    if reload.ok:
        print(f"Ran {reload.shell}", file=out)
    _mention_dropins(path, out)
    if not stopped:
        return by_hand(out, stop, [[*_SYSTEMCTL, "stop", UNIT_NAME], reload.cmd])
    if not reload.ok and installed:
        return by_hand(out, reload, [reload.cmd])
    return 0


def _mention_dropins(path: Path, out: TextIO) -> None:
    """Say that ``systemctl --user edit``'s overrides are left in place."""
    dropins = path.with_name(UNIT_NAME + ".d")
    if dropins.is_dir():
        print(f"Left {dropins} (your `systemctl --user edit` overrides; it may hold "
              f"OLP_OWNER_TOKEN): delete it if you no longer need it.", file=out)


def _file(olp_argv: list[str], env: Mapping[str, str], settings: Settings,
          grace_s: float) -> bytes:
    return unit_text(olp_argv=olp_argv, env=env, grace_s=grace_s).encode()


SYSTEMD: Final = Manager(file=_file, path=_unit_path, install=_install, uninstall=_uninstall,
                         status=lambda: [*_SYSTEMCTL, "status", UNIT_NAME, "--no-pager"])
