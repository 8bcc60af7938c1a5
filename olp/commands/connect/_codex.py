"""codex's configuration: ``~/.codex/config.toml``, and merging OLP's keys into an existing
one textually (no TOML writer: every other byte of the file stays)."""

from __future__ import annotations

import copy
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any, Final

from ._target import KEY_ENV, PROVIDER_NAME, ConnectError, Rendered, Target, toml_str


def _codex_root(t: Target) -> str:
    return f"model_provider = {toml_str('olp')}\nmodel = {toml_str(t.model)}\n"


def _codex_table(t: Target) -> str:
    return ("[model_providers.olp]\n"
            f"name = {toml_str(PROVIDER_NAME)}\n"
            f"base_url = {toml_str(t.v1)}\n"
            f"env_key = {toml_str(KEY_ENV)}\n"
            f"wire_api = {toml_str('responses')}\n")


def render(t: Target) -> Rendered:
    # Followed: https://developers.openai.com/codex/config-advanced (custom model providers:
    # [model_providers.<id>] with name, base_url, env_key, wire_api = "responses"; the root
    # keys model_provider and model) and https://developers.openai.com/codex/config-sample
    # ("root keys must appear before tables").
    return Rendered(Path(".codex/config.toml"), _codex_root(t) + "\n" + _codex_table(t), [
        f"export {KEY_ENV}={shlex.quote(t.key)} (add it to your shell profile): codex reads "
        "the key from it",
        "a codex profile that sets model_provider or model overrides these"])


_TOML_HEADER: Final = re.compile(r"\s*\[")
_OLP_HEADER: Final = re.compile(
    r"""\s*\[\s*model_providers\s*\.\s*(?:olp|"olp"|'olp')\s*\]\s*(?:#.*)?$""")
_ROOT_KEY: Final = re.compile(r"""\s*(?:"|')?(model_provider|model)(?:"|')?\s*=""")
_BLANK_OR_COMMENT: Final = re.compile(r"\s*(?:#.*)?$")


def merge(existing: str, t: Target, path: Path) -> tuple[str, list[str]]:
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
                           f"{render(t).text}") from None


def _set_root_keys(root: list[str], t: Target) -> list[str]:
    """Replace the ``model_provider``/``model`` lines of the root section, or add them after
    its last key (before the comments that lead into the first table)."""
    wanted = {"model_provider": f"model_provider = {toml_str('olp')}\n",
              "model": f"model = {toml_str(t.model)}\n"}
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
                           f"{render(t).text}")


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
