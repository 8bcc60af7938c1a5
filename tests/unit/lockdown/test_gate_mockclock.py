"""The lockdown gate (ADR 0024) under trio's MockClock, with a fake ``verify`` that takes a
scripted number of virtual seconds and returns a chosen verdict, and a real file as the
binary (the gate ``stat``s it: inode, size, modification time). Every test asserts the exact
virtual time at which :meth:`LockdownGate.admit` answered and how many checks ran."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio
import trio.testing

from olp.failures import Code
from olp.ir import Error
from olp.lockdown import TARGETS, LockdownGate, Verdict, fingerprint

CLAUDE = TARGETS["claude"]
VERSION = "2.1.332"  # the version the test suite runs (CLAUDE.tested)
TESTED_ON = "claude 2.1.332"
OK = Verdict("claude", VERSION)
OFFERS_BASH = Verdict("claude", VERSION, offered=("Bash",), problems=("offers Bash",))
OFFERS_TWO = Verdict("claude", VERSION, offered=("Bash", "Read"),
                     problems=("offers Bash, Read",))
NOTHING = "the CLI sent the mock no model request, so nothing could be checked"
UNCHECKED = Verdict("claude", VERSION, problems=(NOTHING,), checked=False)
NOT_YET = "claude-max: lockdown not verified yet (being checked)"


class Checks:
    """A fake ``verify``: call ``i`` takes ``took[i]`` virtual seconds (the last repeats) and
    returns ``verdicts[i]`` (the last repeats). ``started``: when each call began."""

    def __init__(self, *verdicts: Verdict, took: float | Sequence[float] = 2.0) -> None:
        self.verdicts = verdicts
        self.took = [took] if isinstance(took, (int, float)) else list(took)
        self.started: list[float] = []

    async def __call__(self) -> Verdict:
        i = len(self.started)
        self.started.append(trio.current_time())
        await trio.sleep(self.took[min(i, len(self.took) - 1)])
        return self.verdicts[min(i, len(self.verdicts) - 1)]


@pytest.fixture
def binary(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "claude"
    path.parent.mkdir()
    path.write_bytes(b"claude 2.1.332\n")
    return path


def replace(binary: Path, data: bytes = b"claude 2.1.333\n") -> None:
    """A self-update: a new file moved over the old one (another inode)."""
    new = binary.with_name(binary.name + ".new")
    new.write_bytes(data)
    os.replace(new, binary)


def grow(binary: Path) -> None:
    """A binary patched in place: the same inode, a new size."""
    inode = binary.stat().st_ino
    with binary.open("ab") as f:
        f.write(b"# patched\n")
    assert binary.stat().st_ino == inode


def gate_for(binary: Path, checks: Checks, **kwargs: float | bool) -> LockdownGate:
    return LockdownGate("claude-max", str(binary), checks, target=CLAUDE,
                        **kwargs)  # type: ignore[arg-type]


async def timed_admit(gate: LockdownGate) -> tuple[float, Error | None]:
    result = await gate.admit()
    return trio.current_time(), result


def assert_refused(result: Error | None, message: str) -> None:
    assert isinstance(result, Error)
    assert result.code == Code.LOCKDOWN_FAILED == "LOCKDOWN_FAILED"
    assert result.category == "unavailable"
    assert result.message == message


# --- the first check --------------------------------------------------------------------------

async def test_admit_waits_for_the_first_check_then_admits(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OK, took=3.0)
    gate = gate_for(binary, checks)
    await nursery.start(gate.serve)
    assert await timed_admit(gate) == (3.0, None)
    assert checks.started[0] == 0.0
    assert gate.verdict == OK


async def test_admits_before_serve_starts_wait_for_it(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OK, took=3.0)
    gate = gate_for(binary, checks)
    results: list[tuple[float, Error | None]] = []

    async def admit() -> None:
        results.append(await timed_admit(gate))

    nursery.start_soon(admit)
    nursery.start_soon(admit)
    await trio.sleep(5)
    assert results == []  # nothing checks yet: they wait
    await nursery.start(gate.serve)
    await trio.sleep(10)
    assert results == [(8.0, None), (8.0, None)]


async def test_a_failed_check_refuses_naming_the_tools(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OFFERS_BASH, took=4.0)
    gate = gate_for(binary, checks)
    await nursery.start(gate.serve)
    await trio.sleep(5)
    when, result = await timed_admit(gate)
    assert when == 5.0
    assert_refused(result, "claude-max: lockdown FAILED: offers Bash")
    assert result is not None and "offers Bash" in result.message
    # refused at once from now on, and not checked again: the binary is the same
    await trio.sleep(1000)
    for _ in range(5):
        when, result = await timed_admit(gate)
        assert when == 1005.0
        assert_refused(result, "claude-max: lockdown FAILED: offers Bash")
    assert checks.started == [0.0]


async def test_a_check_slower_than_wait_s_refuses_at_wait_s(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OK, took=100.0)
    gate = gate_for(binary, checks, wait_s=60.0)
    await nursery.start(gate.serve)
    when, result = await timed_admit(gate)
    assert when == 60.0
    assert_refused(result, NOT_YET)
    # the check goes on: a job that comes now waits for it (less than wait_s)
    assert await timed_admit(gate) == (100.0, None)
    assert checks.started[0] == 0.0


async def test_a_refusal_at_wait_s_leaves_the_next_job_its_own_wait(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OFFERS_TWO, took=150.0)
    gate = gate_for(binary, checks, wait_s=60.0)
    await nursery.start(gate.serve)
    when, result = await timed_admit(gate)
    assert when == 60.0
    assert_refused(result, NOT_YET)
    await trio.sleep(10)
    when, result = await timed_admit(gate)
    assert when == 130.0
    assert_refused(result, NOT_YET)
    when, result = await timed_admit(gate)
    assert when == 150.0
    assert_refused(result, "claude-max: lockdown FAILED: offers Bash, Read")


# --- a binary that changed --------------------------------------------------------------------

async def test_an_unchanged_binary_is_not_checked_again(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OK, took=2.0)
    gate = gate_for(binary, checks)
    await nursery.start(gate.serve)
    await trio.sleep(5)
    for i in range(100):
        assert await timed_admit(gate) == (5.0 + i, None)
        await trio.sleep(1)
    await trio.sleep(80_000)
    assert await timed_admit(gate) == (80_105.0, None)
    assert checks.started == [0.0]


async def test_a_replaced_binary_is_checked_once_before_the_next_job(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OK, took=2.0)
    gate = gate_for(binary, checks)
    await nursery.start(gate.serve)
    await trio.sleep(10)
    before = fingerprint(str(binary))
    replace(binary)
    assert fingerprint(str(binary)) != before
    assert checks.started == [0.0]  # nothing happens until a job comes
    assert await timed_admit(gate) == (12.0, None)
    assert checks.started == [0.0, 10.0]
    for _ in range(10):
        assert await timed_admit(gate) == (12.0, None)
    await trio.sleep(1000)
    assert checks.started == [0.0, 10.0]


async def test_jobs_that_find_the_binary_replaced_together_share_one_check(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OK, took=2.0)
    gate = gate_for(binary, checks)
    await nursery.start(gate.serve)
    await trio.sleep(10)
    replace(binary)
    results: list[tuple[float, Error | None]] = []

    async def admit() -> None:
        results.append(await timed_admit(gate))

    async with trio.open_nursery() as jobs:
        for _ in range(3):
            jobs.start_soon(admit)
    assert results == [(12.0, None)] * 3
    await trio.sleep(1000)
    assert checks.started == [0.0, 10.0]


async def test_a_binary_that_grew_in_place_is_checked_again(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OK, OFFERS_BASH, took=2.0)
    gate = gate_for(binary, checks)
    await nursery.start(gate.serve)
    await trio.sleep(10)
    grow(binary)
    when, result = await timed_admit(gate)
    assert when == 12.0
    assert_refused(result, "claude-max: lockdown FAILED: offers Bash")
    assert checks.started == [0.0, 10.0]


async def test_a_binary_that_now_fails_is_refused_and_a_fixed_one_admitted(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OK, OFFERS_TWO, OK, took=[1.0, 5.0, 3.0])
    gate = gate_for(binary, checks)
    await nursery.start(gate.serve)
    await trio.sleep(2)
    assert await timed_admit(gate) == (2.0, None)
    replace(binary, b"claude 2.1.400 (offers tools)\n")
    when, result = await timed_admit(gate)
    assert when == 7.0
    assert_refused(result, "claude-max: lockdown FAILED: offers Bash, Read")
    replace(binary, b"claude 2.1.401 (fixed)\n")
    assert await timed_admit(gate) == (10.0, None)
    assert checks.started == [0.0, 2.0, 7.0]


async def test_a_symlinked_binary_is_followed(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    link = binary.with_name("claude-on-path")
    link.symlink_to(binary)
    checks = Checks(OK, took=2.0)
    gate = LockdownGate("claude-max", str(link), checks, target=CLAUDE)
    await nursery.start(gate.serve)
    await trio.sleep(3)
    assert await timed_admit(gate) == (3.0, None)
    replace(binary)  # the launcher stays, the file it points to is new
    assert await timed_admit(gate) == (5.0, None)
    assert checks.started == [0.0, 3.0]


@pytest.mark.parametrize("during", ["first-check", "re-check"])
async def test_a_job_waiting_for_a_check_does_not_cause_another(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery,
        during: str) -> None:
    checks = Checks(OK, took=3.0)
    gate = gate_for(binary, checks)
    await nursery.start(gate.serve)
    if during == "re-check":
        await trio.sleep(10)
        replace(binary)
        async with trio.open_nursery() as jobs:
            jobs.start_soon(gate.admit)  # starts the re-check at 10
            await trio.sleep(1)
            assert await timed_admit(gate) == (13.0, None)  # came during it
        expected = [0.0, 10.0]
    else:
        assert await timed_admit(gate) == (3.0, None)
        expected = [0.0]
    await trio.sleep(1000)
    assert checks.started == expected


async def test_a_refusal_after_a_replaced_binary_at_wait_s(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OK, took=[2.0, 100.0])
    gate = gate_for(binary, checks, wait_s=60.0)
    await nursery.start(gate.serve)
    await trio.sleep(10)
    replace(binary)
    when, result = await timed_admit(gate)
    assert when == 70.0
    assert isinstance(result, Error) and result.code == Code.LOCKDOWN_FAILED
    assert await timed_admit(gate) == (110.0, None)


async def test_that_refusal_does_not_say_verified(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OK, took=[2.0, 100.0])
    gate = gate_for(binary, checks, wait_s=60.0)
    await nursery.start(gate.serve)
    await trio.sleep(10)
    replace(binary)
    _, result = await timed_admit(gate)
    assert result is not None
    assert "verified (" not in result.message, result.message


# --- a check that judged nothing --------------------------------------------------------------

async def test_an_unchecked_verdict_is_retried_every_retry_s(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(UNCHECKED, took=2.0)
    gate = gate_for(binary, checks, retry_s=60.0)
    await nursery.start(gate.serve)
    await trio.sleep(5)
    when, result = await timed_admit(gate)
    assert when == 5.0  # refused at once: it does not wait for the retry
    assert_refused(result, f"claude-max: lockdown FAILED: {NOTHING}")
    await trio.sleep(125)  # to 130
    assert checks.started == [0.0, 62.0, 124.0]


async def test_a_retry_that_judges_admits(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(UNCHECKED, OK, took=2.0)
    gate = gate_for(binary, checks, retry_s=30.0)
    await nursery.start(gate.serve)
    await trio.sleep(3)
    when, result = await timed_admit(gate)
    assert when == 3.0
    assert_refused(result, f"claude-max: lockdown FAILED: {NOTHING}")
    await trio.sleep(30)  # to 33: the retry runs from 32 to 34
    when, result = await timed_admit(gate)
    assert when == 33.0  # a retry in progress is not waited for
    assert_refused(result, f"claude-max: lockdown FAILED: {NOTHING}")
    await trio.sleep(2)
    assert await timed_admit(gate) == (35.0, None)
    await trio.sleep(1000)
    assert checks.started == [0.0, 32.0]  # a checked verdict is not retried


@pytest.mark.parametrize("verdict", [OK, OFFERS_BASH], ids=["verified", "failed"])
async def test_a_checked_verdict_is_not_retried(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery,
        verdict: Verdict) -> None:
    checks = Checks(verdict, took=2.0)
    gate = gate_for(binary, checks, retry_s=60.0)
    await nursery.start(gate.serve)
    await trio.sleep(80_000)
    assert checks.started == [0.0]


# --- off, status, verify ----------------------------------------------------------------------

async def test_a_gate_that_is_off_admits_and_never_checks(
        autojump_clock: trio.testing.MockClock, binary: Path) -> None:
    checks = Checks(OFFERS_BASH, took=2.0)
    gate = gate_for(binary, checks, enabled=False)
    assert gate.status() == {"state": "off", "line": "not checked (lockdown_check: false)",
                             "tested_on": TESTED_ON}
    async with trio.open_nursery() as nursery:
        await nursery.start(gate.serve)  # returns at once; the nursery has nothing left
    assert trio.current_time() == 0.0
    await gate.serve()
    assert trio.current_time() == 0.0
    replace(binary)
    assert await timed_admit(gate) == (0.0, None)
    assert checks.started == []
    assert gate.verdict is None
    assert gate.status() == {"state": "off", "line": "not checked (lockdown_check: false)",
                             "tested_on": TESTED_ON}


async def test_status_from_pending_to_verified(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    gate = gate_for(binary, Checks(OK, OFFERS_TWO, took=5.0))
    assert gate.status() == {"state": "pending", "line": "being checked",
                             "tested_on": TESTED_ON}
    await nursery.start(gate.serve)
    await trio.sleep(4)
    assert gate.status() == {"state": "pending", "line": "being checked",
                             "tested_on": TESTED_ON}
    await trio.sleep(2)
    assert gate.status() == {"state": "verified", "line": "verified (claude 2.1.332)",
                             "version": VERSION, "tested_on": TESTED_ON, "tested": True,
                             "offered": []}
    replace(binary)
    await gate.admit()
    assert trio.current_time() == 11.0
    assert gate.status() == {"state": "failed", "line": "FAILED: offers Bash, Read",
                             "version": VERSION, "tested_on": TESTED_ON, "tested": True,
                             "offered": ["Bash", "Read"]}


async def test_status_of_a_verified_version_the_suite_never_ran(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    gate = gate_for(binary, Checks(Verdict("claude", "2.2.0 (Claude Code)"), took=1.0))
    await nursery.start(gate.serve)
    await trio.sleep(2)
    assert gate.status() == {"state": "verified",
                             "line": "verified (claude 2.2.0 (Claude Code))",
                             "version": "2.2.0 (Claude Code)", "tested_on": TESTED_ON,
                             "tested": False, "offered": []}
    assert await timed_admit(gate) == (2.0, None)  # served: its own check passed


async def test_status_of_an_unchecked_verdict_is_failed(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    gate = gate_for(binary, Checks(Verdict("claude", None, problems=(NOTHING,), checked=False)))
    await nursery.start(gate.serve)
    await trio.sleep(3)
    assert gate.status() == {"state": "failed", "line": f"FAILED: {NOTHING}",
                             "version": None, "tested_on": TESTED_ON, "tested": False,
                             "offered": []}


async def test_verify_checks_without_changing_what_is_admitted(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OK, OFFERS_BASH, took=2.0)
    gate = gate_for(binary, checks)
    await nursery.start(gate.serve)
    await trio.sleep(3)
    assert await timed_admit(gate) == (3.0, None)
    assert await gate.verify() == OFFERS_BASH  # what `olp doctor` sees now
    assert trio.current_time() == 5.0
    assert gate.verdict == OK
    assert gate.status()["state"] == "verified"
    assert await timed_admit(gate) == (5.0, None)
    assert checks.started == [0.0, 3.0]


# --- cancellation -----------------------------------------------------------------------------

async def test_a_cancelled_admit_leaves_the_gate_working(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OK, took=10.0)
    gate = gate_for(binary, checks)
    await nursery.start(gate.serve)
    with trio.move_on_after(3) as waited:
        await gate.admit()
    assert waited.cancelled_caught
    assert trio.current_time() == 3.0
    assert await timed_admit(gate) == (10.0, None)


async def test_a_cancelled_admit_during_a_recheck_leaves_the_gate_working(
        autojump_clock: trio.testing.MockClock, binary: Path, nursery: trio.Nursery) -> None:
    checks = Checks(OK, OFFERS_BASH, took=[1.0, 10.0])
    gate = gate_for(binary, checks)
    await nursery.start(gate.serve)
    await trio.sleep(5)
    replace(binary)
    with trio.move_on_after(2) as waited:
        await gate.admit()
    assert waited.cancelled_caught and trio.current_time() == 7.0
    when, result = await timed_admit(gate)
    assert when == 15.0
    assert_refused(result, "claude-max: lockdown FAILED: offers Bash")
    assert checks.started[:2] == [0.0, 5.0]


async def test_cancelling_serve_mid_check_refuses_at_wait_s(
        autojump_clock: trio.testing.MockClock, binary: Path) -> None:
    checks = Checks(OK, took=10.0)
    gate = gate_for(binary, checks, wait_s=30.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(gate.serve)
        await trio.sleep(2)
        nursery.cancel_scope.cancel()
    when, result = await timed_admit(gate)
    assert when == 32.0
    assert_refused(result, NOT_YET)


# --- a check that raises ----------------------------------------------------------------------

async def test_a_check_that_raises_does_not_end_serve(
        autojump_clock: trio.testing.MockClock, binary: Path) -> None:
    calls: list[float] = []

    async def verify() -> Verdict:
        calls.append(trio.current_time())
        await trio.sleep(1)
        raise OSError(28, "No space left on device")

    gate = LockdownGate("claude-max", str(binary), verify, target=CLAUDE, retry_s=60.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(gate.serve)
        when, result = await timed_admit(gate)
        assert isinstance(result, Error) and result.code == Code.LOCKDOWN_FAILED
        nursery.cancel_scope.cancel()
