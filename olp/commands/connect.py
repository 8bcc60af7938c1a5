"""``olp connect TOOL [--write] [--key KEY] [--model MODEL]``: point a coding tool at OLP.

:func:`render` gives the configuration for one tool (Continue, aider, Zed, Cline, codex, Claude
Code) as the text of its config file (Cline: the steps to follow in its settings panel) and
notes for the person; :func:`write` puts it in the user's home without destroying anything:
JSON and TOML files are merged (a copy of the old file is kept as ``<file>.bak``), a YAML file
that already exists is left alone (we carry no YAML library), and a file we cannot parse is
refused. Re-running changes nothing. :func:`run` is the command; it blocks on file I/O.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import sys
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO
from urllib.parse import urlsplit

TOOLS: Final[tuple[str, ...]] = ("aider", "claude-code", "cline", "codex", "continue", "zed")
#: Printed where the key goes when none was given.
PLACEHOLDER: Final = "<your OLP key>"
#: The environment variable codex and Zed read the key from (Zed: provider id ``OLP``).
KEY_ENV: Final = "OLP_API_KEY"
#: The provider's name in Zed (its key variable is ``<NAME>_API_KEY``) and in codex.
PROVIDER_NAME: Final = "OLP"
#: The context window Zed is told (it needs one; OLP's chains do not say).
ZED_MAX_TOKENS: Final = 200_000


@dataclass(frozen=True)
class Target:
    """Where the tool should send its requests: OLP's base URL (no ``/v1``), a key, a model."""

    base_url: str
    key: str
    model: str

    @property
    def root(self) -> str:
        """``http://HOST:PORT`` (what Anthropic-style clients append ``/v1/messages`` to)."""
        return self.base_url.rstrip("/").removesuffix("/v1").rstrip("/")

    @property
    def v1(self) -> str:
        """``http://HOST:PORT/v1`` (the OpenAI-style base URL)."""
        return f"{self.root}/v1"


@dataclass(frozen=True)
class Rendered:
    """A tool's configuration. ``path`` is relative to HOME (``None``: nothing to write);
    ``text`` is what :func:`write` writes to a new file, or the instructions."""

    path: Path | None
    text: str
    notes: list[str]


@dataclass(frozen=True)
class WriteResult:
    """What :func:`write` did: the file, its backup (if an existing file changed), whether
    anything changed, and notes for the person."""

    path: Path
    backup: Path | None
    changed: bool
    notes: list[str]


class ConnectError(Exception):
    """A refusal, with a message for the person (often with the snippet to paste)."""


class UnknownTool(ValueError):
    """A tool :data:`TOOLS` does not name."""


# --- rendering ---------------------------------------------------------------------------


def render(tool: str, target: Target) -> Rendered:
    """The configuration pointing ``tool`` at ``target``."""
    return _RENDERERS[_known(tool)](target)


def _known(tool: str) -> str:
    if tool not in TOOLS:
        raise UnknownTool(f"unknown tool {tool!r}; choose one of: {', '.join(TOOLS)}")
    return tool


def _yaml_str(value: str) -> str:
    """A YAML double-quoted scalar (JSON's escapes are YAML's)."""
    return json.dumps(value, ensure_ascii=False)


def _toml_str(value: str) -> str:
    """A TOML basic string."""
    escaped = "".join(
        "\\" + ch if ch in '"\\' else f"\\u{ord(ch):04x}" if ord(ch) < 0x20 or ch == "\x7f"
        else ch for ch in value)
    return f'"{escaped}"'


