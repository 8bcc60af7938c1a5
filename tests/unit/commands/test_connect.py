"""``olp connect``: each tool's configuration parses in its own format and points at OLP, and
``--write`` creates private files, merges JSON and TOML without losing the user's own keys
(keeping a ``.bak``), is idempotent, and refuses what it cannot do safely."""

from __future__ import annotations

import io
import json
import stat
import tomllib
from pathlib import Path

import pytest

from olp.commands import connect
from olp.commands.connect import PLACEHOLDER, TOOLS, ConnectError, Target, render, run, write

BASE = "http://127.0.0.1:4567"
V1 = f"{BASE}/v1"
KEY = "olp_test_0123456789abcdef"
MODEL = "sonnet"
TARGET = Target(BASE, KEY, MODEL)
WRITABLE = ("aider", "claude-code", "codex", "continue", "zed")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def everything(r: connect.Rendered) -> str:
    return r.text + "\n".join(r.notes)


def run_cmd(tool: str, home: Path, *, key: str | None = KEY, write_files: bool = False,
            base_url: str = BASE) -> tuple[int, str]:
    out = io.StringIO()
    code = run(tool, base_url=base_url, key=key, model=MODEL, write_files=write_files,
               home=home, out=out)
    return code, out.getvalue()


# --- render ------------------------------------------------------------------------------


def test_tools_are_the_documented_six() -> None:
    assert TOOLS == ("aider", "claude-code", "cline", "codex", "continue", "zed")


def test_continue_yaml_has_an_openai_model_entry() -> None:
    r = render("continue", TARGET)
    assert r.path == Path(".continue/config.yaml")
    lines = r.text.splitlines()
    for line in ("name: OLP", "schema: v1", "models:", "    provider: openai",
                 f'    model: "{MODEL}"', f'    apiBase: "{V1}"', f'    apiKey: "{KEY}"',
                 "    roles:", "      - chat", "      - edit", "      - apply"):
        assert line in lines


def test_aider_yaml_uses_the_openai_prefix_and_silences_model_warnings() -> None:
    r = render("aider", TARGET)
    assert r.path == Path(".aider.conf.yml")
    lines = r.text.splitlines()
    for line in (f'openai-api-base: "{V1}"', f'openai-api-key: "{KEY}"',
                 f'model: "openai/{MODEL}"', "show-model-warnings: false"):
        assert line in lines
    assert any(line.startswith("edit-format: ") for line in lines)


def test_zed_json_is_an_openai_compatible_provider_without_the_key() -> None:
    r = render("zed", TARGET)
    assert r.path == Path(".config/zed/settings.json")
    provider = json.loads(r.text)["language_models"]["openai_compatible"]["OLP"]
    assert provider["api_url"] == V1
    (model,) = provider["available_models"]
    assert model["name"] == MODEL and model["max_tokens"] > 0
    assert KEY not in r.text  # Zed keeps keys out of settings.json
    assert any(f"OLP_API_KEY={KEY}" in note for note in r.notes)


def test_codex_toml_selects_a_responses_provider_keyed_from_the_environment() -> None:
    r = render("codex", TARGET)
    assert r.path == Path(".codex/config.toml")
    doc = tomllib.loads(r.text)
    assert doc["model_provider"] == "olp" and doc["model"] == MODEL
    assert doc["model_providers"]["olp"] == {
        "name": "OLP", "base_url": V1, "env_key": "OLP_API_KEY", "wire_api": "responses"}
    assert KEY not in r.text
    assert any(f"export OLP_API_KEY={KEY}" in note for note in r.notes)


def test_claude_code_env_uses_the_root_url() -> None:
    r = render("claude-code", TARGET)
    assert r.path == Path(".claude/settings.json")
    env = json.loads(r.text)["env"]
    assert env == {"ANTHROPIC_BASE_URL": BASE, "ANTHROPIC_AUTH_TOKEN": KEY,
                   "ANTHROPIC_MODEL": MODEL}
    assert any(f"ANTHROPIC_BASE_URL={BASE} " in note for note in r.notes)


def test_cline_is_steps_for_its_settings_panel() -> None:
    r = render("cline", TARGET)
    assert r.path is None
    for text in ("OpenAI Compatible", f"Base URL: {V1}", f"API Key: {KEY}",
                 f"Model ID: {MODEL}"):
        assert text in r.text


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("base", [f"{BASE}/", V1, f"{V1}/"])
def test_a_base_url_with_v1_or_a_slash_is_normalised(tool: str, base: str) -> None:
    assert everything(render(tool, Target(base, KEY, MODEL))) == everything(render(tool, TARGET))


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_gets_the_url_key_and_model(tool: str) -> None:
    text = everything(render(tool, TARGET))
    assert KEY in text and MODEL in text
    if tool == "claude-code":
        assert BASE in text and "/v1" not in text
    else:
        assert V1 in text


