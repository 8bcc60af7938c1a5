"""The bubblewrap sandbox around CLI spawns, with real processes on the real clock.

A shell stands in for a CLI whose tool the model has made run a command: it tries to read the
owner's files, OLP's home, other spawns' directories and the proxy's own process, and to write
outside its job directory. Everything it must not reach is created by the test first, so each
``No such file`` is the sandbox's doing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio
from olp_harness import FAKE_CLAUDE, alive, descendants, in_thread, run_proxy, wait_until
from tool_bait import plant

import olp.actors._run_dir
from olp.actors import (
    CliConfig,
    CliRunner,
    Invocation,
    ProcessSpawner,
    Sandbox,
    SpawnSpec,
    find_bwrap,
    install_roots,
)
from olp.actors.testing import JsonLinesAdapter, event_line
from olp.ir import ChatRequest, Message, TextDelta, TextPart

BWRAP = find_bwrap(os.environ)
if BWRAP is None:
    if os.environ.get("CI") == "true":
        raise RuntimeError("bwrap not found and CI=true: install bubblewrap")
    pytest.skip("bubblewrap not installed", allow_module_level=True)


async def run_confined(script: str, job_dir: Path, *, read_only: tuple[Path, ...] = (),
                       writable: tuple[Path, ...] = ()) -> tuple[int, str, str]:
    """``sh -c script`` in the sandbox; (exit code, stdout, stderr)."""
    assert BWRAP is not None
    workdir = job_dir / "work"
    (job_dir / "home").mkdir(parents=True)
    workdir.mkdir()
    sandbox = Sandbox(BWRAP, read_only=read_only)
    argv = sandbox.wrap(["/bin/sh", "-c", script], job_dir=job_dir, workdir=workdir,
                        writable=writable)
    spec = SpawnSpec(argv=argv, stdin=b"", cwd=workdir,
                     env={"PATH": "/usr/bin:/bin", "HOME": str(job_dir / "home")})
    out: list[bytes] = []
    async with ProcessSpawner(kill_grace=1).open(spec) as proc:
        while (line := await proc.receive_line()) is not None:
            out.append(line)
        code = await proc.wait()
        return code, b"\n".join(out).decode(), proc.stderr_tail().decode()


@pytest.fixture
def job_dir() -> Path:
    """A job directory where the runner makes them (under the system temp dir)."""
    path = Path(tempfile.mkdtemp(prefix="olp-job-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_the_owner_files_are_invisible_and_unwritable(tmp_path: Path,
                                                             job_dir: Path) -> None:
    owner_home = tmp_path / "owner"
    bait = plant(owner_home)
    other_spawn = Path(tempfile.mkdtemp(prefix="olp-job-other-"))
    try:
        (other_spawn / "answer.txt").write_text("another family member's answer")
        script = (f"cat {bait.secret_file}; cat {other_spawn}/answer.txt; "
                  f"echo pwned > {bait.marker}; cat /etc/shadow; ls /root; "
                  f"echo mine > $HOME/own.txt && echo wrote-home; "
                  f"echo here > ./work.txt && echo wrote-workdir; "
                  f"cat /proc/1/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'")
        with trio.fail_after(20):
            code, out, err = await run_confined(script, job_dir)
    finally:
        shutil.rmtree(other_spawn, ignore_errors=True)
    assert bait.secret not in out and "another family" not in out
    assert not bait.marker.exists()
    assert "wrote-home" in out and "wrote-workdir" in out  # its own dirs are writable
    assert (job_dir / "home" / "own.txt").read_text() == "mine\n"
    assert "No such file" in err  # not "Permission denied": the paths do not exist there
    # Its own PID namespace: PID 1 is the sandbox's init, and only a handful of processes
    # (bwrap, sh, the pipeline) are visible, not the proxy or anything else on the host.
    lines = out.splitlines()
    assert "bwrap" in lines[-2] and int(lines[-1]) <= 5
    assert code == 0  # the last command (the count) succeeded


async def test_the_exit_status_comes_through(job_dir: Path) -> None:
    with trio.fail_after(20):
        assert (await run_confined("exit 7", job_dir))[0] == 7
        assert (await run_confined("kill -TERM $$", job_dir / "again"))[0] == 128 + 15


async def test_read_only_roots_are_readable_not_writable(tmp_path: Path, job_dir: Path) -> None:
    install = tmp_path / "install"
    install.mkdir()
    (install / "data.txt").write_text("shipped with the CLI")
    script = f"cat {install}/data.txt; echo x > {install}/data.txt || echo refused"
    with trio.fail_after(20):
        _, out, err = await run_confined(script, job_dir, read_only=(install,))
    assert "shipped with the CLI" in out and "refused" in out
    assert "Read-only file system" in err
    assert (install / "data.txt").read_text() == "shipped with the CLI"


async def test_a_linked_credential_file_stays_writable(tmp_path: Path, job_dir: Path) -> None:
    credential = tmp_path / "owner" / ".claude" / ".credentials.json"
    credential.parent.mkdir(parents=True)
    credential.write_text('{"token": "old"}')
    script = f"cat {credential}; echo '{{\"token\": \"refreshed\"}}' > {credential}"
    with trio.fail_after(20):
        code, out, _ = await run_confined(script, job_dir, writable=(credential,))
    assert code == 0 and '"old"' in out
    assert "refreshed" in credential.read_text()


async def test_cancelling_kills_everything_inside(job_dir: Path) -> None:
    """A cancelled job ends the sandbox and every process in it, grandchildren included."""
    assert BWRAP is not None
    workdir = job_dir / "work"
    workdir.mkdir(parents=True)
    argv = Sandbox(BWRAP).wrap(["/bin/sh", "-c", "sleep 300 & sleep 300 & echo up; wait"],
                               job_dir=job_dir, workdir=workdir)
    spec = SpawnSpec(argv=argv, stdin=b"", cwd=workdir, env={"PATH": "/usr/bin:/bin"})
    me = os.getpid()
    with trio.fail_after(20):
        with trio.move_on_after(30) as scope:
            async with ProcessSpawner(kill_grace=1).open(spec) as proc:
                assert await proc.receive_line() == b"up"
                inside = descendants(me)
                assert len(inside) >= 4  # bwrap, its init, sh, two sleeps
                scope.cancel()
        assert await wait_until(lambda: not any(alive(p) for p in inside), within=5.0)


def test_install_roots_cover_npm_venv_and_interpreters(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # an npm package whose bin is a link into node_modules, run by `env node`
    prefix = tmp_path / "opt" / "claude"
    package = prefix / "node_modules" / "@vendor" / "cli"
    (package / "bin").mkdir(parents=True)
    script = package / "bin" / "cli.js"
    script.write_text("#!/usr/bin/env node\n")
    dot_bin = prefix / "node_modules" / ".bin"
    dot_bin.mkdir()
    (dot_bin / "cli").symlink_to(script)
    node_prefix = tmp_path / "nodejs"
    (node_prefix / "bin").mkdir(parents=True)
    (node_prefix / "bin" / "node").write_bytes(b"\x7fELF")
    (node_prefix / "bin" / "node").chmod(0o755)
    roots = install_roots(str(dot_bin / "cli"), path_env=str(node_prefix / "bin"),
                          forbidden=(home,))
    assert roots == [prefix / "node_modules", node_prefix]
    # a console script in a virtualenv whose base Python lives elsewhere
    base = tmp_path / "pythons" / "3.13"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3.13").write_bytes(b"\x7fELF")
    venv = tmp_path / "venvs" / "vibe"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\n")
    (venv / "bin" / "python").symlink_to(base / "bin" / "python3.13")
    (venv / "bin" / "vibe").write_text(f"#!{venv / 'bin' / 'python'}\n")
    roots = install_roots(str(venv / "bin" / "vibe"), path_env="", forbidden=(home,))
    assert roots == [venv, base]


def test_install_roots_never_expose_a_home(tmp_path: Path) -> None:
    """A binary right in the owner's ``~/bin`` gives ``~/bin``, not the whole home."""
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    tool = home / "bin" / "tool"
    tool.write_bytes(b"\x7fELF")
    assert install_roots(str(tool), path_env="", forbidden=(home,)) == [home / "bin"]
    olp_home = tmp_path / "olp" / "state"
    (olp_home.parent / "bin").mkdir(parents=True)
    inside = olp_home.parent / "bin" / "tool"
    inside.write_bytes(b"\x7fELF")
    assert install_roots(str(inside), path_env="", forbidden=(olp_home,)) == [inside.parent]


