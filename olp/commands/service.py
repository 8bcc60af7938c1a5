"""``olp service install|uninstall|status [--print]``: run ``olp start`` as a per-user service.

Linux: a systemd *user* unit, ``$XDG_CONFIG_HOME/systemd/user/olp.service``; macOS: a launchd
agent, ``~/Library/LaunchAgents/dev.olp.proxy.plist``. The file carries ``OLP_HOME``,
``OLP_PORT``, ``OLP_BIND``, ``OLP_LOG_LEVEL`` and the current ``PATH`` (so the service finds
the vendor CLIs and ``bwrap``) and never a secret: it is world-readable. Every function here
blocks (file writes, ``systemctl``/``launchctl`` runs of up to 30 s each): a command, not the
server.
"""

from __future__ import annotations

import math
import os
import plistlib
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from olp.config import Settings

Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]

UNIT_NAME: Final = "olp.service"
LABEL: Final = "dev.olp.proxy"
OWNER_KEY_FILE: Final = "owner-key.txt"  # as olp.runtime.server writes it
LOG_FILE: Final = "olp.log"
#: ``systemctl status``'s code for an inactive unit, also used for "not installed".
NOT_INSTALLED: Final = 3
#: What systemd waits beyond the drain grace before it SIGKILLs what is left.
STOP_MARGIN_S: Final = 10.0
_SYSTEMCTL: Final = ("systemctl", "--user")
#: What systemctl and launchctl say of a service that is not loaded (nothing to stop).
_GONE_MARKERS: Final = ("not loaded", "does not exist", "not found", "could not find")


# --- what gets written ---------------------------------------------------------------------


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


# --- running commands ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Result:
    """A command's outcome; ``missing`` when its executable was not found."""

    cmd: list[str]
    ok: bool
    code: int
    stdout: str = ""
    stderr: str = ""
    missing: bool = False

    @property
    def output(self) -> str:
        return "\n".join(s for s in (self.stdout, self.stderr) if s)

    @property
    def shell(self) -> str:
        return shlex.join(self.cmd)

    def why(self) -> str:
        """Why it failed, in one line."""
        if self.missing:
            return f"{self.cmd[0]} not found"
        detail = self.output.strip().splitlines()
        return f"exit {self.code}" + (f": {detail[-1]}" if detail else "")


def _default_runner(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` and capture its output; blocks up to 30 s."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)


def _call(runner: Runner, cmd: list[str]) -> _Result:
    """Run ``cmd``; a missing executable, a timeout or an OS error is a failed result."""
    try:
        done = runner(cmd)
    except FileNotFoundError:
        return _Result(cmd, ok=False, code=127, missing=True)
    except subprocess.TimeoutExpired:
        return _Result(cmd, ok=False, code=124, stderr="timed out after 30 s")
    except OSError as exc:
        return _Result(cmd, ok=False, code=126, stderr=str(exc))
    return _Result(cmd, ok=done.returncode == 0, code=done.returncode,
                   stdout=done.stdout or "", stderr=done.stderr or "")


def _gone(result: _Result) -> bool:
    """The command failed only because the service was not loaded (nothing to stop)."""
    text = result.output.lower()
    return not result.missing and any(m in text for m in _GONE_MARKERS)


def _write(path: Path, data: bytes) -> None:
    """Write ``path`` (mode 0644), creating its parent directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o644)


def _by_hand(out: TextIO, failed: _Result, todo: Sequence[list[str]]) -> int:
    """Say which command failed and what to run by hand; the exit code 1."""
    print(f"Failed: {failed.shell} ({failed.why()})", file=out)
    print("Run by hand: " + " && ".join(shlex.join(c) for c in todo), file=out)
    return 1


def _owner_key_hint(settings: Settings, environ: Mapping[str, str], out: TextIO,
                    how: str) -> None:
    """Where the owner key is, since the service file never carries one; ``how`` says how
    to give the service an ``OLP_OWNER_TOKEN``."""
    print(f"Owner key: if none exists yet, the first start writes it to "
          f"{settings.home / OWNER_KEY_FILE} (mode 0600): read it, then delete the file.",
          file=out)
    mine = "OLP_OWNER_TOKEN is set here but not copied into the service file; to use it"
    print(f"{mine if environ.get('OLP_OWNER_TOKEN') else 'To use your own key'}, {how}.",
          file=out)


# --- systemd -------------------------------------------------------------------------------


def _unit_path(environ: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/systemd/user/olp.service`` (a relative value is ignored, per XDG)."""
    xdg = environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else _home(environ) / ".config"
    return base / "systemd" / "user" / UNIT_NAME


def _systemd_install(settings: Settings, unit: str, path: Path, runner: Runner,
                     environ: Mapping[str, str], out: TextIO) -> int:
    """Write the unit, reload systemd, enable and start the service."""
    _write(path, unit.encode())
    print(f"Wrote {path}", file=out)
    steps = [[*_SYSTEMCTL, "daemon-reload"], [*_SYSTEMCTL, "enable", "--now", UNIT_NAME]]
    for i, cmd in enumerate(steps):
        result = _call(runner, cmd)
        if not result.ok:
            return _by_hand(out, result, steps[i:])
        print(f"Ran {result.shell}", file=out)
    print(f"OLP runs as the systemd user service {UNIT_NAME} on "
          f"http://{settings.bind}:{settings.port} (OLP_HOME {settings.home}); if it was "
          f"already running, `systemctl --user restart olp` applies a changed unit.", file=out)
    _owner_key_hint(settings, environ, out, "set OLP_OWNER_TOKEN with `systemctl --user edit "
                    "olp` ([Service] then Environment=OLP_OWNER_TOKEN=...)")
    print("To keep it running without a login session: loginctl enable-linger $USER", file=out)
    print("Status: olp service status; log: journalctl --user -u olp", file=out)
    return 0


