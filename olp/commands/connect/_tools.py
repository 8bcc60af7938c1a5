"""Each tool's recipe: the configuration :func:`render` gives it, and how OLP's entries are
merged into a file the tool already has (JSON objects merged, YAML left alone: OLP carries no
YAML library; codex's TOML in :mod:`._codex`). Cline has no file: it gets the steps to follow."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from . import _codex
from ._target import (
    KEY_ENV,
    PROVIDER_NAME,
    ConnectError,
    Rendered,
    Target,
    json_text,
    yaml_str,
)

#: The context window Zed is told (it needs one; OLP's chains do not say).
ZED_MAX_TOKENS: Final = 200_000

#: Merges OLP's entries into a file's current text: the new text and notes, or ConnectError.
Merger = Callable[[str, Target, Path], "tuple[str, list[str]]"]


@dataclass(frozen=True, slots=True)
class Recipe:
    """How one tool is pointed at OLP: its configuration, and the merge into an existing
    file (``None``: the tool has no file OLP writes)."""

    render: Callable[[Target], Rendered]
    merge: Merger | None


class UnknownTool(ValueError):
    """A tool :data:`TOOLS` does not name."""


def render(tool: str, target: Target) -> Rendered:
    """The configuration pointing ``tool`` at ``target``."""
    return recipe(tool).render(target)


def recipe(tool: str) -> Recipe:
    """``tool``'s recipe; :class:`UnknownTool` for a tool :data:`TOOLS` does not name."""
    if tool not in RECIPES:
        raise UnknownTool(f"unknown tool {tool!r}; choose one of: {', '.join(TOOLS)}")
    return RECIPES[tool]


def _continue_entry(t: Target) -> str:
    """One ``models:`` list item for Continue."""
    return (f"  - name: {yaml_str(f'OLP {t.model}')}\n"
            "    provider: openai\n"
            f"    model: {yaml_str(t.model)}\n"
            f"    apiBase: {yaml_str(t.v1)}\n"
            f"    apiKey: {yaml_str(t.key)}\n"
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
    return (f"openai-api-base: {yaml_str(t.v1)}\n"
            f"openai-api-key: {yaml_str(t.key)}\n"
            f"model: {yaml_str(f'openai/{t.model}')}\n"
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
    return Rendered(Path(".config/zed/settings.json"), json_text(doc), [
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
    return Rendered(Path(".claude/settings.json"), json_text({"env": env}), [
        f"for one shell instead: {shell} claude",
        "unset ANTHROPIC_API_KEY if it is set: Claude Code would send it as well",
        "Claude Code also asks for a small fast model (claude-haiku-…) for background work: "
        "give it a chain in OLP or set ANTHROPIC_DEFAULT_HAIKU_MODEL"])


def _keep_yaml(existing: str, ours: str, path: Path, todo: str) -> tuple[str, list[str]]:
    """A YAML file is never rewritten: unchanged when it is already ours, else refused with
    ``todo``, what the person should do."""
    if existing == ours:
        return existing, []
    raise ConnectError(f"{path} already exists and OLP does not rewrite YAML; {todo}")


def _merge_continue(existing: str, t: Target, path: Path) -> tuple[str, list[str]]:
    return _keep_yaml(existing, _continue(t).text, path, "add this entry under its `models:` "
                      f"list yourself:\n{_continue_entry(t)}")


def _merge_aider(existing: str, t: Target, path: Path) -> tuple[str, list[str]]:
    return _keep_yaml(existing, _aider(t).text, path, "set these keys in it yourself "
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
    return json_text(data), []


def _merge_claude_code(existing: str, t: Target, path: Path) -> tuple[str, list[str]]:
    hint = f"Add these entries to its \"env\" object yourself:\n{_claude_code(t).text}"
    data = _load_json_object(existing, path, hint)
    env = _object_at(data, ("env",), path)
    env.update(_claude_env(t))
    notes = (["settings.json's env also sets ANTHROPIC_API_KEY: remove it, or Claude Code "
              "sends that key too"] if "ANTHROPIC_API_KEY" in env else [])
    return json_text(data), notes


#: Every tool ``olp connect`` knows, by the name the command takes.
RECIPES: Final[dict[str, Recipe]] = {
    "aider": Recipe(_aider, _merge_aider),
    "claude-code": Recipe(_claude_code, _merge_claude_code),
    "cline": Recipe(_cline, None),
    "codex": Recipe(_codex.render, _codex.merge),
    "continue": Recipe(_continue, _merge_continue),
    "zed": Recipe(_zed, _merge_zed),
}
TOOLS: Final[tuple[str, ...]] = tuple(RECIPES)