async def test_a_confined_cli_answers_through_the_proxy(tmp_path: Path) -> None:
    """The default (sandbox on) with a fake claude: it answers, and reads only what it may."""
    config = {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "metered": True, "sandbox": True,
                      "env": {"FAKE_CLAUDE_SCENARIO": "success",
                              "ANTHROPIC_API_KEY": "sk-ant-fake"}}}}
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config) as proxy:
            def ask() -> str:
                answer = proxy.client().chat.completions.create(
                    model="sonnet", messages=[{"role": "user", "content": "hi"}])
                return answer.choices[0].message.content or ""

            assert await in_thread(ask) == "Hello from the mock upstream."
            health = await in_thread(lambda: proxy.get("/health").json())
            assert health["providers"]["anthropic"]["sandbox"] == "bubblewrap"
            assert descendants(proxy.process.pid) == set()


def test_bwrap_reports_its_version() -> None:
    """The sandbox tool the suite relies on is really there and runs."""
    assert BWRAP is not None
    done = subprocess.run([BWRAP, "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("bubblewrap")


async def test_kill_9_of_the_proxy_takes_every_confined_cli_with_it(tmp_path: Path) -> None:
    """The spawn watcher (docs/adr/0011) and the PID namespace: no confined CLI outlives a proxy
    killed with -9."""
    config = {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "metered": True, "sandbox": True,
                      "env": {"FAKE_CLAUDE_SCENARIO": "slow", "FAKE_CLAUDE_DELAY_S": "0.5",
                              "ANTHROPIC_API_KEY": "sk-ant-fake"}}}}
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config) as proxy:
            got_first = trio.Event()
            token = trio.lowlevel.current_trio_token()

            def read_until_gone() -> None:
                stream = proxy.client().chat.completions.create(
                    model="sonnet", messages=[{"role": "user", "content": "hi"}], stream=True)
                try:
                    for chunk in stream:
                        if chunk.choices and chunk.choices[0].delta.content:
                            trio.from_thread.run_sync(got_first.set, trio_token=token)
                except Exception:  # the proxy dies under us: any client error is expected
                    pass

            async with trio.open_nursery() as nursery:
                nursery.start_soon(in_thread, read_until_gone)
                await got_first.wait()
                spawned = descendants(proxy.process.pid)
                assert len(spawned) >= 3  # bwrap, the sandbox's init, the fake, its grandchild
                proxy.process.kill()
            assert await wait_until(lambda: not any(alive(p) for p in spawned), within=10.0)