def _systemd_uninstall(path: Path, runner: Runner, out: TextIO) -> int:
    """Stop and disable the service, remove the unit, reload systemd."""
    installed = path.exists() or path.is_symlink()
    stop = _call(runner, [*_SYSTEMCTL, "disable", "--now", UNIT_NAME])
    stopped = stop.ok or not installed or _gone(stop)
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
    reload = _call(runner, [*_SYSTEMCTL, "daemon-reload"])
    if reload.ok:
        print(f"Ran {reload.shell}", file=out)
    _mention_dropins(path, out)
    if not stopped:
        return _by_hand(out, stop, [[*_SYSTEMCTL, "stop", UNIT_NAME], reload.cmd])
    if not reload.ok and installed:
        return _by_hand(out, reload, [reload.cmd])
    return 0


def _mention_dropins(path: Path, out: TextIO) -> None:
    """Say that ``systemctl --user edit``'s overrides are left in place."""
    dropins = path.with_name(UNIT_NAME + ".d")
    if dropins.is_dir():
        print(f"Left {dropins} (your `systemctl --user edit` overrides; it may hold "
              f"OLP_OWNER_TOKEN): delete it if you no longer need it.", file=out)


def _systemd(action: str, settings: Settings, *, print_only: bool, out: TextIO, err: TextIO,
             environ: Mapping[str, str], runner: Runner, grace_s: float) -> int:
    """The Linux branch of :func:`run`."""
    env = service_env(settings, environ.get("PATH", os.defpath))
    unit = unit_text(olp_argv=olp_command(), env=env, grace_s=grace_s)
    path = _unit_path(environ)
    if print_only:
        out.write(unit)
        return 0
    if action == "install":
        return _systemd_install(settings, unit, path, runner, environ, out)
    if action == "uninstall":
        return _systemd_uninstall(path, runner, out)
    if not path.exists():
        print(f"not installed ({path} does not exist; `olp service install` writes it)",
              file=out)
        return NOT_INSTALLED
    return _pass_through(_call(runner, [*_SYSTEMCTL, "status", UNIT_NAME, "--no-pager"]),
                         out, err)


def _pass_through(result: _Result, out: TextIO, err: TextIO) -> int:
    """A status command's output and exit code, or why it could not run (1)."""
    if result.missing:
        print(f"{result.why()}: cannot ask for the service's status", file=err)
        return 1
    out.write(result.stdout)
    err.write(result.stderr)
    return result.code


# --- launchd -------------------------------------------------------------------------------


def _plist_path(environ: Mapping[str, str]) -> Path:
    return _home(environ) / "Library" / "LaunchAgents" / f"{LABEL}.plist"


