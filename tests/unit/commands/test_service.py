"""``olp service``: the systemd unit and launchd plist it writes, and the ``systemctl`` /
``launchctl`` commands it runs (recorded by a fake runner; nothing real is run)."""

from __future__ import annotations

import configparser
import io
import os
import plistlib
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from olp.commands import service
from olp.config import Settings, load_settings

TOKEN = "owner-secret-0123456789abcdef-0123"
PATH = "/opt/vendor/bin:/usr/bin:/bin"


class FakeRunner:
    """Records each command; answers from ``replies`` (by the command's joined words), else
    success. A reply that is an exception is raised."""

    def __init__(self, replies: dict[str, tuple[int, str] | Exception] | None = None) -> None:
        self.calls: list[list[str]] = []
        self.replies = replies or {}

    def __call__(self, cmd: list[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(cmd)
        reply = self.replies.get(" ".join(cmd), (0, ""))
        if isinstance(reply, Exception):
            raise reply
        code, text = reply
        return subprocess.CompletedProcess(cmd, code, stdout="" if code else text,
                                           stderr=text if code else "")


def _refuse(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    raise AssertionError(f"ran {cmd}")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings({"OLP_HOME": str(tmp_path), "OLP_PORT": "4999", "HOME": str(tmp_path),
                          "OLP_OWNER_TOKEN": TOKEN})


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "PATH": PATH,
            "OLP_OWNER_TOKEN": TOKEN}


def _unit_path(tmp_path: Path) -> Path:
    return tmp_path / "xdg" / "systemd" / "user" / "olp.service"


def _run(action: str, settings: Settings, environ: dict[str, str],
         runner: Callable[[list[str]], subprocess.CompletedProcess[str]], *,
         print_only: bool = False, platform: str = "linux") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = service.run(action, settings, print_only=print_only, out=out, err=err,
                       platform=platform, environ=environ, runner=runner)
    return code, out.getvalue(), err.getvalue()


def _env_lines(unit: str) -> dict[str, str]:
    return {line.split("=", 2)[1]: line.split("=", 2)[2] for line in unit.splitlines()
            if line.startswith("Environment=")}


# --- Linux ---------------------------------------------------------------------------------


def test_print_shows_the_unit_and_does_nothing_else(
        tmp_path: Path, settings: Settings, environ: dict[str, str]) -> None:
    code, out, _ = _run("install", settings, environ, _refuse, print_only=True)
    assert code == 0
    assert not _unit_path(tmp_path).exists()
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(out)
    assert parser["Unit"]["Description"] == "OLP, the Open LLM Proxy"
    assert parser["Unit"]["After"] == "network-online.target"
    svc = parser["Service"]
    assert svc["Type"] == "simple"
    assert svc["Restart"] == "on-failure"
    assert svc["RestartSec"] == "5"
    assert svc["KillSignal"] == "SIGTERM"
    assert svc["TimeoutStopSec"] == "40"
    assert parser["Install"]["WantedBy"] == "default.target"
    exec_start = svc["ExecStart"]
    assert exec_start.endswith(" start")
    assert os.path.isabs(exec_start.split()[0])
    assert exec_start.split()[0] == service.olp_command()[0]
    assert _env_lines(out) == {"OLP_HOME": str(tmp_path), "OLP_PORT": "4999",
                               "OLP_BIND": "127.0.0.1", "OLP_LOG_LEVEL": "info", "PATH": PATH}
    comments = " ".join(line for line in out.splitlines() if line.startswith("#"))
    assert "PATH" in comments and "bwrap" in comments and "claude" in comments


def test_the_unit_never_carries_the_owner_token(settings: Settings,
                                                environ: dict[str, str]) -> None:
    assert settings.owner_token == TOKEN and environ["OLP_OWNER_TOKEN"] == TOKEN
    _, out, _ = _run("install", settings, environ, _refuse, print_only=True)
    assert TOKEN not in out
    assert "OLP_OWNER_TOKEN=" not in out
    assert "OLP_OWNER_TOKEN" not in service.service_env(settings, PATH)


def test_install_writes_the_unit_then_reloads_and_enables(
        tmp_path: Path, settings: Settings, environ: dict[str, str]) -> None:
    runner = FakeRunner()
    code, out, _ = _run("install", settings, environ, runner)
    assert code == 0
    assert runner.calls == [["systemctl", "--user", "daemon-reload"],
                            ["systemctl", "--user", "enable", "--now", "olp.service"]]
    path = _unit_path(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert path.read_text() == service.unit_text(
        olp_argv=service.olp_command(), env=service.service_env(settings, PATH), grace_s=30)
    assert TOKEN not in path.read_text()
    assert "loginctl enable-linger $USER" in out
    assert str(tmp_path / "owner-key.txt") in out
    assert "systemctl --user edit olp" in out
    assert "OLP_OWNER_TOKEN is set here but not copied" in out


def test_install_defaults_to_dot_config(tmp_path: Path, settings: Settings) -> None:
    code, _, _ = _run("install", settings, {"HOME": str(tmp_path), "PATH": PATH}, FakeRunner())
    assert code == 0
    assert (tmp_path / ".config" / "systemd" / "user" / "olp.service").is_file()


def test_install_without_systemctl_still_writes_the_unit(
        tmp_path: Path, settings: Settings, environ: dict[str, str]) -> None:
    runner = FakeRunner({"systemctl --user daemon-reload": FileNotFoundError("systemctl")})
    code, out, _ = _run("install", settings, environ, runner)
    assert code == 1
    assert _unit_path(tmp_path).is_file()
    assert "systemctl not found" in out
    assert ("Run by hand: systemctl --user daemon-reload && "
            "systemctl --user enable --now olp.service") in out
    assert len(runner.calls) == 1


def test_install_names_the_command_that_failed(
        tmp_path: Path, settings: Settings, environ: dict[str, str]) -> None:
    runner = FakeRunner({"systemctl --user enable --now olp.service":
                         (1, "Failed to connect to bus: No medium found")})
    code, out, _ = _run("install", settings, environ, runner)
    assert code == 1
    assert _unit_path(tmp_path).is_file()
    assert ("Failed: systemctl --user enable --now olp.service "
            "(exit 1: Failed to connect to bus: No medium found)") in out
    assert "Run by hand: systemctl --user enable --now olp.service" in out


def test_uninstall_disables_removes_and_reloads(
        tmp_path: Path, settings: Settings, environ: dict[str, str]) -> None:
    assert _run("install", settings, environ, FakeRunner())[0] == 0
    runner = FakeRunner()
    code, out, _ = _run("uninstall", settings, environ, runner)
    assert code == 0
    assert not _unit_path(tmp_path).exists()
    assert runner.calls == [["systemctl", "--user", "disable", "--now", "olp.service"],
                            ["systemctl", "--user", "daemon-reload"]]
    assert f"Removed {_unit_path(tmp_path)}" in out


def test_uninstall_tolerates_a_unit_that_is_not_loaded(
        tmp_path: Path, settings: Settings, environ: dict[str, str]) -> None:
    assert _run("install", settings, environ, FakeRunner())[0] == 0
    runner = FakeRunner({"systemctl --user disable --now olp.service":
                         (1, "Failed to stop olp.service: Unit olp.service not loaded.")})
    assert _run("uninstall", settings, environ, runner)[0] == 0
    assert not _unit_path(tmp_path).exists()


def test_uninstall_reports_a_service_it_could_not_stop(
        tmp_path: Path, settings: Settings, environ: dict[str, str]) -> None:
    assert _run("install", settings, environ, FakeRunner())[0] == 0
    runner = FakeRunner({"systemctl --user disable --now olp.service":
                         (1, "Failed to connect to bus: No such file or directory")})
    code, out, _ = _run("uninstall", settings, environ, runner)
    assert code == 1
    assert not _unit_path(tmp_path).exists()
    assert "Run by hand: systemctl --user stop olp.service" in out


def test_status_when_not_installed(settings: Settings, environ: dict[str, str]) -> None:
    code, out, _ = _run("status", settings, environ, _refuse)
    assert code == 3
    assert "not installed" in out


def test_status_passes_systemctl_through(settings: Settings, environ: dict[str, str]) -> None:
    assert _run("install", settings, environ, FakeRunner())[0] == 0
    runner = FakeRunner({"systemctl --user status olp.service --no-pager":
                         (3, "○ olp.service - OLP, the Open LLM Proxy\n   Active: inactive\n")})
    code, _, err = _run("status", settings, environ, runner)
    assert code == 3
    assert "Active: inactive" in err
    assert runner.calls == [["systemctl", "--user", "status", "olp.service", "--no-pager"]]


def test_status_without_systemctl(settings: Settings, environ: dict[str, str]) -> None:
    assert _run("install", settings, environ, FakeRunner())[0] == 0
    runner = FakeRunner({"systemctl --user status olp.service --no-pager":
                         FileNotFoundError("systemctl")})
    code, _, err = _run("status", settings, environ, runner)
    assert code == 1
    assert "systemctl not found" in err


# --- quoting -------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "line"), [
    ("plain", "Environment=K=plain"),
    ("50%", "Environment=K=50%%"),
    ("/my home/olp", 'Environment="K=/my home/olp"'),
    ('say "hi"', 'Environment="K=say \\"hi\\""'),
    ("it's", "Environment=\"K=it's\""),
    ("back\\slash", 'Environment="K=back\\\\slash"'),
    ("a=b", 'Environment="K=a=b"'),
    ("100% sure", 'Environment="K=100%% sure"'),
    ("$HOME", "Environment=K=$HOME"),
    ("two\nlines", 'Environment="K=two\\nlines"'),
])
def test_environment_values_are_escaped_for_systemd(value: str, line: str) -> None:
    unit = service.unit_text(olp_argv=["/usr/bin/olp"], env={"K": value}, grace_s=30)
    assert line in unit.splitlines()


def test_exec_start_is_quoted_for_systemd() -> None:
    unit = service.unit_text(olp_argv=["/opt/my tools/100%/$bin/python", "-m", "olp"], env={},
                             grace_s=2.5)
    lines = unit.splitlines()
    assert 'ExecStart="/opt/my tools/100%%/$$bin/python" -m olp start' in lines
    assert "TimeoutStopSec=13" in lines


# --- olp_command ---------------------------------------------------------------------------


def test_olp_command_prefers_the_script_beside_the_interpreter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "olp").write_text("#!/bin/sh\n")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setattr(shutil, "which", lambda name: "/elsewhere/olp")
    assert service.olp_command() == [str(tmp_path / "bin" / "olp")]