async def test_only_allow_listed_etc_entries_are_visible(job_dir: Path) -> None:
    """Managed CLI settings (``/etc/claude-code``, ``/etc/codex``), ``/etc/shadow`` and every
    other ``/etc`` entry outside the allow-list do not exist inside, whatever the host has."""
    from olp.actors._sandbox import ETC_ALLOW

    with trio.fail_after(20):
        code, out, _ = await run_confined("ls -A /etc", job_dir)
    assert code == 0
    visible = set(out.split())
    assert visible and visible <= set(ETC_ALLOW)
    assert {"shadow", "claude-code", "codex"}.isdisjoint(visible)


class _WhereAmI(JsonLinesAdapter):
    """A "CLI" that says where it runs: its working directory, its home, and the first line
    of the file its invocation names by the working directory it was given."""

    def invocation(self, request: ChatRequest, *, binary: str, model: str, workdir: Path,
                   extra_args: Sequence[str] = ()) -> Invocation:
        head, tail = event_line(TextDelta(text="@")).decode().split("@")
        script = (f"printf '{head}%s %s %s{tail}\\n' \"$(pwd)\" \"$HOME\" "
                  f"\"$(cat {workdir / 'system.txt'})\"")
        return Invocation(argv=["/bin/sh", "-c", script], stdin=b"",
                          files={"system.txt": "readable"})