def _json_text(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _home_path(path: Path) -> str:
    return f"~/{path.as_posix()}"


def _continue_entry(t: Target) -> str:
    """One ``models:`` list item for Continue."""
    return (f"  - name: {_yaml_str(f'OLP {t.model}')}\n"
            "    provider: openai\n"
            f"    model: {_yaml_str(t.model)}\n"
            f"    apiBase: {_yaml_str(t.v1)}\n"
            f"    apiKey: {_yaml_str(t.key)}\n"
            "    roles:\n      - chat\n      - edit\n      - apply\n")


def _continue(t: Target) -> Rendered:
    # Followed: https://docs.continue.dev/customize/model-providers/top-level/openai
    # ("OpenAI API compatible providers": provider openai + apiBase) and
    # https://docs.continue.dev/reference (config.yaml: name, version, schema v1, models, roles).
    text = ("# Written by `olp connect continue`.\n"
            "name: OLP\nversion: 0.0.1\nschema: v1\nmodels:\n" + _continue_entry(t))
    return Rendered(Path(".continue/config.yaml"), text, [
        f"pick \"OLP {t.model}\" in Continue's model menu; it reloads config.yaml on save",
        "config.yaml holds your key: keep it out of repositories"])


def _aider_keys(t: Target) -> str:
    # show-model-warnings is an argparse BooleanOptionalAction: ConfigArgParse (>= 1.5.3)
    # turns `show-model-warnings: false` into --no-show-model-warnings, but
    # `no-show-model-warnings: true` into --show-model-warnings (the opposite).
    return (f"openai-api-base: {_yaml_str(t.v1)}\n"
            f"openai-api-key: {_yaml_str(t.key)}\n"
            f"model: {_yaml_str(f'openai/{t.model}')}\n"
            "edit-format: diff\n"
            "show-model-warnings: false\n")


def _aider(t: Target) -> Rendered:
    # Followed: https://aider.chat/docs/llms/openai-compat.html (openai-api-base, the
    # openai/<model> prefix), https://aider.chat/docs/config/aider_conf.html and
    # https://aider.chat/docs/config/options.html (edit-format, show-model-warnings).
    text = "# Written by `olp connect aider`.\n" + _aider_keys(t)
    return Rendered(Path(".aider.conf.yml"), text, [
        "a .aider.conf.yml in your repository or current directory takes precedence over "
        "this one",
        "the file holds your key: keep it out of repositories"])


def _zed_provider(t: Target) -> dict[str, Any]:
    return {"api_url": t.v1, "available_models": [_zed_model(t)]}


def _zed_model(t: Target) -> dict[str, Any]:
    return {"name": t.model, "display_name": f"{t.model} (OLP)", "max_tokens": ZED_MAX_TOKENS,
            "capabilities": {"tools": True, "images": False, "parallel_tool_calls": False,
                             "prompt_cache_key": False, "chat_completions": True}}


def _zed(t: Target) -> Rendered:
    # Followed: https://zed.dev/docs/ai/use-api-access#openai-compatible (the current shape:
    # language_models.openai_compatible.<provider id> with api_url and available_models, each
    # model with max_tokens and a capabilities object; the key is never in settings.json but
    # in the keychain or <PROVIDER ID>_API_KEY).
    doc = {"language_models": {"openai_compatible": {PROVIDER_NAME: _zed_provider(t)}}}
    return Rendered(Path(".config/zed/settings.json"), _json_text(doc), [
        f"Zed reads the key from {KEY_ENV}, never from settings.json: "
        f"export {KEY_ENV}={shlex.quote(t.key)} before starting Zed (one started from the "
        "dock or launcher needs it in your login environment), or enter it under "
        f"Settings > AI > LLM Providers > {PROVIDER_NAME}",
        f"max_tokens ({ZED_MAX_TOKENS}) is the context window Zed assumes; set your model's"])


def _cline(t: Target) -> Rendered:
    # Followed: https://docs.cline.bot/provider-config/openai-compatible (settings panel:
    # API Provider "OpenAI Compatible", Base URL, API Key, Model ID).
    text = ("Cline keeps its provider settings in VS Code, not in a file. In VS Code:\n"
            "  1. Open the Cline panel and click its settings (gear) icon.\n"
            "  2. API Provider: OpenAI Compatible\n"
            f"  3. Base URL: {t.v1}\n"
            f"  4. API Key: {t.key}\n"
            f"  5. Model ID: {t.model}\n"
            "  6. Save (Done), then start a task.\n")
    return Rendered(None, text, [])


def _codex_root(t: Target) -> str:
    return f"model_provider = {_toml_str('olp')}\nmodel = {_toml_str(t.model)}\n"


def _codex_table(t: Target) -> str:
    return ("[model_providers.olp]\n"
            f"name = {_toml_str(PROVIDER_NAME)}\n"
            f"base_url = {_toml_str(t.v1)}\n"
            f"env_key = {_toml_str(KEY_ENV)}\n"
            f"wire_api = {_toml_str('responses')}\n")


def _codex(t: Target) -> Rendered:
    # Followed: https://developers.openai.com/codex/config-advanced (custom model providers:
    # [model_providers.<id>] with name, base_url, env_key, wire_api = "responses"; the root
    # keys model_provider and model) and https://developers.openai.com/codex/config-sample
    # ("root keys must appear before tables").
    return Rendered(Path(".codex/config.toml"), _codex_root(t) + "\n" + _codex_table(t), [
        f"export {KEY_ENV}={shlex.quote(t.key)} (add it to your shell profile): codex reads "
        "the key from it",
        "a codex profile that sets model_provider or model overrides these"])


def _claude_env(t: Target) -> dict[str, str]:
    return {"ANTHROPIC_BASE_URL": t.root, "ANTHROPIC_AUTH_TOKEN": t.key,
            "ANTHROPIC_MODEL": t.model}


def _claude_code(t: Target) -> Rendered:
    # Followed: https://code.claude.com/docs/en/llm-gateway (ANTHROPIC_BASE_URL without /v1,
    # ANTHROPIC_AUTH_TOKEN sent as a Bearer token, both in settings.json's env),
    # https://code.claude.com/docs/en/env-vars (ANTHROPIC_MODEL, ANTHROPIC_DEFAULT_HAIKU_MODEL)
    # and https://code.claude.com/docs/en/settings (~/.claude/settings.json, its env object).
    env = _claude_env(t)
    shell = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return Rendered(Path(".claude/settings.json"), _json_text({"env": env}), [
        f"for one shell instead: {shell} claude",
        "unset ANTHROPIC_API_KEY if it is set: Claude Code would send it as well",
        "Claude Code also asks for a small fast model (claude-haiku-…) for background work: "
        "give it a chain in OLP or set ANTHROPIC_DEFAULT_HAIKU_MODEL"])


_RENDERERS: Final[dict[str, Callable[[Target], Rendered]]] = {
    "aider": _aider, "claude-code": _claude_code, "cline": _cline, "codex": _codex,
    "continue": _continue, "zed": _zed,
}


# --- merging into an existing file -------------------------------------------------------

#: Merges OLP's entries into a file's current text: the new text and notes, or ConnectError.
Merger = Callable[[str, Target, Path], "tuple[str, list[str]]"]


def _merge_continue(existing: str, t: Target, path: Path) -> tuple[str, list[str]]:
    if existing == _continue(t).text:
        return existing, []
    raise ConnectError(
        f"{path} already exists and OLP does not rewrite YAML; add this entry under its "
        f"`models:` list yourself:\n{_continue_entry(t)}")


def _merge_aider(existing: str, t: Target, path: Path) -> tuple[str, list[str]]:
    if existing == _aider(t).text:
        return existing, []
    raise ConnectError(
        f"{path} already exists and OLP does not rewrite YAML; set these keys in it yourself "
        f"(replacing any it already has):\n{_aider_keys(t)}")


def _load_json_object(existing: str, path: Path, hint: str) -> dict[str, Any]:
    if not existing.strip():
        return {}
    try:
        data = json.loads(existing)
    except ValueError as exc:
        raise ConnectError(f"{path} is not plain JSON ({exc}); OLP will not rewrite it. "
                           f"{hint}") from None
    if not isinstance(data, dict):
        raise ConnectError(f"{path} does not hold a JSON object; OLP will not rewrite it. "
                           f"{hint}")
    return data


def _object_at(data: dict[str, Any], keys: tuple[str, ...], path: Path) -> dict[str, Any]:
    """The object at ``keys`` (created where missing); a non-object there is refused."""
    for key in keys:
        data = data.setdefault(key, {})
        if not isinstance(data, dict):
            raise ConnectError(f"{path}: {'.'.join(keys)} is not an object; OLP will not "
                               "rewrite it")
    return data


def _zed_hint(t: Target) -> str:
    members = _zed(t).text.rstrip().splitlines()[1:-1]
    return ("Zed allows comments and trailing commas; add this inside its top-level { } "
            "yourself (merging it into an existing \"language_models\"):\n"
            + "\n".join(members) + "\n")


def _merge_zed(existing: str, t: Target, path: Path) -> tuple[str, list[str]]:
    data = _load_json_object(existing, path, _zed_hint(t))
    providers = _object_at(data, ("language_models", "openai_compatible"), path)
    olp = providers.setdefault(PROVIDER_NAME, {})
    if not isinstance(olp, dict) or not isinstance(olp.get("available_models", []), list):
        raise ConnectError(f"{path}: the {PROVIDER_NAME} provider is not an object with a "
                           "list of available_models; OLP will not rewrite it")
    olp["api_url"] = t.v1
    others = [m for m in olp.get("available_models", [])
              if not (isinstance(m, dict) and m.get("name") == t.model)]
    olp["available_models"] = [*others, _zed_model(t)]
    return _json_text(data), []


def _merge_claude_code(existing: str, t: Target, path: Path) -> tuple[str, list[str]]:
    hint = f"Add these entries to its \"env\" object yourself:\n{_claude_code(t).text}"
    data = _load_json_object(existing, path, hint)
    env = _object_at(data, ("env",), path)
    env.update(_claude_env(t))
    notes = (["settings.json's env also sets ANTHROPIC_API_KEY: remove it, or Claude Code "
              "sends that key too"] if "ANTHROPIC_API_KEY" in env else [])
    return _json_text(data), notes


_TOML_HEADER: Final = re.compile(r"\s*\[")
_OLP_HEADER: Final = re.compile(
    r"""\s*\[\s*model_providers\s*\.\s*(?:olp|"olp"|'olp')\s*\]\s*(?:#.*)?$""")
_ROOT_KEY: Final = re.compile(r"""\s*(?:"|')?(model_provider|model)(?:"|')?\s*=""")
_BLANK_OR_COMMENT: Final = re.compile(r"\s*(?:#.*)?$")


def _merge_codex(existing: str, t: Target, path: Path) -> tuple[str, list[str]]:
    """Set the root keys and replace (or append) ``[model_providers.olp]`` textually; every
    other byte of the file stays. The result is parsed again and compared with the original
    before anything is written."""
    before = _load_toml(existing, path, t)
    text = existing if not existing or existing.endswith("\n") else existing + "\n"
    lines = text.splitlines(keepends=True)
    first = next((i for i, ln in enumerate(lines) if _TOML_HEADER.match(ln)), len(lines))
    root = "".join(_set_root_keys(lines[:first], t))
    merged = _put_olp_table(root, "".join(lines[first:]), t)
    _check_codex_merge(before, merged, path, t)
    replaced = [f"{k} was {before[k]!r}" for k, new in (("model_provider", "olp"),
                                                         ("model", t.model))
                if before.get(k, new) != new]
    notes = [f"{', '.join(replaced)}; {path.name}.bak has the old file"] if replaced else []
    return merged, notes


def _load_toml(text: str, path: Path, t: Target) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConnectError(f"{path} is not valid TOML ({exc}); OLP will not rewrite it. "
                           f"Add this yourself (root keys before any table):\n"
                           f"{_codex(t).text}") from None


def _set_root_keys(root: list[str], t: Target) -> list[str]:
    """Replace the ``model_provider``/``model`` lines of the root section, or add them after
    its last key (before the comments that lead into the first table)."""
    wanted = {"model_provider": f"model_provider = {_toml_str('olp')}\n",
              "model": f"model = {_toml_str(t.model)}\n"}
    out, seen = [], set()
    for line in root:
        m = _ROOT_KEY.match(line)
        if m:
            seen.add(m.group(1))
            line = wanted[m.group(1)]
        out.append(line)
    missing = [wanted[k] for k in wanted if k not in seen]
    if not missing:
        return out
    pos = len(out)
    while pos > 0 and _BLANK_OR_COMMENT.match(out[pos - 1]):
        pos -= 1
    gap = ["\n"] if pos == 0 and out else []
    return out[:pos] + missing + gap + out[pos:]


def _put_olp_table(root: str, tables: str, t: Target) -> str:
    """``root`` and ``tables`` with the ``[model_providers.olp]`` table replaced (up to the
    next header) or appended."""
    lines = tables.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if _OLP_HEADER.match(ln)), None)
    block = _codex_table(t)
    if start is None:
        text = root + tables
        return text + ("\n" if text else "") + block
    end = next((i for i in range(start + 1, len(lines)) if _TOML_HEADER.match(lines[i])),
               len(lines))
    gap = "\n" if end < len(lines) else ""
    return root + "".join(lines[:start]) + block + gap + "".join(lines[end:])