def test_render_of_an_unknown_tool_is_refused() -> None:
    with pytest.raises(connect.UnknownTool, match="choose one of"):
        render("cursor", TARGET)


def test_toml_strings_are_escaped() -> None:
    odd = 'a"b\\c\nd\x7f'
    doc = tomllib.loads(render("codex", Target(BASE, KEY, odd)).text)
    assert doc["model"] == odd


# --- write: new files --------------------------------------------------------------------


@pytest.mark.parametrize("tool", WRITABLE)
def test_write_creates_a_private_file_in_new_private_directories(tool: str,
                                                                 tmp_path: Path) -> None:
    result = write(tool, TARGET, tmp_path)
    rendered = render(tool, TARGET)
    assert rendered.path is not None
    path = tmp_path / rendered.path
    assert result.path == path and result.changed and result.backup is None
    assert path.read_text() == rendered.text
    assert mode(path) == 0o600
    for parent in path.relative_to(tmp_path).parents:
        if parent != Path("."):
            assert mode(tmp_path / parent) == 0o700
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left


@pytest.mark.parametrize("tool", WRITABLE)
def test_write_twice_changes_nothing(tool: str, tmp_path: Path) -> None:
    first = write(tool, TARGET, tmp_path)
    text = first.path.read_text()
    again = write(tool, TARGET, tmp_path)
    assert not again.changed and again.backup is None
    assert first.path.read_text() == text
    assert not first.path.with_name(first.path.name + ".bak").exists()


@pytest.mark.parametrize("tool", ["codex", "zed"])
def test_the_key_is_written_to_no_file_when_the_tool_reads_it_elsewhere(
        tool: str, tmp_path: Path) -> None:
    write(tool, TARGET, tmp_path)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text()


def test_write_follows_a_symlinked_file(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "settings.json").write_text('{"model": "opus"}\n')
    (tmp_path / ".claude").mkdir()
    link = tmp_path / ".claude" / "settings.json"
    link.symlink_to(dotfiles / "settings.json")
    write("claude-code", TARGET, tmp_path)
    assert link.is_symlink()
    data = json.loads((dotfiles / "settings.json").read_text())
    assert data["model"] == "opus" and data["env"]["ANTHROPIC_AUTH_TOKEN"] == KEY


# --- write: merging JSON -----------------------------------------------------------------