def test_olp_command_falls_back_to_path_then_python_m(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setattr(shutil, "which", lambda name: "/elsewhere/olp")
    assert service.olp_command() == ["/elsewhere/olp"]
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert service.olp_command() == [str(tmp_path / "bin" / "python"), "-m", "olp"]


def test_olp_command_is_absolute() -> None:
    assert all(os.path.isabs(w) for w in service.olp_command()[:1])


# --- macOS and the rest --------------------------------------------------------------------


def _plist_path(tmp_path: Path) -> Path:
    return tmp_path / "Library" / "LaunchAgents" / "dev.olp.proxy.plist"


def test_darwin_install_writes_and_bootstraps_the_agent(
        tmp_path: Path, settings: Settings, environ: dict[str, str]) -> None:
    runner = FakeRunner()
    code, out, _ = _run("install", settings, environ, runner, platform="darwin")
    assert code == 0
    path = _plist_path(tmp_path)
    agent = plistlib.loads(path.read_bytes())
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert agent["Label"] == "dev.olp.proxy"
    assert agent["ProgramArguments"] == [*service.olp_command(), "start"]
    assert agent["EnvironmentVariables"] == {
        "OLP_HOME": str(tmp_path), "OLP_PORT": "4999", "OLP_BIND": "127.0.0.1",
        "OLP_LOG_LEVEL": "info", "PATH": PATH}
    assert agent["RunAtLoad"] is True
    assert agent["KeepAlive"] == {"SuccessfulExit": False}
    assert agent["ExitTimeOut"] == 40  # the 30 s drain + 10 s: launchd's 20 s would cut it
    assert agent["StandardErrorPath"] == str(tmp_path / "olp.log")
    assert TOKEN.encode() not in path.read_bytes()
    assert runner.calls == [["launchctl", "bootstrap", f"gui/{os.getuid()}", str(path)]]
    assert str(tmp_path / "owner-key.txt") in out


def test_darwin_install_falls_back_to_load(
        tmp_path: Path, settings: Settings, environ: dict[str, str]) -> None:
    path = _plist_path(tmp_path)
    runner = FakeRunner({f"launchctl bootstrap gui/{os.getuid()} {path}": (5, "I/O error")})
    code, _, _ = _run("install", settings, environ, runner, platform="darwin")
    assert code == 0
    assert runner.calls[-1] == ["launchctl", "load", "-w", str(path)]


def test_darwin_print_status_and_uninstall(
        tmp_path: Path, settings: Settings, environ: dict[str, str]) -> None:
    code, out, _ = _run("install", settings, environ, _refuse, print_only=True,
                        platform="darwin")
    assert code == 0 and not _plist_path(tmp_path).exists()
    assert plistlib.loads(out.encode())["Label"] == "dev.olp.proxy"
    assert _run("status", settings, environ, _refuse, platform="darwin")[0] == 3
    assert _run("install", settings, environ, FakeRunner(), platform="darwin")[0] == 0
    runner = FakeRunner()
    assert _run("uninstall", settings, environ, runner, platform="darwin")[0] == 0
    assert runner.calls == [["launchctl", "bootout", f"gui/{os.getuid()}/dev.olp.proxy"]]
    assert not _plist_path(tmp_path).exists()


def test_an_unknown_platform_is_refused(settings: Settings, environ: dict[str, str]) -> None:
    code, _, err = _run("install", settings, environ, _refuse, platform="win32")
    assert code == 1
    assert "not supported on win32" in err
