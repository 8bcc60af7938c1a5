"""An adapter's ``Invocation.home_files``: written into the spawn's private home, after the
owner's ``home_files`` (so the adapter's settings win), never into the working directory, and
part of the spawn's identity (a warm process started with other settings is not reused)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from sample_requests import user_says

from olp.actors import CliConfig, CliRunner, Invocation
from olp.actors.testing import FakeSpawner, JsonLinesAdapter
from olp.ir import ChatRequest


class SettingsAdapter(JsonLinesAdapter):
    """Writes its own settings file into the home, as gemini's and qwen's adapters do."""

    def __init__(self, settings: str = '{"tools": []}') -> None:
        self.settings = settings

    def invocation(self, request: ChatRequest, *, binary: str, model: str, workdir: Path,
                   extra_args: Sequence[str] = ()) -> Invocation:
        return Invocation(argv=[binary], stdin=b"hi",
                          home_files={".cli/settings.json": self.settings})


def runner(adapter: SettingsAdapter, home_files: dict[str, str] | None = None) -> CliRunner:
    return CliRunner(adapter, FakeSpawner(lambda spec: []),
                     CliConfig(binary="cli", proxy_env={}, home_files=home_files or {}))


def test_home_files_land_in_the_private_home_and_win_over_the_owners(tmp_path: Path) -> None:
    run = runner(SettingsAdapter(), {".cli/settings.json": '{"tools": ["shell"]}',
                                     ".cli/other": "kept"})
    spec, _, workdir = run._prepare(user_says("hi"), "m", tmp_path)
    home = tmp_path / "home"
    assert (home / ".cli/settings.json").read_text() == '{"tools": []}'
    assert (home / ".cli/other").read_text() == "kept"
    assert (home / ".cli/settings.json").stat().st_mode & 0o777 == 0o600
    assert list(workdir.iterdir()) == []  # the working directory stays empty
    assert spec.env["HOME"] == str(home)


def test_a_home_file_outside_the_home_is_refused(tmp_path: Path) -> None:
    class Escaping(SettingsAdapter):
        def invocation(self, request: ChatRequest, *, binary: str, model: str,
                       workdir: Path, extra_args: Sequence[str] = ()) -> Invocation:
            return Invocation(argv=[binary], stdin=b"", home_files={"../x": "y"})

    with pytest.raises(ValueError, match="outside"):
        runner(Escaping())._prepare(user_says("hi"), "m", tmp_path)
    assert not (tmp_path / "x").exists()


def test_home_files_are_part_of_the_spawn_identity() -> None:
    request = user_says("hi")
    one = runner(SettingsAdapter('{"a": 1}')).spawn_identity(request, "m")
    same = runner(SettingsAdapter('{"a": 1}')).spawn_identity(request, "m")
    other = runner(SettingsAdapter('{"a": 2}')).spawn_identity(request, "m")
    assert one == same and one != other