def test_claude_code_merges_into_the_users_settings(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    original = json.dumps({"permissions": {"allow": ["Bash(ls)"]}, "model": "opus",
                           "env": {"DISABLE_TELEMETRY": "1",
                                   "ANTHROPIC_BASE_URL": "https://old"}}, indent=4)
    path.write_text(original)
    path.chmod(0o644)
    result = write("claude-code", TARGET, tmp_path)
    data = json.loads(path.read_text())
    assert data["permissions"] == {"allow": ["Bash(ls)"]} and data["model"] == "opus"
    assert data["env"] == {"DISABLE_TELEMETRY": "1", "ANTHROPIC_BASE_URL": BASE,
                           "ANTHROPIC_AUTH_TOKEN": KEY, "ANTHROPIC_MODEL": MODEL}
    assert result.backup == path.with_name("settings.json.bak")
    assert result.backup.read_text() == original and mode(result.backup) == 0o600
    assert mode(path) == 0o600  # it holds the key now
    assert not write("claude-code", TARGET, tmp_path).changed


def test_claude_code_warns_about_an_api_key_it_leaves_in_place(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"env": {"ANTHROPIC_API_KEY": "sk-ant-x"}}')
    result = write("claude-code", TARGET, tmp_path)
    assert json.loads(path.read_text())["env"]["ANTHROPIC_API_KEY"] == "sk-ant-x"
    assert any("ANTHROPIC_API_KEY" in note and "remove" in note for note in result.notes)


def zed_settings(tmp_path: Path, data: object) -> Path:
    path = tmp_path / ".config" / "zed" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    return path


def test_zed_merges_into_the_users_settings(tmp_path: Path) -> None:
    other = {"api_url": "https://example.com/v1", "available_models": []}
    mine = {"name": "opus", "max_tokens": 1000}
    path = zed_settings(tmp_path, {
        "theme": "One Dark",
        "language_models": {"anthropic": {"version": "1"}, "openai_compatible": {
            "Other": other,
            "OLP": {"api_url": "http://old/v1", "custom_headers": {"X-A": "b"},
                    "available_models": [mine, {"name": MODEL, "max_tokens": 1}]}}}})
    original = path.read_text()
    result = write("zed", TARGET, tmp_path)
    data = json.loads(path.read_text())
    assert data["theme"] == "One Dark"
    models = data["language_models"]
    assert models["anthropic"] == {"version": "1"}
    assert models["openai_compatible"]["Other"] == other
    olp = models["openai_compatible"]["OLP"]
    assert olp["api_url"] == V1 and olp["custom_headers"] == {"X-A": "b"}
    assert [m["name"] for m in olp["available_models"]] == ["opus", MODEL]
    assert olp["available_models"][0] == mine
    assert result.backup is not None and result.backup.read_text() == original
    again = write("zed", TARGET, tmp_path)
    assert not again.changed
    assert len(json.loads(path.read_text())["language_models"]["openai_compatible"]["OLP"]
               ["available_models"]) == 2


def test_zed_keeps_the_mode_of_a_settings_file_without_the_key(tmp_path: Path) -> None:
    path = zed_settings(tmp_path, {"theme": "One Dark"})
    path.chmod(0o644)
    write("zed", TARGET, tmp_path)
    assert mode(path) == 0o644


@pytest.mark.parametrize("text", [
    '// Zed settings\n{\n  "theme": "One Dark"\n}\n',
    '{\n  "theme": "One Dark",\n}\n',
])
def test_zed_settings_with_comments_or_trailing_commas_are_refused(
        text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / ".config" / "zed" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(ConnectError, match="not plain JSON"):
        write("zed", TARGET, tmp_path)
    code, _ = run_cmd("zed", tmp_path, write_files=True)
    assert code == 1
    err = capsys.readouterr().err
    assert '"openai_compatible"' in err and V1 in err  # the snippet to paste
    assert path.read_text() == text
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]


def test_a_json_file_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text("[1, 2]")
    with pytest.raises(ConnectError, match="JSON object"):
        write("claude-code", TARGET, tmp_path)
    path.write_text('{"env": "nope"}')
    with pytest.raises(ConnectError, match="env is not an object"):
        write("claude-code", TARGET, tmp_path)
    assert path.read_text() == '{"env": "nope"}'


# --- write: merging TOML -----------------------------------------------------------------

CODEX_USER = """\
# my codex settings
model = "gpt-5.5"
approval_policy = "on-request"
model_reasoning_effort = "high"

# tools
[mcp_servers.docs]
command = "docs-mcp"
args = ["--port", "1"]

[model_providers.other]
name = "Other"
base_url = "https://other.example/v1"
wire_api = "responses"
"""


def codex_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text(text)
    return path


def test_codex_merges_keeping_the_rest_of_the_file_byte_for_byte(tmp_path: Path) -> None:
    path = codex_config(tmp_path, CODEX_USER)
    result = write("codex", TARGET, tmp_path)
    text = path.read_text()
    doc = tomllib.loads(text)
    assert doc["model_provider"] == "olp" and doc["model"] == MODEL
    assert doc["approval_policy"] == "on-request" and doc["model_reasoning_effort"] == "high"
    assert doc["mcp_servers"] == {"docs": {"command": "docs-mcp", "args": ["--port", "1"]}}
    assert doc["model_providers"]["other"]["base_url"] == "https://other.example/v1"
    assert doc["model_providers"]["olp"]["base_url"] == V1
    tables = CODEX_USER[CODEX_USER.index("# tools"):]
    assert tables in text  # the user's tables, unchanged
    assert text.startswith("# my codex settings\nmodel = ")
    assert text.index("model_provider =") < text.index("[")  # a root key, before any table
    assert result.backup is not None and result.backup.read_text() == CODEX_USER
    assert any("model was 'gpt-5.5'" in note for note in result.notes)
    again = write("codex", TARGET, tmp_path)
    assert not again.changed and path.read_text() == text
    assert text.count("[model_providers.olp]") == 1


def test_codex_replaces_its_own_table_in_place(tmp_path: Path) -> None:
    user = ('model_provider = "openai"\n\n'
            '[model_providers.olp]\nname = "old"\nbase_url = "http://old/v1"\n\n'
            '[profiles.fast]\nmodel = "gpt-5.4-mini"\n')
    path = codex_config(tmp_path, user)
    result = write("codex", TARGET, tmp_path)
    text = path.read_text()
    assert text.endswith('\n\n[profiles.fast]\nmodel = "gpt-5.4-mini"\n')
    assert text.count("[model_providers.olp]") == 1 and "http://old" not in text
    doc = tomllib.loads(text)
    assert doc["profiles"] == {"fast": {"model": "gpt-5.4-mini"}}
    assert doc["model_provider"] == "olp" and doc["model"] == MODEL
    assert any("model_provider was 'openai'" in note for note in result.notes)
    assert not write("codex", TARGET, tmp_path).changed


def test_codex_keeps_the_mode_of_a_config_without_the_key(tmp_path: Path) -> None:
    path = codex_config(tmp_path, 'approval_policy = "never"\n')
    path.chmod(0o640)
    write("codex", TARGET, tmp_path)
    assert mode(path) == 0o640
    assert tomllib.loads(path.read_text())["approval_policy"] == "never"


def test_codex_of_an_empty_file_is_what_render_gives(tmp_path: Path) -> None:
    path = codex_config(tmp_path, "")
    write("codex", TARGET, tmp_path)
    assert path.read_text() == render("codex", TARGET).text


@pytest.mark.parametrize("text, match", [
    ("model = \n", "not valid TOML"),
    ('[model_providers]\nolp = { name = "mine", base_url = "http://x/v1" }\n',
     "could not merge"),
])
def test_codex_refuses_what_it_cannot_merge_safely(text: str, match: str,
                                                   tmp_path: Path) -> None:
    path = codex_config(tmp_path, text)
    with pytest.raises(ConnectError, match=match) as info:
        write("codex", TARGET, tmp_path)
    assert "[model_providers.olp]" in str(info.value)  # the snippet to paste
    assert path.read_text() == text
    assert not path.with_name("config.toml.bak").exists()


# --- write: YAML is never rewritten ------------------------------------------------------


@pytest.mark.parametrize("tool, path, expected", [
    ("continue", ".continue/config.yaml", f'    apiBase: "{V1}"'),
    ("aider", ".aider.conf.yml", f'openai-api-base: "{V1}"'),
])
def test_an_existing_yaml_file_is_refused_with_the_snippet(
        tool: str, path: str, expected: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / path
    file.parent.mkdir(exist_ok=True)
    file.write_text("# mine\nname: Mine\n")
    with pytest.raises(ConnectError, match="does not rewrite YAML"):
        write(tool, TARGET, tmp_path)
    code, out = run_cmd(tool, tmp_path, write_files=True)
    assert code == 1 and out == ""
    assert expected in capsys.readouterr().err.splitlines()
    assert file.read_text() == "# mine\nname: Mine\n"
    assert not file.with_name(file.name + ".bak").exists()


# --- run ---------------------------------------------------------------------------------


def test_run_prints_the_configuration(tmp_path: Path) -> None:
    code, out = run_cmd("codex", tmp_path)
    assert code == 0
    assert "~/.codex/config.toml" in out and 'wire_api = "responses"' in out
    assert f"OLP_API_KEY={KEY}" in out
    assert list(tmp_path.iterdir()) == []  # printing writes nothing


def test_run_writes_and_says_where(tmp_path: Path) -> None:
    code, out = run_cmd("claude-code", tmp_path, write_files=True)
    assert code == 0
    path = tmp_path / ".claude" / "settings.json"
    assert f"wrote {path}" in out
    code, out = run_cmd("claude-code", tmp_path, write_files=True)
    assert code == 0 and "nothing changed" in out


def test_run_of_an_unknown_tool_exits_2(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cmd("cursor", tmp_path)
    assert code == 2 and out == ""
    assert "unknown tool 'cursor'" in capsys.readouterr().err


def test_cline_cannot_be_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConnectError, match="no config file"):
        write("cline", TARGET, tmp_path)
    for key in (KEY, None):
        code, out = run_cmd("cline", tmp_path, key=key, write_files=True)
        assert code == 1 and out == ""
        assert "Cline has no config file" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tool", TOOLS)
def test_without_a_key_the_placeholder_is_printed(tool: str, tmp_path: Path) -> None:
    code, out = run_cmd(tool, tmp_path, key=None)
    assert code == 0 and PLACEHOLDER in out


@pytest.mark.parametrize("tool", WRITABLE)
def test_without_a_key_write_is_refused(tool: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cmd(tool, tmp_path, key=None, write_files=True)
    assert code == 1 and out == ""
    assert "give --key" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConnectError, match="give --key"):
        write(tool, Target(BASE, PLACEHOLDER, MODEL), tmp_path)


@pytest.mark.parametrize("url", ["127.0.0.1:4567", "ftp://host", "http://"])
def test_run_refuses_a_url_that_is_not_http(url: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run_cmd("zed", tmp_path, base_url=url)
    assert code == 1 and "not an http" in capsys.readouterr().err


def test_an_unwritable_home_is_an_error_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude").write_text("a file where the directory should be")
    code, _ = run_cmd("claude-code", home, write_files=True)
    assert code == 1 and "olp connect:" in capsys.readouterr().err
