"""The lockdown check's targets (issue #26): the version each says the test suite runs is the
one the installers pin, and ``tested`` recognises it in each CLI's ``--version`` line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from olp.lockdown import TARGETS, runs_tested_version
from olp.providers import kit

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"
PINNED = {"claude": "CLAUDE_VERSION", "codex": "CODEX_VERSION", "gemini": "GEMINI_VERSION",
          "qwen": "QWEN_VERSION", "vibe": "VIBE_VERSION"}


def pinned(variable: str) -> str:
    text = (SCRIPTS / "install-real-clis").read_text() + (SCRIPTS / "install-vibe").read_text()
    found = re.search(rf'^{variable}="([^"]+)"', text, re.MULTILINE)
    assert found is not None, variable
    return found.group(1)


@pytest.mark.parametrize("cli", sorted(PINNED))
def test_the_tested_version_is_the_pinned_one(cli: str) -> None:
    assert TARGETS[cli].tested == pinned(PINNED[cli])


def test_every_cli_provider_has_a_target() -> None:
    commands = {s.command for s in kit.builtin_specs() if s.kind == "cli"}
    assert commands == set(TARGETS)


@pytest.mark.parametrize(("cli", "line", "expected"), [
    ("claude", "2.1.332 (Claude Code)", True),
    ("claude", "2.1.340 (Claude Code)", False),
    ("codex", "codex-cli 0.171.0", True),
    ("codex", "codex-cli 0.171.01", False),
    ("gemini", "0.61.0", True),
    ("qwen", "0.24.4", True),
    ("vibe", "vibe 3.0.2", True),
    ("vibe", "vibe v3.0.2", True),
    ("vibe", None, False),
])
def test_the_tested_version_is_read_from_the_version_line(cli: str, line: str | None,
                                                          expected: bool) -> None:
    assert runs_tested_version(TARGETS[cli], line) is expected