def _check_codex_merge(before: dict[str, Any], merged: str, path: Path, t: Target) -> None:
    """The merged file parses, sets OLP's keys, and leaves everything else as it was."""
    try:
        after = tomllib.loads(merged)
    except tomllib.TOMLDecodeError:
        after = {}
    olp = after.get("model_providers", {}).get("olp", {})
    ours = tomllib.loads(_codex_table(t))["model_providers"]["olp"]
    ok = (after.get("model_provider") == "olp" and after.get("model") == t.model
          and isinstance(olp, dict) and all(olp.get(k) == v for k, v in ours.items())
          and _without_olp(after) == _without_olp(before))
    if not ok:
        raise ConnectError(f"{path}: OLP could not merge its settings without changing "
                           "others (is model_providers.olp defined inline?); the file is "
                           f"unchanged. Add this yourself (root keys before any table):\n"
                           f"{_codex(t).text}")


def _without_olp(doc: dict[str, Any]) -> dict[str, Any]:
    rest = copy.deepcopy(doc)
    rest.pop("model_provider", None)
    rest.pop("model", None)
    providers = rest.get("model_providers")
    if isinstance(providers, dict):
        providers.pop("olp", None)
        if not providers:
            rest.pop("model_providers")
    return rest


_MERGERS: Final[dict[str, Merger]] = {
    "aider": _merge_aider, "claude-code": _merge_claude_code, "codex": _merge_codex,
    "continue": _merge_continue, "zed": _merge_zed,
}