async def test_every_confined_spawn_sees_the_same_job_paths() -> None:
    """Inside the sandbox the job directory is /olp/job whatever its real, random path, so a
    CLI's prompt (which names its working directory) keeps the same prefix from spawn to
    spawn (issue #25); the runner's files are where the CLI's argv says they are."""
    assert BWRAP is not None
    runner = CliRunner(_WhereAmI(), ProcessSpawner(kill_grace=1), CliConfig(
        binary="/bin/sh", sandbox=Sandbox(BWRAP), proxy_env={"PATH": "/usr/bin:/bin"}))
    request = ChatRequest(model="m", messages=[Message(role="user",
                                                       content=[TextPart(text="hi")])])
    seen: list[str] = []
    bases: list[Path] = []
    real_job_dir = olp.actors._run_dir.job_dir

    def remember_job_dir() -> Path:
        bases.append(real_job_dir())
        return bases[-1]

    async def emit(event: object) -> None:
        if isinstance(event, TextDelta):
            seen.append(event.text)

    with trio.fail_after(30):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("olp.actors._cli_runner.job_dir", remember_job_dir)
            for _ in range(2):
                await runner.run(request, "m", emit)
    assert seen == ["/olp/job/work /olp/job/home readable"] * 2
    assert len(set(bases)) == 2 and all(not b.is_relative_to("/olp") for b in bases)


async def test_an_accounts_spawn_sees_only_its_own_login(tmp_path: Path) -> None:
    """Issue #30: a spawn of one account reads its own credential file (linked into its
    private home) and nothing of the owner's login or another account's."""
    import json

    from sample_requests import user_says

    from olp.config import load_settings
    from olp.runtime import provider_actors

    olp_home, owner = tmp_path / "olp", tmp_path / "owner"
    logins = {"alice": olp_home / "accounts" / "anthropic" / "alice",
              "bob": olp_home / "accounts" / "anthropic" / "bob",
              "owner": owner / ".claude"}
    for name, home in logins.items():
        home.mkdir(parents=True)
        (home / ".credentials.json").write_text(json.dumps({"token": f"{name}-secret"}))
    olp_home.joinpath("config.json").write_text(json.dumps({"providers": {
        "enabled": {"openai": False, "gemini": False, "qwen": False, "mistral": False},
        "anthropic": {"binary": "/bin/true", "accounts": {"alice": {}, "bob": {}}}}}))
    settings = load_settings({"OLP_HOME": str(olp_home)})
    runtime = provider_actors.build(settings, {"HOME": str(owner), "PATH": "/usr/bin:/bin"})
    runner = runtime.actors["anthropic@alice"].runner
    assert isinstance(runner, CliRunner) and runner.config.sandbox is not None
    script = ("cat $HOME/.claude/.credentials.json; echo; "
              + "; ".join(f"cat {home}/.credentials.json" for home in logins.values())
              + f"; ls -R {olp_home}/accounts")
    base = Path(tempfile.mkdtemp(prefix="olp-job-test-"))
    try:
        spec, _, _ = runner._prepare(user_says("hi"), "sonnet", base,
                                     argv=["/bin/sh", "-c", script])
        out: list[bytes] = []
        with trio.fail_after(20):
            async with ProcessSpawner(kill_grace=1).open(spec) as proc:
                while (line := await proc.receive_line()) is not None:
                    out.append(line)
                await proc.wait()
                err = proc.stderr_tail().decode()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    text = b"\n".join(out).decode()
    assert "alice-secret" in text  # its own login, through the link in its private home
    assert "bob-secret" not in text and "owner-secret" not in text
    assert err.count("No such file") == 2  # bob's and the owner's do not exist there
    # Of the accounts' directory, only the path to its own linked file exists.
    assert "bob" not in text.split("alice-secret", 1)[1] and "alice" in text
