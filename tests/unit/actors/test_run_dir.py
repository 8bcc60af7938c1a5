"""The run directory and the reaper: a killed proxy's leftovers go, a live proxy's stay."""

from __future__ import annotations

import contextvars
import fcntl
import os
from pathlib import Path

from olp.actors._run_dir import (
    CURRENT_RUN_DIR,
    RunDir,
    job_dir,
    process_identity,
    reap_leftovers,
)


def leftover(root: Path, name: str, groups: dict[int, str]) -> Path:
    """A run directory as a killed proxy leaves it: nobody holds its lock."""
    path = root / name
    (path / "groups").mkdir(parents=True, mode=0o700)
    (path / "olp-job-abc" / "work").mkdir(parents=True)
    for pgid, identity in groups.items():
        (path / "groups" / str(pgid)).write_text(identity)
    return path


class Kills:
    def __init__(self, alive: dict[int, str]) -> None:
        self.alive = alive
        self.sent: list[tuple[int, int]] = []

    def kill(self, pgid: int, sig: int) -> None:
        self.sent.append((pgid, sig))

    def identity(self, pid: int) -> str | None:
        return self.alive.get(pid)


def test_a_dead_proxys_dir_is_removed_and_its_groups_killed(tmp_path: Path) -> None:
    dead = leftover(tmp_path, "olp-run-4242-ab12cd_x", {1000: "boot 55", 1001: "boot 56"})
    kills = Kills(alive={1000: "boot 55", 1001: "boot 56"})
    assert reap_leftovers(tmp_path, kill=kills.kill, identity=kills.identity) == [dead]
    assert not dead.exists()
    assert sorted(kills.sent) == [(1000, 9), (1001, 9)]


def test_a_recycled_or_vanished_pid_is_never_signalled(tmp_path: Path) -> None:
    dead = leftover(tmp_path, "olp-run-4242-ab12cd_x", {1000: "boot 55", 1001: "boot 56"})
    kills = Kills(alive={1000: "boot 99"})  # 1000 is someone else now; 1001 is gone
    assert reap_leftovers(tmp_path, kill=kills.kill, identity=kills.identity) == [dead]
    assert kills.sent == []


def test_a_live_proxys_dir_is_untouched(tmp_path: Path) -> None:
    live = RunDir.create(tmp_path)
    try:
        (live.path / "groups" / "1000").write_text("boot 55")
        kills = Kills(alive={1000: "boot 55"})
        assert reap_leftovers(tmp_path, kill=kills.kill, identity=kills.identity) == []
        assert (live.path / "groups" / "1000").exists() and kills.sent == []
    finally:
        live.close()
    assert not live.path.exists()


def test_the_lock_goes_with_its_holder(tmp_path: Path) -> None:
    """Whoever holds the lock (any process) keeps the directory; once released, it goes."""
    dead = leftover(tmp_path, "olp-run-7-zz", {})
    fd = os.open(dead, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    assert reap_leftovers(tmp_path) == [] and dead.exists()
    os.close(fd)  # what the kernel does when the holder dies
    assert reap_leftovers(tmp_path) == [dead] and not dead.exists()


def test_only_run_dirs_are_considered(tmp_path: Path) -> None:
    others = [tmp_path / n for n in ("olp-job-abc", ".olp-run-1-staging", "olp-run-x-y",
                                     "olp-run-12-ab.new")]
    for path in others:
        (path / "groups").mkdir(parents=True)
    (tmp_path / "olp-run-3-file").write_text("not a directory")
    assert reap_leftovers(tmp_path) == []
    assert all(p.exists() for p in others)


def test_a_new_run_dir_is_locked_private_and_named_for_its_pid(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path)
    try:
        assert run.path.name.startswith(f"olp-run-{os.getpid()}-")
        assert run.path.stat().st_mode & 0o777 == 0o700
        assert [p.name for p in tmp_path.iterdir()] == [run.path.name]  # no staging left
        fd = os.open(run.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                raise AssertionError("the run directory is not locked")
            except BlockingIOError:
                pass
        finally:
            os.close(fd)
    finally:
        run.close()


def test_groups_are_recorded_with_their_identity_and_forgotten(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path)
    try:
        me = os.getpid()
        run.record_group(me)
        identity = process_identity(me)
        assert identity is not None and (run.path / "groups" / str(me)).read_text() == identity
        run.forget_group(me)
        assert list((run.path / "groups").iterdir()) == []
    finally:
        run.close()


def test_job_dirs_go_into_the_current_run_dir(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path)
    try:
        def make() -> Path:
            CURRENT_RUN_DIR.set(run)
            return job_dir()

        inside = contextvars.copy_context().run(make)
        assert inside.parent == run.path and inside.name.startswith("olp-job-")
        outside = job_dir()  # no run directory in this context: the temp dir
        try:
            assert outside.parent != run.path
        finally:
            outside.rmdir()
    finally:
        run.close()