# --- writing -----------------------------------------------------------------------------


def write(tool: str, target: Target, home: Path) -> WriteResult:
    """Write (or merge) ``tool``'s configuration under ``home``; :class:`ConnectError` when
    that would destroy something or cannot be done."""
    rendered = render(tool, target)
    if rendered.path is None:
        raise ConnectError("Cline has no config file to write: it keeps its settings in VS "
                           "Code. Run `olp connect cline` (without --write) and enter what it "
                           "prints in Cline's settings panel.")
    if not target.key or target.key == PLACEHOLDER:
        raise ConnectError("give --key KEY (an OLP key) to write a configuration")
    path = home / rendered.path
    real = path.resolve() if path.is_symlink() else path  # write through a dotfiles link
    existing = _read(real)
    notes = list(rendered.notes)
    if existing is None:
        new = rendered.text
    else:
        new, extra = _MERGERS[tool](existing, target, path)
        notes += extra
    if new == existing:
        return WriteResult(path, None, False, notes)
    backup = _backup(path, real) if existing is not None else None
    _make_dirs(real.parent)
    _atomic_write(real, new.encode("utf-8"), _mode_for(real, new, target.key))
    return WriteResult(path, backup, True, notes)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ConnectError(f"{path} is not UTF-8 text; OLP will not rewrite it") from None


