"""What the systemd and the launchd branch share: how a service manager is described
(:class:`Manager`), running its commands (up to 30 s each), writing the service file, and
what to tell the person when something must be done by hand."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from olp.config import Settings

Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]

OWNER_KEY_FILE: Final = "owner-key.txt"  # as olp.runtime.server writes it
LOG_FILE: Final = "olp.log"
#: What the service manager waits beyond the drain grace before it kills what is left.
STOP_MARGIN_S: Final = 10.0
#: What systemctl and launchctl say of a service that is not loaded (nothing to stop).
_GONE_MARKERS: Final = ("not loaded", "does not exist", "not found", "could not find")


@dataclass(frozen=True, slots=True)
class Manager:
    """A per-user service manager: the file it runs ``olp start`` from, where that file goes,
    installing and uninstalling it, and the command that reports the service's status."""

    #: The file: ``olp``'s argv prefix, the environment, the settings and the drain grace.
    file: Callable[[list[str], Mapping[str, str], Settings, float], bytes]
    path: Callable[[Mapping[str, str]], Path]
    #: Writes the file and starts the service: settings, file, path, runner, environ, out.
    install: Callable[[Settings, bytes, Path, Runner, Mapping[str, str], TextIO], int]
    uninstall: Callable[[Path, Runner, TextIO], int]
    status: Callable[[], list[str]]


@dataclass(frozen=True, slots=True)
class Result:
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


def default_runner(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` and capture its output; blocks up to 30 s."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)


def call(runner: Runner, cmd: list[str]) -> Result:
    """Run ``cmd``; a missing executable, a timeout or an OS error is a failed result."""
    try:
        done = runner(cmd)
    except FileNotFoundError:
        return Result(cmd, ok=False, code=127, missing=True)
    except subprocess.TimeoutExpired:
        return Result(cmd, ok=False, code=124, stderr="timed out after 30 s")
    except OSError as exc:
        return Result(cmd, ok=False, code=126, stderr=str(exc))
    return Result(cmd, ok=done.returncode == 0, code=done.returncode,
                  stdout=done.stdout or "", stderr=done.stderr or "")


def gone(result: Result) -> bool:
    """The command failed only because the service was not loaded (nothing to stop)."""
    text = result.output.lower()
    return not result.missing and any(m in text for m in _GONE_MARKERS)


def write_file(path: Path, data: bytes) -> None:
    """Write ``path`` (mode 0644), creating its parent directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o644)


def by_hand(out: TextIO, failed: Result, todo: Sequence[list[str]]) -> int:
    """Say which command failed and what to run by hand; the exit code 1."""
    print(f"Failed: {failed.shell} ({failed.why()})", file=out)
    print("Run by hand: " + " && ".join(shlex.join(c) for c in todo), file=out)
    return 1


def owner_key_hint(settings: Settings, environ: Mapping[str, str], out: TextIO,
                   how: str) -> None:
    """Where the owner key is, since the service file never carries one; ``how`` says how
    to give the service an ``OLP_OWNER_TOKEN``."""
    print(f"Owner key: if none exists yet, the first start writes it to "
          f"{settings.home / OWNER_KEY_FILE} (mode 0600): read it, then delete the file.",
          file=out)
    mine = "OLP_OWNER_TOKEN is set here but not copied into the service file; to use it"
    print(f"{mine if environ.get('OLP_OWNER_TOKEN') else 'To use your own key'}, {how}.",
          file=out)


def pass_through(result: Result, out: TextIO, err: TextIO) -> int:
    """A status command's output and exit code, or why it could not run (1)."""
    if result.missing:
        print(f"{result.why()}: cannot ask for the service's status", file=err)
        return 1
    out.write(result.stdout)
    err.write(result.stderr)
    return result.code


def home(environ: Mapping[str, str]) -> Path:
    """``HOME`` from ``environ``, else the password database's."""
    value = environ.get("HOME", "").strip()
    return Path(value) if value else Path.home()