def _launchd_install(settings: Settings, data: bytes, path: Path, runner: Runner,
                     environ: Mapping[str, str], out: TextIO) -> int:
    """Write the plist and load it (``bootstrap``, else the older ``load -w``)."""
    _write(path, data)
    print(f"Wrote {path}", file=out)
    boot = _call(runner, ["launchctl", "bootstrap", f"gui/{os.getuid()}", str(path)])
    loaded = boot if boot.ok else _call(runner, ["launchctl", "load", "-w", str(path)])
    if not loaded.ok:
        print(f"Failed: {boot.shell} ({boot.why()})", file=out)
        return _by_hand(out, loaded, [boot.cmd])
    print(f"Ran {loaded.shell}", file=out)
    print(f"OLP runs as the launchd agent {LABEL} on http://{settings.bind}:{settings.port} "
          f"(OLP_HOME {settings.home}); its log is {settings.home / LOG_FILE}.", file=out)
    _owner_key_hint(settings, environ, out, f"add OLP_OWNER_TOKEN to EnvironmentVariables in "
                    f"{path}, make it mode 0600 and reload the agent (launchctl bootout, then "
                    f"bootstrap; `olp service install` would overwrite it)")
    print("Status: olp service status", file=out)
    return 0


def _launchd_uninstall(path: Path, runner: Runner, out: TextIO) -> int:
    """Unload the agent and remove the plist."""
    stop = _call(runner, ["launchctl", "bootout", f"gui/{os.getuid()}/{LABEL}"])
    if stop.ok:
        print(f"Ran {stop.shell}", file=out)
    if path.exists():
        path.unlink()
        print(f"Removed {path}", file=out)
    if not stop.ok and stop.code not in (3, 113) and not _gone(stop):  # 3, 113: not loaded
        return _by_hand(out, stop, [stop.cmd])
    return 0


def _launchd(action: str, settings: Settings, *, print_only: bool, out: TextIO, err: TextIO,
             environ: Mapping[str, str], runner: Runner, grace_s: float) -> int:
    """The macOS branch of :func:`run`."""
    env = service_env(settings, environ.get("PATH", os.defpath))
    data = plist_bytes(olp_argv=olp_command(), env=env, log_path=settings.home / LOG_FILE,
                       grace_s=grace_s)
    path = _plist_path(environ)
    if print_only:
        out.write(data.decode())
        return 0
    if action == "install":
        return _launchd_install(settings, data, path, runner, environ, out)
    if action == "uninstall":
        return _launchd_uninstall(path, runner, out)
    if not path.exists():
        print(f"not installed ({path} does not exist; `olp service install` writes it)",
              file=out)
        return NOT_INSTALLED
    return _pass_through(_call(runner, ["launchctl", "print", f"gui/{os.getuid()}/{LABEL}"]),
                         out, err)


# --- entry point ---------------------------------------------------------------------------


def _home(environ: Mapping[str, str]) -> Path:
    home = environ.get("HOME", "").strip()
    return Path(home) if home else Path.home()


def run(action: str, settings: Settings, *, print_only: bool, out: TextIO, err: TextIO,
        platform: str = sys.platform, environ: Mapping[str, str] = os.environ,
        runner: Callable[[list[str]], subprocess.CompletedProcess[str]] | None = None,
        grace_s: float = 30.0) -> int:
    """``olp service <action>`` (``install``, ``uninstall``, ``status``); ``print_only``
    prints the unit (or plist) and does nothing else. Returns the exit code: 0 done, 1 a
    failure (said on ``out``, with what to run by hand), 3 not installed (``status``)."""
    if action not in ("install", "uninstall", "status"):
        print(f"olp service: unknown action {action!r} (install, uninstall, status)", file=err)
        return 2
    call = _default_runner if runner is None else runner
    if platform.startswith("linux"):
        return _systemd(action, settings, print_only=print_only, out=out, err=err,
                        environ=environ, runner=call, grace_s=grace_s)
    if platform == "darwin":
        return _launchd(action, settings, print_only=print_only, out=out, err=err,
                        environ=environ, runner=call, grace_s=grace_s)
    print(f"olp service: not supported on {platform} (systemd on Linux and launchd on macOS "
          f"are); run `olp start` under your own service manager.", file=err)
    return 1