def _backup(path: Path, real: Path) -> Path:
    backup = path.with_name(path.name + ".bak")
    _atomic_write(backup, real.read_bytes(), 0o600)
    return backup


def _mode_for(path: Path, text: str, key: str) -> int:
    """0600 for a new file or one holding the key; an existing file keeps its mode."""
    if key in text or not path.exists():
        return 0o600
    return path.stat().st_mode & 0o777


def _make_dirs(directory: Path) -> None:
    """Create the missing directories down to ``directory``, each 0700."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for d in reversed(missing):
        d.mkdir(mode=0o700)
        d.chmod(0o700)


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to a private temporary file beside ``path``, then rename it over."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".olp-tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- the command -------------------------------------------------------------------------


def run(tool: str, *, base_url: str, key: str | None, model: str, write_files: bool,
        home: Path, out: TextIO) -> int:
    """``olp connect``: 0 done, 1 refused (the reason on stderr), 2 unknown tool."""
    if tool not in TOOLS:
        return _fail(f"unknown tool {tool!r}; choose one of: {', '.join(TOOLS)}", 2)
    if not _is_http_url(base_url):
        return _fail(f"{base_url!r} is not an http:// or https:// URL with a host")
    target = Target(base_url, key or PLACEHOLDER, model)
    if not write_files:
        _print_rendered(tool, render(tool, target), out)
        return 0
    if tool != "cline" and key is None:
        return _fail("give --key KEY (an OLP key, e.g. from `olp keys create NAME`) to write "
                     "a configuration; without --write the placeholder is printed instead")
    try:
        result = write(tool, target, home)
    except (ConnectError, OSError) as exc:
        return _fail(str(exc))
    _print_result(result, out)
    return 0


def _fail(message: str, code: int = 1) -> int:
    print(f"olp connect: {message}", file=sys.stderr)
    return code


def _is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _print_rendered(tool: str, rendered: Rendered, out: TextIO) -> None:
    if rendered.path is not None:
        print(f"# {_home_path(rendered.path)} (`olp connect {tool} --write --key KEY` writes "
              "it)", file=out)
    print(rendered.text, end="", file=out)
    for note in rendered.notes:
        print(f"# {note}", file=out)


def _print_result(result: WriteResult, out: TextIO) -> None:
    if not result.changed:
        print(f"{result.path} already points at OLP; nothing changed", file=out)
    elif result.backup is not None:
        print(f"updated {result.path} (the old file is {result.backup})", file=out)
    else:
        print(f"wrote {result.path}", file=out)
    for note in result.notes:
        print(f"- {note}", file=out)
